/*
 * warmcall.h - what makes a warm call's process (P2, lib/warmp1.c) a call of
 * its own rather than a copy of its template: its own uid where
 * the daemon gave one, its own process limit, an empty capability bounding
 * set, and no reach into its PID 1 or the template; its capabilities in the
 * call's user namespace dropped and a second filter stacked on the tool's.
 * Internal to libtoolexec.
 */
#ifndef TE_WARMCALL_H
#define TE_WARMCALL_H

#include <stdbool.h>
#include <sys/types.h>

/* The uid and gid the daemon mapped into P1's user namespace for the call
 * (a root daemon's --call-uids); set false: the template's are kept. */
struct te_warm_id {
    bool set;
    uid_t uid;
    gid_t gid;
};

/* In P2, with P1's capabilities in the call's user namespace still held
 * (its bounding set P1's, emptied: te_warm_drop_bounding()): its
 * id taken (setresgid, setresuid), dumpable again
 * (a uid change clears it; P2's memory is its own, unlike P1's), and
 * RLIMIT_NPROC nproc (0: none) as soft and hard limit. 0, or -1 with errno. */
int te_warm_call_identity(const struct te_warm_id *id, unsigned long nproc);

/* In P1's first half (a spare's, made ahead): the bounding set emptied,
 * which P2 inherits at its fork. Not in P2: one prctl per capability, ~41,
 * each through whatever hooks the host has on prctl (bench/floor_layers.py:
 * 58-62 us a call on this VM, whose BPF hook sees every prctl), was on the
 * call's path. P1 needs none of the bounding set: it never execs, and its
 * effective capabilities stay. 0, or -1 with errno. */
int te_warm_drop_bounding(void);

/* In P2 where no view's Landlock domain is coming (ll_abi > 0): a Landlock
 * domain of its own, which the kernel bars from ptrace access (/proc/PID/mem,
 * /proc/PID/fd, pidfd_getfd) to what is outside it: P1 and the template,
 * whose memory P1 shares and so cannot be made non-dumpable where P1 maps
 * its own ids (an unprivileged daemon). 0, or -1 with errno. */
int te_warm_fence(int ll_abi);

/* In P2: every capability dropped (those P1 held in the call's user
 * namespace). 0, or -1 with errno. */
int te_warm_drop_caps(void);

/* What only the set-up needed, refused from the call's process on; with
 * EPERM, unreported: a stacked filter cannot notify the daemon (one
 * listener per chain, the template's; daemon/confine/sysfilter.c). 0, or
 * -1 with errno (ENOSYS on an architecture it does not know). */
int te_warm_stack_filter(void);

#endif
