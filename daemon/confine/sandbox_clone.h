/*
 * sandbox_clone.h - how sandbox.c starts its children (sandbox_clone.c),
 * for sandbox.c alone.
 */
#ifndef TD_SANDBOX_CLONE_H
#define TD_SANDBOX_CLONE_H

#include <sys/types.h>

/* fn(arg) started as a child with these clone flags (CLONE_VM |
 * CLONE_VFORK: in our memory, on the one child stack) and SIGCHLD at its
 * exit. Born in the cgroup cgroup_dir (>= 0) where the kernel can (clone3,
 * CLONE_INTO_CGROUP): *join is set before the child runs, -1 then, else
 * cgroup_procs, which the child must write "0" to itself (step 1b). The
 * pid, or -1 with errno set. */
pid_t td_sandbox_clone(int (*fn)(void *), void *arg, int flags, int cgroup_dir, int cgroup_procs,
                       int *join);

#endif
