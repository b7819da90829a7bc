/*
 * enforced.h - what confinement a call ran under: the
 * "enforced" member of its tool_execution_completed event and audit record
 * (with "env_credentials", the names of the variables an MCP server's
 * environment got from the credentials directory, never their values).
 */
#ifndef TD_ENFORCED_H
#define TD_ENFORCED_H

#include <jansson.h>

struct td_tool;

/* The record of a call of t whose process ran as uid (-1: not known, a
 * warm call's uid of its own); a new reference, NULL when out of memory.
 * The parts that are t's alone are made at its first call and kept. */
json_t *td_enforced_call(struct td_tool *t, long long uid);

#endif
