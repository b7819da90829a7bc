/*
 * fswatch.h - the file-system refusals of a root daemon's calls, as data
 * for their "denied" (denials.h). A BPF program (fswatch.bpf.c) on the
 * end of every system call that names a path records the failed ones of
 * the uids watched; each call of a root daemon runs as a uid of its own
 * (identity.c), so a uid is a call: identity.c watches a uid while it is
 * lent (only this daemon's descendants: another daemon may lend the same
 * uids, toolexec sandbox's --user be another process's too), the worker collects its call's records
 * at the call's end (every process of the call gone, every record in the ring by then). Where BPF
 * cannot be loaded (an unprivileged daemon: CAP_BPF and CAP_PERFMON; a
 * kernel without it; not x86-64) nothing is watched, and the start-up log
 * says so.
 */
#ifndef TD_FSWATCH_H
#define TD_FSWATCH_H

#include <stdbool.h>
#include <sys/types.h>

struct td_denials;
struct td_fsview;

/* At start, on td_loop: load and attach, with room for calls uids watched
 * at once (0: a daemon's, TD_FSW_CALLS_MAX; toolexec sandbox's, 1). 0, or
 * -errno (said in the log at level info: a daemon without it runs as
 * before). */
int td_fswatch_start(unsigned calls);
/* The same in two: the program loaded and attached, and uids may be
 * watched, on any one thread while no other uses this (it touches nothing
 * of the loop's); then its ring served on td_loop, on the loop's thread.
 * td_fswatch_active() is true from the first. */
int td_fswatch_load(unsigned calls);
int td_fswatch_serve(void);
bool td_fswatch_active(void);
/* Watch uid (a call's own, identity.c) from now on / no more. */
void td_fswatch_watch(uid_t uid);
void td_fswatch_unwatch(uid_t uid);
/* The call running as uid is over (its processes gone): its refusals into
 * d, each classified by v, its tool's view (cmd its program, for the
 * view's plan: what Landlock lets it write), and its records dropped.
 * Nothing when uid is not watched. */
void td_fswatch_collect(uid_t uid, struct td_denials *d, struct td_fsview *v, const char *cmd);
void td_fswatch_stop(void);

#endif
