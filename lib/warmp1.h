/*
 * warmp1.h - a warm call's PID 1 (P1): the steps it runs, from its clone by
 * the template (lib/warm.c) to the fork of the call's process (P2), and the
 * words it and the template say on the socketpair between them ("hand").
 * Internal to libtoolexec.
 */
#ifndef TE_WARMP1_H
#define TE_WARMP1_H

#include <errno.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include "rawsys.h"

/* P1 shares the template's memory (CLONE_VM) where its last steps can be
 * raw system calls (initwait.h), except under AddressSanitizer, which cannot
 * follow P2's jump from P1's stack back to the template's (its shadow of the
 * template's stack goes stale): there, as where there are no raw calls, P1
 * is a copy, clone()d as fork() is, on a copy of the template's stack. The
 * sanitizer runs so test that mode; the plain ones, the shared one. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TE_ASAN 1
#endif
#if defined(TE_RAWSYS) && !defined(TE_ASAN)
#define P1_SHARES_MEMORY 1
#endif

/* What P1 is cloned with. */
struct te_warm_p1_args {
    uid_t uid;
    gid_t gid;
    int hand;       /* P1's end of the socketpair (HAND_FD) */
    int mapr, mapw; /* with the daemon's id maps: the pipe it answers on, -1 */
    int ll_abi;     /* Landlock's, for P2's fence */
    /* the template's, set by each fork request: read in P2, as its call's
     * request left it (shared, or copied with the template's memory) */
    const unsigned long *call_nproc;
};

/* P1, PID 1 of the call's namespace: never returns, except as P2 (0). Made
 * with every signal blocked. On the hand socketpair, in this order: P1
 * writes "p" (its first half done), reads its call (the template's
 * te_fork_request pointer and the call's four descriptors), with "proxy"
 * sends the listener (an int 0 with the descriptor, or the errno alone),
 * then writes "g" once P2 is forked. */
int te_warm_p1(const struct te_warm_p1_args *a);

/* A raw recvmsg() (no errno: the template runs meanwhile, see te_warm_p1()):
 * its byte count, 0 at the end, or -errno. */
static inline long te_warm_recvmsg(int fd, struct msghdr *m)
{
    long n;
    while ((n = te_sys(SYS_recvmsg, fd, (long)m, MSG_CMSG_CLOEXEC, 0)) == -EINTR)
        ;
    return n;
}

#endif
