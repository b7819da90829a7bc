/*
 * sysnotify.h - answers a call's seccomp notifications: every system call
 * its filter denies (sysfilter.c) stops in the kernel until the daemon
 * answers; we answer EPERM on the loop and note the call's name in the
 * call's denials (denials.h).
 */
#ifndef TD_SYSNOTIFY_H
#define TD_SYSNOTIFY_H

struct td_denials;
struct td_sysnotify;

/* Watch listener fd (taken: closed by td_sysnotify_stop, or here on
 * failure) for the call whose denials are d; d must outlive the watch.
 * NULL when it cannot be watched (logged; the call's denied calls then
 * fail with ENOSYS, unreported, once the fd is closed). */
struct td_sysnotify *td_sysnotify_start(int fd, struct td_denials *d);
/* Stop answering and close (NULL: nothing). Denied calls still waiting,
 * and any later ones, fail with ENOSYS: the kernel's answer without a
 * listener; by then the call's processes are dead or dying. */
void td_sysnotify_stop(struct td_sysnotify *n);

#endif
