/*
 * sandbox_bset.c - the capability bounding set emptied once, not per call.
 *
 * Step 9b of sandbox.c empties a call's bounding set with one
 * PR_CAPBSET_DROP per capability: 41 system calls, each a new set of
 * credentials (prepare_creds, commit_creds, the old one freed after an RCU
 * grace period), ~40-75 us in each call's child on a loaded 2-CPU VM. A
 * process that starts calls from one thread (the spawner, spawnproc.c)
 * empties that thread's set once instead, with td_sandbox_bset_once(): a
 * child inherits its parent thread's credentials, so a call started from
 * it has the empty set already and skips the drop.
 *
 * Credentials are a thread's, not the process's, so the set can be empty
 * for one thread and full for another. A child that must keep it (a call
 * that runs as root by the operator's choice: root without its
 * capabilities is not what was asked for) is started from a second thread,
 * made before the drop, that keeps the full set (td_sandbox_bset_full()).
 * That costs such a call a hand-over between two threads; every other call
 * saves the 41 calls. A call in a user namespace of its own (an
 * unprivileged daemon) drops them still: the kernel gives a new namespace
 * a full set.
 *
 * The second thread blocks every signal but the faults (as sandbox.c
 * blocks them around clone()), so process-directed signals (the spawner's
 * SIGCHLD, read from a signalfd) stay the first thread's; it never exits,
 * so the children it starts, whose PR_SET_PDEATHSIG is tied to it, die
 * with the process alone.
 */
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rawsys.h"
#include "sandbox.h"

static bool empty;   /* the spawning thread's bounding set is empty */
static bool full_up; /* the second thread runs */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct {
    pid_t (*fn)(void *);
    void *arg;
    pid_t pid;
    int err;
    bool asked, done;
} job;

static void *full_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!job.asked)
            pthread_cond_wait(&cv, &mu);
        job.asked = false;
        pthread_mutex_unlock(&mu);
        /* the asking thread waits for done: job is ours meanwhile */
        errno = 0;
        pid_t pid = job.fn(job.arg);
        int err = errno;
        pthread_mutex_lock(&mu);
        job.pid = pid, job.err = err, job.done = true;
        pthread_cond_broadcast(&cv);
    }
    return NULL;
}

bool td_sandbox_have_cap(int cap)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2] = {0};
    return !TE_SYS_FAILED(te_sys(SYS_capget, (long)&h, (long)d, 0, 0)) &&
           (d[cap / 32].effective & (1u << (cap % 32)));
}

int td_sandbox_bset_once(void)
{
    if (empty || geteuid() != 0 || !td_sandbox_have_cap(CAP_SETPCAP))
        return 0; /* nothing to give away, or not ours to: step 9b decides per call */
    sigset_t all, old;
    sigfillset(&all);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT};
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
        sigdelset(&all, faults[i]);
    pthread_t t;
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&t, NULL, full_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    pthread_detach(t);
    full_up = true;
    for (long cap = 0;; cap++) {
        long r = te_sys(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0);
        if (r == -EINVAL && cap > 0)
            break;
        if (TE_SYS_FAILED(r))
            return (int)r; /* part of it dropped: each call drops the rest */
    }
    empty = true;
    return 0;
}

bool td_sandbox_bset_empty(void)
{
    return empty;
}

pid_t td_sandbox_bset_full(pid_t (*fn)(void *), void *arg)
{
    if (!full_up)
        return fn(arg);
    pthread_mutex_lock(&mu);
    job.fn = fn, job.arg = arg, job.done = false, job.asked = true;
    pthread_cond_broadcast(&cv);
    while (!job.done)
        pthread_cond_wait(&cv, &mu);
    pid_t pid = job.pid;
    int err = job.err;
    pthread_mutex_unlock(&mu);
    errno = err;
    return pid;
}
