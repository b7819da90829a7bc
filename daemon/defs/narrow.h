/*
 * narrow.h - a tool narrowed by a run request's "policy": for a
 * batch ("policy") or one call ("calls[i].policy"), keys as in a definition
 * ("network", "filesystem", "timeout_ms", "limits", and "memory_mb",
 * "processes" on their own), each only ever narrower than the tool's.
 */
#ifndef TD_NARROW_H
#define TD_NARROW_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct td_tool;

/* t narrowed by pol (NULL or JSON null: not at all). *out is then t itself
 * (one more reference) when nothing but the timeout narrows, else a tool
 * of its own (td_tool_unref frees it; "derived" from t). *timeout_ms: in,
 * the ceiling so far (0: none); out, the narrowed one. 0, or < 0 with err
 * naming key (e.g. "policy.network.allow[1]") and why: a widening, an
 * unknown key, a value of the wrong type. */
int td_narrow_tool(struct td_tool *t, json_t *pol, const char *key, struct td_tool **out,
                   uint64_t *timeout_ms, char *err, size_t errlen);

#endif
