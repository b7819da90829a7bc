/*
 * learndef.h - the tool definition key "learn": a
 * tool whose calls run permissively while their paths, hosts and denied
 * system calls are recorded (confine/learn.h), and the definition the
 * record proposes (the tool's own keys, "learn" removed, the proposal's in).
 */
#ifndef TD_LEARNDEF_H
#define TD_LEARNDEF_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct td_learn;
struct td_tool;

/* Set at start by whoever starts the watch (fswatch.h): are calls'
 * file-system refusals seen? A "refused" proposal without them says so. */
extern bool td_learndef_refusals_seen;

/* After the rest of def is parsed into t: with "learn": true, t gets the
 * host's file system, an egress proxy letting any host through, cold
 * calls only, and a record of all its calls (t->learned). 0, or -EINVAL /
 * -ENOMEM with err naming file and key. */
int td_learndef_parse(const char *file, json_t *def, struct td_tool *t, char *err, size_t errlen);
/* The proposal of t's calls so far, NULL when t does not learn. */
json_t *td_learndef_proposal(const struct td_tool *t);
/* The proposal of l (one call's record) for t: with "learn": "refused"
 * only its "filesystem" read and write, and what was not proposed. */
json_t *td_learndef_propose(const struct td_tool *t, const struct td_learn *l);
/* t's definition with proposal (td_learndef_proposal's) applied: "learn"
 * removed, "filesystem" read and write, "network", "syscalls" and
 * "deny_syscalls" the proposal's (a "hide", "root" and the allow-list's
 * limits kept). New reference; NULL when t does not learn. */
json_t *td_learndef_definition(const struct td_tool *t, const json_t *proposal);

#endif
