/*
 * spawnproc.c - the spawner process itself (spawner.h): a fork of the
 * daemon that keeps only its socket to the daemon and its standard
 * descriptors, and does three things, in a plain poll() loop:
 *
 *  - a request (spawnmsg.h) in: the description unpacked, the call started
 *    with sandbox.c's steps (td_sandbox_start, a vfork-style clone that
 *    suspends this process, not the daemon's loop), a pidfd of it opened,
 *    STARTED sent back with the pidfd and what the child handed up;
 *  - SIGCHLD (a signalfd): every exited child reaped with wait4(), its
 *    process group killed at once (strays of a call without a PID
 *    namespace: the daemon's reaper did this before; the pgid cannot be
 *    reused while a member lives, and nothing forks in between), EXITED sent
 *    with the status and resource use;
 *  - the daemon's end closed: exit (and PR_SET_PDEATHSIG takes us along if
 *    the daemon dies first; our calls follow by theirs).
 *
 * It is the subreaper of its calls' orphans, as the daemon was.
 * It is small on purpose: its descriptor table is the 0-2, its socket and
 * its signalfd, plus one call's descriptors while that call starts, so a
 * start copies no more whatever is in flight (the daemon's table holds ~4
 * descriptors per call in flight; issue 21 measured that as O(calls)).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include "fdpass.h"
#include "spawnmsg.h"
#include "spawnproc.h"

#define MAX_REQ_FDS (TD_SANDBOX_ENDS + 2)

/* The calls started and not reaped: pid -> the daemon's slot. A plain
 * array: an exit scans it (1,000 calls in flight: ~1 us). */
struct running {
    pid_t pid;
    uint32_t id, gen;
};
static struct running *run;
static size_t nrun, caprun;

static void say(int sock, const struct td_spawn_reply *r, int *fds, size_t nfds)
{
    struct iovec iov = {.iov_base = (void *)r, .iov_len = sizeof(*r)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_space u;
    if (nfds)
        te_fds_put(&m, &u, fds, nfds);
    /* Blocking: the daemon reads as fast as it can; should it stop, we wait
     * rather than lose a call's end. EINTR: none is caught here. */
    while (sendmsg(sock, &m, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

static void started(int sock, const struct td_spawn_req *q, uint8_t *body, size_t len, int *fds,
                    size_t nfds)
{
    struct td_spawn_reply r = {.type = TD_SPAWN_STARTED, .id = q->id, .gen = q->gen};
    struct td_spawnmsg m;
    size_t need =
        TD_SANDBOX_ENDS + !!(q->flags & TD_SPAWN_CGROUP_DIR) + !!(q->flags & TD_SPAWN_CGROUP_PROCS);
    int rc = nfds != need ? -EBADMSG : td_spawnmsg_unpack(body, len, &m);
    const char *what = "spawn request";
    if (rc == 0) {
        size_t k = TD_SANDBOX_ENDS;
        m.s.cgroup_dir = (q->flags & TD_SPAWN_CGROUP_DIR) ? fds[k++] : -1;
        m.s.cgroup_procs = (q->flags & TD_SPAWN_CGROUP_PROCS) ? fds[k++] : -1;
        int handed[TD_HAND_COUNT];
        pid_t pid = td_sandbox_start(&m.s, fds, handed, &what); /* takes the four ends */
        for (int i = 0; i < TD_SANDBOX_ENDS; i++)
            fds[i] = -1;
        td_spawnmsg_free(&m);
        if (pid > 0) {
            int out[1 + TD_HAND_COUNT], n = 0;
            int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
            if (pidfd >= 0)
                out[n++] = pidfd;
            for (int k2 = 0; k2 < TD_HAND_COUNT; k2++)
                if (handed[k2] >= 0) {
                    r.handed |= 1u << k2;
                    out[n++] = handed[k2];
                }
            if (nrun == caprun) {
                size_t cap = caprun ? caprun * 2 : 64;
                struct running *p = realloc(run, cap * sizeof(*run));
                if (p)
                    run = p, caprun = cap;
            }
            if (pidfd < 0 || nrun == caprun) {
                /* cannot be followed: it does not run */
                r.err = pidfd < 0 ? errno : ENOMEM;
                kill(pid, SIGKILL);
                strcpy(r.what, "pidfd");
                for (int i = pidfd < 0 ? 0 : 1; i < n; i++)
                    close(out[i]);
                if (pidfd >= 0)
                    close(pidfd);
                say(sock, &r, NULL, 0);
            } else {
                run[nrun++] = (struct running){pid, q->id, q->gen};
                r.pid = pid;
                say(sock, &r, out, (size_t)n);
                for (int i = 0; i < n; i++)
                    close(out[i]);
            }
        } else {
            rc = (int)pid;
        }
    }
    if (rc < 0) {
        r.err = -rc;
        strncpy(r.what, what, sizeof(r.what) - 1);
        say(sock, &r, NULL, 0);
    }
    for (size_t i = 0; i < nfds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static void reap(int sock)
{
    for (;;) {
        int status;
        struct rusage ru;
        pid_t pid = wait4(-1, &status, WNOHANG, &ru);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        size_t i = 0;
        while (i < nrun && run[i].pid != pid)
            i++;
        if (i == nrun)
            continue; /* an orphan we adopted */
        kill(-pid, SIGKILL);
        struct td_spawn_reply r = {
            .type = TD_SPAWN_EXITED,
            .id = run[i].id,
            .gen = run[i].gen,
            .pid = pid,
            .status = status,
            .user_us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
            .sys_us = (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
            .maxrss_kb = ru.ru_maxrss,
        };
        run[i] = run[--nrun];
        say(sock, &r, NULL, 0);
    }
}

void td_spawnproc_main(int sock, pid_t daemon)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != daemon)
        _exit(0);
    prctl(PR_SET_NAME, "toolexecd-spawn");
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* The daemon's handlers are libuv's: ours are the defaults, so that the
     * children's step 4 has nothing to reset. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_SETMASK, &chld, NULL);
    /* Nothing of the daemon's but 0-2 and our socket: moved to 3 first. */
    if (sock != 3 && (dup2(sock, 3) < 0 || close(sock) < 0))
        _exit(1);
    sock = 3;
    close_range(4, ~0U, 0);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        _exit(1);
    static uint8_t buf[sizeof(struct td_spawn_req) + TD_SPAWNMSG_MAX] __attribute__((aligned(8)));
    struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
            reap(sock);
        }
        if (!p[0].revents)
            continue;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        te_fds_space u;
        te_fds_room(&m, &u, MAX_REQ_FDS);
        ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(0); /* the daemon is done with us */
        int fds[MAX_REQ_FDS];
        size_t nfds = te_fds_take(&m, fds, MAX_REQ_FDS);
        struct td_spawn_req q;
        if ((size_t)n < sizeof(q) || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
            for (size_t i = 0; i < nfds; i++)
                close(fds[i]);
            continue; /* not ours to answer: no slot to name */
        }
        memcpy(&q, buf, sizeof(q));
        started(sock, &q, buf + sizeof(q), (size_t)n - sizeof(q), fds, nfds);
    }
}
