/*
 * warmp1.c - a warm call's PID 1 (warmp1.h), cloned by the template
 * (lib/warm.c) for each call:
 *
 *  P1 = clone(CLONE_VM | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS
 *       [| CLONE_NEWNET]), on a stack of its own, sharing the template's
 *       memory until it dies (see te_warm_p1() for the discipline that
 *       takes): PID 1 of the call's own PID namespace, as toolexecd-init is
 *       for a cold call. First what is not the call's: it closes every
 *       descriptor of the template's (sockets, files, its signalfd), leads
 *       a session, dies with the template (PR_SET_PDEATHSIG), maps its own
 *       uid and gid, makes every mount private, hides the template's
 *       directory (other calls' directories are in it) under a tmpfs, and
 *       mounts a /proc of the call's namespace; then it waits for its call
 *       (a spare P1 is made so ahead, while the template idles: see
 *       "spare"). Given its call, it moves the call's descriptors to 0-3,
 *       binds only this call's directory back into the tmpfs and chdirs
 *       into it. Then it forks P2,
 *       tells the template it may run again, waits for P2 (reaping strays
 *       too), writes P2's wait status to the report pipe (as the init does,
 *       the same code: initwait.h) and exits: the kernel then kills what
 *       is left in the namespace, setsid()'d grandchildren included.
 *  P2 = the call's process (PID 2): its capabilities in the new user
 *       namespace dropped, then a second seccomp filter stacked on the
 *       tool's own, refusing what only this set-up needed (unshare, setns,
 *       mount and the new mount API, umount2, pivot_root, namespace flags of
 *       clone; clone3 gets ENOSYS so libc falls back to clone). Stacked
 *       filters all apply, so from here the call is filtered at least as a
 *       cold one. It returns to the SDK, which reads the request frame on
 *       fd 0 and answers on fd 1 exactly as a cold worker does.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "toolexec.h"

#include "fdpass.h"
#include "initwait.h" /* the report records, and P1's last duty as init.c's */
#include "warmcall.h"
#include "warmp1.h"
#include "warmview.h"

enum { REPORT_FD = TE_REC_FD };
/* Its step numbers (TD_STEP_*), so a failure names the step. */
enum {
    STEP_SETSID = 1,
    STEP_PDEATHSIG = 2,
    STEP_SIGNALS = 3,
    STEP_USERNS = 6,
    STEP_MOUNT = 7,
    STEP_CHDIR = 8,
    STEP_SECCOMP = 12,
    STEP_SPAWN = 14,
    STEP_LANDLOCK = 15,
    STEP_EGRESS = 16,
    STEP_LOOPBACK = 18,
};

enum { HAND_FD = 4 };

static void p1_fail(int step)
{
    int rec[3] = {TE_REC_FAILED, step, errno};
    ssize_t n = write(REPORT_FD, rec, sizeof(rec));
    (void)n;
    _exit(127);
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* src[i] moved to descriptor i (i < n; closed where src[i] is -1), every
 * other descriptor closed. Above 15 first, so no dup2 overwrites a later
 * source. */
static int place(const int *src, int n)
{
    int hi[8];
    for (int i = 0; i < n; i++)
        if ((hi[i] = src[i] < 0 ? -1 : fcntl(src[i], F_DUPFD, 16)) < 0 && src[i] >= 0)
            return -1;
    for (int i = 0; i < n; i++)
        if (hi[i] < 0 ? close(i) < 0 && errno != EBADF : dup2(hi[i], i) < 0)
            return -1;
    return (int)syscall(SYS_close_range, (unsigned)n, ~0U, 0);
}

/* A cold call's step 7d (daemon/confine/sandbox.c) in P1, in the call's fresh
 * network namespace (P1 holds CAP_NET_ADMIN over it, through its user
 * namespace): loopback up and a TCP listener on 127.0.0.1:port, sent to the
 * template on HAND_FD as an int 0 with the descriptor, or the errno alone
 * (HAND_FD stays open for P1's "go"). 0, or -1 with errno set. */
static int call_proxy(int port)
{
    int fd = te_loopback_listener(port), rc = fd >= 0 ? 0 : -1;
    int e = rc == 0 ? 0 : errno;
    te_fds_space c;
    struct iovec iov = {&e, sizeof(e)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_put(&m, &c, &fd, rc == 0 ? 1 : 0);
    if (sendmsg(HAND_FD, &m, MSG_NOSIGNAL) != (ssize_t)sizeof(e) && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (fd >= 0)
        close(fd); /* the template has its own copy */
    errno = e;
    return rc;
}

/* In P1: its call, as the template's hand_over() sends it: the request (in the template's
 * memory, which P1 shares or is a copy of) and its four descriptors. 0, or
 * -1 when the template closed its end instead (it dropped this P1, or died). */
static int wait_call(const te_fork_request **r, int fds[4])
{
    te_fds_space c;
    struct iovec iov = {(void *)r, sizeof(*r)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_room(&m, &c, 4);
    long n = te_warm_recvmsg(HAND_FD, &m);
    return n >= 0 && te_fds_take(&m, fds, 4) == 4 && n == (long)sizeof(*r) ? 0 : -1;
}

/* P1 runs in two halves. First what does not depend on the call (its
 * namespaces' set-up: session, id maps, te_warm_view_base_mounts()); then it says "p"
 * and waits for its call (wait_call()), which may come at once (P1 made for
 * a request) or later (a spare P1, made ahead while the template idles).
 * A failure of the first half is kept and reported on the call's report
 * pipe, as if it had happened there. Then the call's own steps, P2's fork,
 * and "go".
 *
 * Where P1 shares the template's memory (CLONE_VM, P1_SHARES_MEMORY), the
 * template is blocked while P1 runs the C library: waiting for "p", and
 * from the call's hand-over to "go". In between (a spare's wait) and after
 * "go", P1 makes only raw system calls on its own stack (initwait.h). Every
 * signal stays blocked in P1 (the template blocked them all around the
 * clone): the template's handlers (Python's) must never run here, on the
 * template's memory; and an init with no handler to run ignores whatever
 * its call sends it. */
int te_warm_p1(const struct te_warm_p1_args *arg)
{
    /* the template's frame is gone by the time a spare gets its call */
    const struct te_warm_p1_args a = *arg;
    int fail = 0, fail_errno = 0, here = -1, cover = -1;
    /* With the daemon's maps (mapr), first its's answer (raw: the template is
     * sending it our pidfd meanwhile): the call's uid and gid, mapped into
     * our user namespace beside the template's; EOF: it would not. */
    struct te_warm_id id = {false, 0, 0};
    int map_err = 0;
    if (a.mapr >= 0) {
        unsigned v[2];
        long n;
        te_sys(SYS_close, a.mapw, 0, 0, 0);
        while ((n = te_sys(SYS_read, a.mapr, (long)v, sizeof(v), 0)) == -EINTR)
            ;
        te_sys(SYS_close, a.mapr, 0, 0, 0);
        if (n == (long)sizeof(v))
            id = (struct te_warm_id){true, (uid_t)v[0], (gid_t)v[1]};
        else
            map_err = EPERM;
    }
    int keep[] = {-1, -1, -1, -1, a.hand}; /* the template's descriptors closed */
    if (place(keep, 5) < 0)
        _exit(127);
#define PREP(step, ok)                                                                             \
    do {                                                                                           \
        if (!fail && !(ok))                                                                        \
            fail = (step), fail_errno = errno;                                                     \
    } while (0)
    PREP(STEP_SETSID, setsid() >= 0);
    PREP(STEP_PDEATHSIG, prctl(PR_SET_PDEATHSIG, SIGKILL) >= 0);
    if (a.mapr >= 0) {
        errno = map_err;
        PREP(STEP_USERNS, !map_err);
    } else {
        char map[64];
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)a.uid, (unsigned)a.uid);
        PREP(STEP_USERNS, write_file("/proc/self/setgroups", "deny") == 0 &&
                              write_file("/proc/self/uid_map", map) == 0);
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)a.gid, (unsigned)a.gid);
        PREP(STEP_USERNS, write_file("/proc/self/gid_map", map) == 0);
    }
    /* Not dumpable: no process of the call (the template's uid where the
     * daemon maps, ours otherwise) may open our /proc/1/mem or fd 3 or take
     * it with pidfd_getfd. The flag is of the memory, which we share with
     * the template where P1_SHARES_MEMORY: then only where the daemon
     * writes our maps, since a P1 that writes its own needs the memory
     * dumpable to open its /proc/self/uid_map (te_warm_fence() keeps the
     * call out there instead). */
#ifdef P1_SHARES_MEMORY
    if (a.mapr >= 0)
#endif
        te_sys(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0);
    PREP(STEP_MOUNT, fail || te_warm_view_base_mounts(&here, &cover, &id) == 0);
    PREP(STEP_USERNS, te_warm_drop_bounding() == 0); /* for P2 to inherit */
#undef PREP
    /* From "p" to the call's hand-over the template runs: raw calls only. */
    te_sys(SYS_write, HAND_FD, (long)"p", 1, 0);
    const te_fork_request *r;
    int fds[4];
    if (wait_call(&r, fds) < 0)
        te_init_quit(0);
    /* The template waits again (for the listener, then "go"). */
    int src[] = {fds[0], fds[1], fds[2], fds[3], HAND_FD, here, cover};
    if (place(src, 7) < 0)
        _exit(127);
    here = here < 0 ? -1 : 5, cover = cover < 0 ? -1 : 6;
    /* first, so the template, waiting for the listener, is answered before
     * any later step can fail: that one then goes to the report pipe, as
     * for a call without a proxy */
    if (r->proxy_port && call_proxy(r->proxy_port) < 0)
        p1_fail(STEP_EGRESS);
    /* without a proxy, loopback alone (step 7d): the call's own lo */
    if (r->newnet && !r->proxy_port && te_loopback_up() < 0)
        p1_fail(STEP_LOOPBACK);
    if (fail) {
        errno = fail_errno;
        p1_fail(fail);
    }
    int m = te_warm_view_call_dir(here, cover, r->dir);
    if (m < 0)
        p1_fail(m == -2 ? STEP_CHDIR : STEP_MOUNT);
    /* the call's directory, the template's uid's until now, the call's */
    if (id.set && fchownat(here, r->dir, id.uid, id.gid, AT_SYMLINK_NOFOLLOW) < 0)
        p1_fail(STEP_USERNS);
    close(here), close(cover);
    /* P2: a copy of the template's memory (libc's fork() in a process that
     * shares it: the template is waiting, so it is consistent). */
    pid_t pid = fork();
    if (pid < 0)
        p1_fail(STEP_SPAWN);
    if (pid == 0) {
        close(HAND_FD);
        sigset_t none;
        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
            p1_fail(STEP_SIGNALS);
        /* its own uid and limit while it has the capabilities for them
         * (its bounding set is P1's, empty); then the death signal, which
         * a uid change clears */
        if (te_warm_call_identity(&id, *a.call_nproc) < 0)
            p1_fail(STEP_USERNS);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
            p1_fail(STEP_PDEATHSIG);
        if (te_warm_drop_caps() < 0)
            p1_fail(STEP_SECCOMP);
        /* the view's second layer, as a cold call's step 11a (after
         * the mounts: Landlock forbids them to its domain) */
        if (te_warm_view_landlock(a.ll_abi) < 0)
            p1_fail(STEP_LANDLOCK);
        if (te_warm_stack_filter() < 0)
            p1_fail(STEP_SECCOMP);
        close(REPORT_FD);
        /* the call's own names, where a cold worker finds them */
        setenv("TOOLEXEC_CALL_ID", r->call_id, 1);
        setenv("TOOLEXEC_BATCH", r->batch, 1);
        return 0;
    }
    /* From here on the template runs again: raw system calls only. */
    te_sys(SYS_write, HAND_FD, (long)"g", 1, 0);
    te_sys(SYS_close, HAND_FD, 0, 0, 0);
    /* As toolexecd-init does: every other process of the call killed and
     * reaped first, so the status, our last word, tells the daemon the
     * call is over without waiting for our exit (the namespaces' teardown)
     * and the template's "exited". */
    te_init_finish(pid);
}
