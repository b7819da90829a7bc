/*
 * initwait.h - the last duty of a call's PID 1, written once for both kinds:
 * toolexecd-init (daemon/confine/init.c, a cold call's init) and a warm call's P1
 * (lib/warmp1.c). Once the tool (PID 2) has been started: wait for it, kill
 * and reap every other process left in the namespace, report the tool's
 * resource use and wait status on the report pipe (fd 3), exit.
 *
 * Raw system calls only (rawsys.h), no C library: toolexecd-init is built
 * without one, and a warm P1 shares the template's memory.
 *
 * The records are the daemon's (daemon/confine/report.h uses these values).
 */
#ifndef TE_INITWAIT_H
#define TE_INITWAIT_H

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "rawsys.h"

enum { TE_REC_FAILED = 1, TE_REC_STATUS = 2, TE_REC_CPU = 3, TE_REC_RSS = 4 };
#define TE_REC_FD 3

static inline void te_init_report(int type, int a, int b)
{
    int rec[3] = {type, a, b};
    te_sys(SYS_write, TE_REC_FD, (long)rec, sizeof(rec), 0);
}

__attribute__((noreturn)) static inline void te_init_quit(int code)
{
    for (;;)
        te_sys(SYS_exit_group, code, 0, 0, 0);
}

/* PID 1, its tool started as `tool`: never returns. Our copies of the
 * call's pipes (0-2) are closed first: they would hold the worker's stdout
 * open after the tool is gone. */
__attribute__((noreturn)) static inline void te_init_finish(long tool)
{
    for (int fd = 0; fd <= 2; fd++)
        te_sys(SYS_close, fd, 0, 0, 0);
    for (;;) {
        int status = 0;
        long p = te_sys(SYS_wait4, -1, (long)&status, 0, 0);
        if (p == tool) {
            /* Every other process of the namespace killed and reaped
             * before the status goes out: the daemon may then complete the
             * call at once, without waiting for our exit, whose namespace
             * teardown (mounts, /proc) costs ~0.35-0.65 ms that no call
             * needs to wait for (300 clones of a child in a PID and
             * mount namespace: 350-660 us from its last write to its reap,
             * 25 us without the namespaces). Only what cannot die
             * (uninterruptible sleep) keeps us here, as it would keep the
             * kernel's zap of the namespace.
             * No child left (ECHILD) means no process left: each one of
             * the namespace descends from us and its orphans come to us
             * (a subreaper among them is itself one of ours). Then there
             * is no kill(-1), which walks every process of the system
             * (for_each_process), a cost per call that grew with the calls
             * in flight: with 1,000 sleeping calls, 3.3 % of all samples
             * were the inits' kill (bench/spawn.py's in-flight run). */
            if (te_sys(SYS_wait4, -1, 0, WNOHANG | __WALL, 0) != -ECHILD) {
                te_sys(SYS_kill, -1, SIGKILL, 0, 0);
                for (;;) {
                    long r = te_sys(SYS_wait4, -1, 0, __WALL, 0);
                    if (TE_SYS_FAILED(r) && r != -EINTR)
                        break; /* ECHILD: none left */
                }
            }
            /* the tool's use and every descendant's; ours is a few pages */
            struct rusage ru;
            if (!TE_SYS_FAILED(te_sys(SYS_getrusage, RUSAGE_CHILDREN, (long)&ru, 0, 0))) {
                te_init_report(TE_REC_CPU,
                               (int)(ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000),
                               (int)(ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000));
                te_init_report(TE_REC_RSS, (int)ru.ru_maxrss, 0);
            }
            te_init_report(TE_REC_STATUS, status, 0);
            te_init_quit(0);
        }
        if (TE_SYS_FAILED(p) && p != -EINTR) {
            /* no tool to wait for: as a lost tool, its status unknown */
            te_init_report(TE_REC_STATUS, 0x7f00, 0);
            te_init_quit(127);
        }
    }
}

#endif
