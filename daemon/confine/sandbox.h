/*
 * sandbox.h - spawning a call's process with its isolation.
 */
#ifndef TD_SANDBOX_H
#define TD_SANDBOX_H

#include <limits.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/resource.h>
#include <unistd.h>

#include "rawsys.h"
#include "report.h"
#include "sandbox_spec.h"

struct td_child {
    pid_t pid;
    int in, out, err; /* parent ends: worker's stdin, stdout, stderr */
    int report;       /* read end of the report pipe (report.h) */
    /* What the child handed up before exec, by TD_HAND_* kind; -1: nothing.
     * Close-on-exec, owned by the caller from here. */
    int handed[TD_HAND_COUNT];
};
/* 0 or -errno (the step that failed in *what): td_sandbox_pipes() and
 * td_sandbox_start() in one process (the templates; calls go through the
 * spawner, spawner.c, which runs the second half). */
int td_sandbox_spawn(const struct td_spawn *s, struct td_child *c, const char **what);
/* The daemon's half: the call's pipes (stdin a socket with in_socket), our
 * ends in *c (pid 0, nothing handed), the child's in theirs: its stdin,
 * stdout, stderr and report pipe. 0 or -errno. */
#define TD_SANDBOX_ENDS 4
int td_sandbox_pipes(bool in_socket, struct td_child *c, int theirs[TD_SANDBOX_ENDS]);
/* The other half: the child started with theirs (closed here in every
 * case) as the steps of sandbox.c; what it handed up in handed. The pid, or
 * -errno (the step in *what). */
pid_t td_sandbox_start(const struct td_spawn *s, int theirs[TD_SANDBOX_ENDS],
                       int handed[TD_HAND_COUNT], const char **what);
/* A spare: s's steps up to its user (10) run now, in a process
 * of its own (a copy of our memory, not a share of it), which then waits on
 * ctl (its end of a SOCK_SEQPACKET pair, taken) for its call. Its report
 * pipe until then is report (taken). On ctl it says "R" (one byte) once
 * ready and hands up what it makes (td_sandbox_hand_over); it takes one
 * message: the call's four ends (td_sandbox_pipes' theirs) as descriptors
 * and its environment as the bytes (NUL-terminated strings, at most
 * TD_SPARE_ENV_MAX in all), and goes on to exec; ctl closes at exec.
 * init_waits, with an init (s->init): every step up to the exec of the
 * init is run ahead, and the init, exec'd with no argument, says "R" and
 * takes the message, the tool's argv ahead of the environment (init.c);
 * ctl closes once it has. Only where s's filter lets the init do
 * that (recvmsg, dup3, fcntl, close on its descriptors). The pid, or -errno
 * (*what). */
pid_t td_sandbox_prepare(const struct td_spawn *s, bool init_waits, int ctl, int report,
                         const char **what);
/* The bounding set emptied once for the calling thread, the one that
 * starts calls (the spawner's), where a root process may (CAP_SETPCAP):
 * its children are born with it empty and skip step 9b; a child that stays
 * root is started from a thread that kept it (sandbox_bset.c). 0 or
 * -errno (then each call drops it, as without). */
int td_sandbox_bset_once(void);
/* Whether td_sandbox_bset_once() emptied it. */
bool td_sandbox_bset_empty(void);
/* fn(arg) run on the thread that kept the full set (on this one if
 * td_sandbox_bset_once() made none); its result, errno as fn left it. */
pid_t td_sandbox_bset_full(pid_t (*fn)(void *), void *arg);
/* Whether cap is in this thread's effective set (raw capget: it may run in
 * a child that shares the daemon's memory). */
bool td_sandbox_have_cap(int cap);
/* What the child and its init reported, read without blocking at exit. */
struct td_report {
    bool failed;      /* set-up or exec failed: */
    const char *step; /*   at this step */
    int err;          /*   with this errno */
    bool have_status; /* the init reported the tool's wait status */
    int status;
    bool have_usage; /* the init reported the tool's resource use: */
    long user_ms, sys_ms, maxrss_kb;
};
void td_sandbox_report(int fd, struct td_report *r);
/* The records available now, added to *r (a non-blocking fd, while the
 * call runs): 1 once the status is in (the init's last word: the call's
 * processes are all gone), 0 for more to come, -1 at the end of the pipe
 * without it. */
int td_sandbox_report_more(int fd, struct td_report *r);
/* In the child only (system calls, no memory of the daemon's written):
 * hand fd up to the daemon as kind TD_HAND_*, where td_spawn.hand_over
 * asked for it. The daemon finds it in td_child.handed once
 * td_sandbox_spawn() returns; the child's copy stays its own. 0 or -1. */
int td_sandbox_hand_over(int kind, int fd);
/* One message of a hand-over socket, its descriptor put in handed by its
 * kind (a kind handed twice keeps the first; anything malformed is closed).
 * The bytes received (a spare's "ready" is one), 0 at the end, -1 with
 * errno. For the spawner, which reads a spare's (spawnproc.c). */
ssize_t td_sandbox_recv_handed(int sock, int flags, int handed[TD_HAND_COUNT]);
/* Signal sig (SIGKILL, or a polite word first: worker.c) to the tool under
 * the init `init` (its one child), leaving the init to reap it and report
 * its resource use. 0 when it was signalled or is already gone, -errno
 * when the tool could not be found safely (the caller kills the whole
 * group instead). */
int td_sandbox_kill_tool(pid_t init, int sig);
/* The same for an init known by a pidfd (a warm call's PID 1, which is the
 * template's child, not ours) and its pid, learned from the pidfd (or with
 * it) while the init lived: kept with the pidfd, not asked again. */
int td_sandbox_kill_tool_pidfd(int init_pidfd, pid_t init, int sig);
/* The pid the daemon sees behind a pidfd (its fdinfo): -1 once the process
 * has exited, 0 when unknown. */
pid_t td_sandbox_pidfd_pid(int fd);
/* Has the process behind a pidfd not exited yet? (A pidfd polls readable
 * once its process has exited; until then its pid is its own.) */
bool td_pidfd_alive(int pidfd);
/* Can a child be started with these namespace flags (CLONE_NEWPID,
 * CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET), and, with CLONE_NEWNS, make its
 * mounts private and mount a /proc of its own? 0 or -errno. Blocks until
 * the child is gone: for start-up only, before the reaper runs. */
int td_sandbox_probe(int ns_flags);

/* The gate's wait (the child's, raw: it shares our memory; none without
 * a gate) and its opening (any thread of ours, once). */
static inline void td_sandbox_gate_wait(int *gate)
{
    while (gate && !__atomic_load_n(gate, __ATOMIC_ACQUIRE))
        te_sys(SYS_futex, (long)gate, FUTEX_WAIT_PRIVATE, 0, 0);
}
static inline void td_sandbox_gate_open(int *gate)
{
    __atomic_store_n(gate, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, gate, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#endif
