/*
 * toolpaths.h - the paths a tool needs, checked against its view: its
 * command, an interpreter's script, the SDK's library, its
 * PYTHONPATH. Listed with a definition's other problems (defwarn.c); a failed call
 * says so.
 */
#ifndef TD_TOOLPATHS_H
#define TD_TOOLPATHS_H

#include <stdbool.h>
#include <stddef.h>

#include "tool.h"

/* Each path t needs that its view hides, one line each ("KEY: PATH: hidden
 * by ...; add ..."), calling fn(line, arg); returns how many. */
unsigned td_toolpaths_check(const struct td_tool *t, void (*fn)(const char *line, void *arg),
                            void *arg);
/* The same, joined with "; " into a string for the tool's failed calls
 * (NULL: none; the caller frees it). */
char *td_toolpaths_note(const struct td_tool *t);

/* Is cmd an interpreter whose first argument is its script (python3, sh...)? */
bool td_toolpaths_interpreter(const char *cmd);

#endif
