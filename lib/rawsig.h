/*
 * rawsig.h - a signal's disposition read and reset with the raw
 * rt_sigaction system call. glibc's sigaction() refuses signals 32 and 33
 * (EINVAL: it keeps them for its threads), so it can neither see nor undo a
 * parent's SIG_IGN on them; an ignored disposition survives exec, and under
 * debhelper (which ignores both) every worker would start with them ignored.
 * Raw, so it may run in a CLONE_VM child (sandbox.c) without touching errno.
 */
#ifndef TE_RAWSIG_H
#define TE_RAWSIG_H

#include <signal.h>
#include <stdint.h>

#include "rawsys.h"

/* The kernel's struct sigaction on x86-64 and arm64 (not glibc's): handler,
 * flags, restorer, then a 64-bit mask. */
struct te_ksigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};

/* Signal sig's handler as the kernel holds it (SIG_DFL on failure). */
static inline void (*te_sig_handler(int sig))(int)
{
    struct te_ksigaction old = {0};
    long r = te_sys(SYS_rt_sigaction, sig, 0, (long)&old, sizeof(old.mask));
    return TE_SYS_FAILED(r) ? SIG_DFL : old.handler;
}

/* Signal sig back to SIG_DFL, whatever glibc thinks of it; 0 or -errno. */
static inline long te_sig_default(int sig)
{
    struct te_ksigaction dfl = {.handler = SIG_DFL};
    return te_sys(SYS_rt_sigaction, sig, (long)&dfl, 0, sizeof(dfl.mask));
}

#endif
