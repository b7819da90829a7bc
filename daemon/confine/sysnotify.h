/*
 * sysnotify.h - answers a call's seccomp notifications: every system call
 * its filter denies (sysfilter.c) stops in the kernel until the daemon
 * answers; we answer EPERM on the loop and note the call's name in the
 * call's denials (denials.h).
 */
#ifndef TD_SYSNOTIFY_H
#define TD_SYSNOTIFY_H

#include <sys/types.h>

struct td_denials;
struct td_sysnotify;

/* Watch listener fd (taken: closed by td_sysnotify_stop, or here on
 * failure) for the call whose denials are d; d must outlive the watch.
 * NULL when it cannot be watched (logged; the call's denied calls then
 * fail with ENOSYS, unreported, once the fd is closed). */
struct td_sysnotify *td_sysnotify_start(int fd, struct td_denials *d);
/* A warm tool's template's listener: one for the template and
 * every call forked from it. route says whose a notification of pid is:
 * TD_SYSNOTIFY_CALL with *d the call's list (NULL: the call's result is
 * out, noted nowhere), TD_SYSNOTIFY_OWN the template's (logged once a
 * name, reported in no call), TD_SYSNOTIFY_LATER a call not known yet:
 * held unanswered until td_sysnotify_retry() routes it again (at most
 * 2 s, then answered as no call's). Every one is answered EPERM. route is
 * not called after td_sysnotify_stop(). label names the tool in the log. */
enum { TD_SYSNOTIFY_CALL, TD_SYSNOTIFY_OWN, TD_SYSNOTIFY_LATER };
typedef int (*td_sysnotify_route_fn)(void *ctx, pid_t pid, struct td_denials **d);
struct td_sysnotify *td_sysnotify_start_routed(int fd, td_sysnotify_route_fn route, void *ctx,
                                               const char *label);
/* Route the held notifications again (a call became known). NULL: nothing. */
void td_sysnotify_retry(struct td_sysnotify *n);
/* Stop answering and close (NULL: nothing). Denied calls still waiting,
 * and any later ones, fail with ENOSYS: the kernel's answer without a
 * listener; by then the call's processes are dead or dying. */
void td_sysnotify_stop(struct td_sysnotify *n);

#endif
