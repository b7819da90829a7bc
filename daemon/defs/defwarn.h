/*
 * defwarn.h - what is wrong with a definition that loads: the one list
 * that toolexecd --check reports and the daemon logs at start and reload.
 */
#ifndef TD_DEFWARN_H
#define TD_DEFWARN_H

#include <stdbool.h>

#include "tool.h"

/* Each problem of t (loaded from a file of t->file_mode) that the loader
 * lets through, one line each ("KEY: ..."), calling fn(line, arg); views:
 * whether calls get a view of their own (else nothing is hidden from them).
 * Returns how many. */
unsigned td_defwarn(const struct td_tool *t, bool views, void (*fn)(const char *line, void *arg),
                    void *arg);
/* After a load: each tool's problems logged (a warning, once a load), and
 * what its view hides kept in its view_note for its failed calls. */
void td_defwarn_loaded(struct td_registry *r);

#endif
