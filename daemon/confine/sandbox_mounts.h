/*
 * sandbox_mounts.h - steps 7b and 7c of sandbox.c's child (sandbox_mounts.c),
 * for sandbox.c alone.
 */
#ifndef TD_SANDBOX_MOUNTS_H
#define TD_SANDBOX_MOUNTS_H

#include <stdbool.h>

struct td_spawn;

/* In the child, in its new mount namespace: every mount private, then the
 * call's view (s->fs) or the work dir hidden under a tmpfs with the call's
 * directory bound back (and s->hide covered), a fresh /proc last. Only
 * system calls, no memory of the daemon's written. With may_mknod (the
 * parent holds CAP_MKNOD in the initial user namespace) the view's
 * devices are made again rather than bound (TD_FS_NODE). 0, or -1 with
 * errno set. */
int td_sandbox_mounts(const struct td_spawn *s, bool may_mknod);

#endif
