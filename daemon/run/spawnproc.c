/*
 * spawnproc.c - the spawner process itself (spawner.h): toolexecd exec'd
 * afresh in a mode of its own (spawnproc.h), so that it holds nothing of
 * the daemon's memory: no tool definition, no credential header value, no
 * key of the egress proxy, none of which it needs. Every spare is a copy of
 * it and every cold call starts as one, so none of them holds one either.
 * What it works from: its socket (fd 3) and what comes over it (a call's
 * description, spawnmsg.h; its pipes and cgroup), 0-2, and the process
 * state an exec keeps (uid, gid, capabilities, cgroup, rlimits, umask,
 * namespaces, the working directory). It keeps only its socket and its
 * standard descriptors, and does three things, in a plain poll() loop:
 *
 *  - a request (spawnmsg.h) in: the description unpacked, the call started
 *    with sandbox.c's steps (td_sandbox_start, a vfork-style clone that
 *    suspends this process, not the daemon's loop), a pidfd of it opened,
 *    STARTED sent back with the pidfd and what the child handed up;
 *  - SIGCHLD (a signalfd): every exited child seen (waitid, WNOWAIT), a
 *    call's process group killed while its leader, not yet reaped, still
 *    holds the pgid (strays of a call without a PID namespace: the daemon's
 *    reaper did this before), then reaped with wait4(), EXITED sent with the
 *    status and resource use;
 *  - the daemon's end closed: exit (and PR_SET_PDEATHSIG takes us along if
 *    the daemon dies first; our calls follow by theirs).
 *
 * It is the subreaper of its calls' orphans, as the daemon was.
 * It is small on purpose: its descriptor table is the 0-2, its socket and
 * its signalfd, plus one call's descriptors while that call starts, so a
 * start copies no more whatever is in flight (the daemon's table holds ~4
 * descriptors per call in flight: a fork from it costs O(calls in flight)).
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

#include <fcntl.h>
#include <stdio.h>

#include "fdpass.h"
#include "rawsig.h"
#include "report.h"
#include "sandbox.h"
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

/* Spares made and not yet taken (PREPARE): a handful. */
struct spare {
    uint32_t id, gen;
    pid_t pid;
    int pidfd, ctl, report; /* ctl: its end of our pair; report: the pipe it fails on */
    bool ready;
    bool init_waits; /* waits in its init, exec'd (td_sandbox_prepare) */
    int handed[TD_HAND_COUNT];
};
#define MAX_SPARES 256
static struct spare spares[MAX_SPARES];
static size_t nspares;
static int daemon_sock = -1;

static void say(int sock, const struct td_spawn_reply *r, int *fds, size_t nfds);

static void spare_close(struct spare *sp)
{
    if (sp->pidfd >= 0)
        close(sp->pidfd);
    if (sp->ctl >= 0)
        close(sp->ctl);
    if (sp->report >= 0)
        close(sp->report);
    for (int k = 0; k < TD_HAND_COUNT; k++)
        if (sp->handed[k] >= 0)
            close(sp->handed[k]);
    *sp = spares[--nspares];
}

static struct spare *spare_find(uint32_t id, uint32_t gen)
{
    for (size_t i = 0; i < nspares; i++)
        if (spares[i].id == id && spares[i].gen == gen)
            return &spares[i];
    return NULL;
}

/* What a spare says on ctl: "R" once ready, or a descriptor handed up (its
 * kind as an int). 0 for more, -1 at its end (exec'd, its waiting init
 * has its call, or dead). */
static int spare_read(struct spare *sp, int flags)
{
    for (;;) {
        ssize_t n = td_sandbox_recv_handed(sp->ctl, flags, sp->handed);
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0)
            return -1;
        if (n == 1 && !sp->ready) {
            /* ready: only now is it said to be (PREPARED), so that a call
             * never waits for, or wastes, a spare still being made */
            sp->ready = true;
            struct td_spawn_reply r = {
                .type = TD_SPAWN_PREPARED, .id = sp->id, .gen = sp->gen, .pid = sp->pid};
            say(daemon_sock, &r, NULL, 0);
        }
        if (!(flags & MSG_DONTWAIT))
            return 0;
    }
}

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

/* A call started by its spare: the four ends and the environment sent, then
 * what it hands up read until its end of ctl closes (at exec; a spare
 * waiting in its init: once the init has them). Its pid, or 0
 * when the spare is not there to take (killed, or dead: the caller starts
 * the call afresh), or -errno. */
static pid_t take_spare_once(struct spare *sp, const struct td_spawn *s, int *ends, int *handed)
{
    if (!sp->ready && spare_read(sp, MSG_DONTWAIT) < 0)
        return 0;
    if (!sp->ready)
        return 0; /* not yet: a fresh start costs what waiting would */
    static char env[TD_SPARE_ENV_MAX];
    size_t n = 0, room = sizeof(env) - 1, strings = 0;
    /* a waiting init takes the tool's argv too (init.c: its count first) */
    char *const *args = sp->init_waits ? s->argv + 1 : NULL;
    if (args) {
        room = TD_SPARE_INIT_BYTES;
        while (args[strings])
            strings++;
        if (!strings)
            return 0;
        n = (size_t)snprintf(env, sizeof(env), "%zu", strings) + 1;
        for (char *const *a = args; *a; a++) {
            size_t l = strlen(*a) + 1;
            if (n + l > room)
                return 0;
            memcpy(env + n, *a, l);
            n += l;
        }
    }
    for (char *const *e = s->envp; *e; e++) {
        size_t l = strlen(*e) + 1;
        if (n + l > room || (args && ++strings > TD_SPARE_INIT_STRINGS)) {
            explicit_bzero(env, n); /* what was copied of it: as below */
            return 0;               /* more than a spare takes: started afresh */
        }
        memcpy(env + n, *e, l);
        n += l;
    }
    struct iovec iov = {.iov_base = env, .iov_len = n ? n : 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_space u;
    te_fds_put(&m, &u, ends, TD_SANDBOX_ENDS);
    ssize_t w;
    while ((w = sendmsg(sp->ctl, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    /* its environment may hold a credential (env_credentials): not kept
     * here once sent, as the request it came in is not (test_mcp_server_creds) */
    explicit_bzero(env, n);
    if (w < 0)
        return 0;
    /* Like a fresh start, the reply waits for its exec: what it hands up
     * (a seccomp listener) is all there by then. An init that waits handed
     * all of it up before its "R", and its taking the call is not waited
     * for: it fails from then on as any call's init, on the call's report
     * pipe, and its end is the call's. */
    while (!sp->init_waits && spare_read(sp, 0) == 0)
        ;
    for (int k = 0; k < TD_HAND_COUNT; k++) {
        handed[k] = sp->handed[k];
        sp->handed[k] = -1;
    }
    return sp->pid;
}

/* *pidfd: the spare's, when the call is started by it (-1 else) */
static pid_t take_spare(struct spare *sp, const struct td_spawn *s, int *ends, int *handed,
                        int *pidfd, const char **what)
{
    pid_t pid = take_spare_once(sp, s, ends, handed);
    if (pid > 0) {
        for (int i = 0; i < TD_SANDBOX_ENDS; i++)
            close(ends[i]);
        sp->pid = 0; /* a call's now: not killed with the record */
        *pidfd = sp->pidfd;
        sp->pidfd = -1;
        spare_close(sp);
        return pid;
    }
    if (sp->pid > 0)
        kill(sp->pid, SIGKILL);
    if (pid < 0) {
        for (int i = 0; i < TD_SANDBOX_ENDS; i++)
            close(ends[i]);
        *what = "spare";
        return pid;
    }
    return td_sandbox_start(s, ends, handed, what);
}

static void started(int sock, const struct td_spawn_req *q, uint8_t *body, size_t len, int *fds,
                    size_t nfds)
{
    struct td_spawn_reply r = {.type = TD_SPAWN_STARTED, .id = q->id, .gen = q->gen};
    struct td_spawnmsg m;
    int rc = nfds != td_spawnmsg_req_fds(q) ? -EBADMSG : td_spawnmsg_unpack(body, len, &m);
    const char *what = "spawn request";
    if (rc == 0) {
        size_t k = TD_SANDBOX_ENDS;
        m.s.cgroup_dir = (q->flags & TD_SPAWN_CGROUP_DIR) ? fds[k++] : -1;
        m.s.cgroup_procs = (q->flags & TD_SPAWN_CGROUP_PROCS) ? fds[k++] : -1;
        int handed[TD_HAND_COUNT];
        struct spare *sp =
            q->spare_id != TD_SPAWN_NO_SPARE ? spare_find(q->spare_id, q->spare_gen) : NULL;
        int pidfd = -1;
        pid_t pid = sp ? take_spare(sp, &m.s, fds, handed, &pidfd, &what)
                       : td_sandbox_start(&m.s, fds, handed, &what); /* takes the four ends */
        for (int i = 0; i < TD_SANDBOX_ENDS; i++)
            fds[i] = -1;
        td_spawnmsg_free(&m);
        if (pid > 0) {
            int out[1 + TD_HAND_COUNT], n = 0;
            if (pidfd < 0)
                pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
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

/* A call's leader seen exited but not yet reaped (WNOWAIT): its pid, and
 * so its pgid, stays held while its group is killed, so that the kill
 * cannot reach a group that reused the number. Its status and resource use
 * then come from the reaping itself. */
static pid_t next_exited(int *status, struct rusage *ru)
{
    for (;;) {
        siginfo_t si = {0};
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        pid_t pid = si.si_pid;
        if (pid <= 0)
            return 0;
        for (size_t i = 0; i < nrun; i++)
            if (run[i].pid == pid) {
                kill(-pid, SIGKILL);
                break;
            }
        pid_t got;
        while ((got = wait4(pid, status, WNOHANG, ru)) < 0 && errno == EINTR)
            ;
        return got == pid ? pid : -1; /* -1: not ours to reap after all */
    }
}

static void reap(int sock)
{
    for (;;) {
        int status;
        struct rusage ru;
        pid_t pid = next_exited(&status, &ru);
        if (pid <= 0)
            return;
        size_t s2 = 0;
        while (s2 < nspares && spares[s2].pid != pid)
            s2++;
        if (s2 < nspares) { /* a spare, dead unused (dropped, or failed) */
            struct td_spawn_reply r = {.type = TD_SPAWN_SPARE_GONE,
                                       .id = spares[s2].id,
                                       .gen = spares[s2].gen,
                                       .pid = pid,
                                       .status = status};
            struct td_report_rec rec;
            if (spares[s2].report >= 0 &&
                read(spares[s2].report, &rec, sizeof(rec)) == (ssize_t)sizeof(rec) &&
                rec.type == TD_REPORT_FAILED)
                r.err = rec.b, snprintf(r.what, sizeof(r.what), "step %d", rec.a);
            spares[s2].pid = 0;
            spare_close(&spares[s2]);
            say(sock, &r, NULL, 0);
            continue;
        }
        size_t i = 0;
        while (i < nrun && run[i].pid != pid)
            i++;
        if (i == nrun)
            continue; /* an orphan we adopted */
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

static void prepare(int sock, const struct td_spawn_req *q, uint8_t *body, size_t len, int *fds,
                    size_t nfds)
{
    struct td_spawn_reply r = {.type = TD_SPAWN_PREPARED, .id = q->id, .gen = q->gen};
    struct td_spawnmsg m;
    const char *what = "spare";
    int rc = nfds != td_spawnmsg_req_fds(q) || nspares == MAX_SPARES
                 ? -EBADMSG
                 : td_spawnmsg_unpack(body, len, &m);
    int ctl[2] = {-1, -1}, rep[2] = {-1, -1};
    if (rc == 0) {
        size_t k = 0;
        m.s.cgroup_dir = (q->flags & TD_SPAWN_CGROUP_DIR) ? fds[k++] : -1;
        m.s.cgroup_procs = (q->flags & TD_SPAWN_CGROUP_PROCS) ? fds[k++] : -1;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0 ||
            pipe2(rep, O_CLOEXEC | O_NONBLOCK) < 0) {
            rc = -errno;
            for (int i = 0; i < 2; i++) {
                if (ctl[i] >= 0)
                    close(ctl[i]);
                if (rep[i] >= 0)
                    close(rep[i]);
            }
        } else {
            pid_t pid = td_sandbox_prepare(&m.s, q->flags & TD_SPAWN_INIT_WAITS, ctl[1], rep[1],
                                           &what); /* takes both */
            int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
            if (pid > 0 && pidfd < 0)
                kill(pid, SIGKILL); /* reaped as a stray */
            if (pid > 0 && pidfd >= 0) {
                struct spare *sp = &spares[nspares++];
                *sp = (struct spare){.id = q->id,
                                     .gen = q->gen,
                                     .pid = pid,
                                     .pidfd = pidfd,
                                     .ctl = ctl[0],
                                     .report = rep[0],
                                     .init_waits = (q->flags & TD_SPAWN_INIT_WAITS) && m.s.init};
                for (int k2 = 0; k2 < TD_HAND_COUNT; k2++)
                    sp->handed[k2] = -1;
                r.pid = pid;
            } else {
                rc = pid < 0 ? (int)pid : -errno;
                close(ctl[0]), close(rep[0]);
            }
        }
        td_spawnmsg_free(&m);
    }
    if (rc < 0) { /* made, it says so itself once ready (spare_read) */
        r.err = -rc;
        strncpy(r.what, what, sizeof(r.what) - 1);
        say(sock, &r, NULL, 0);
    }
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
}

void td_spawnproc_main(int argc, char **argv)
{
    char *end = NULL;
    long daemon = argc == 3 ? strtol(argv[2], &end, 10) : 0;
    if (daemon < 1 || !end || *end)
        _exit(2); /* not started by a daemon (spawner.c) */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != (pid_t)daemon)
        _exit(0); /* it died before the prctl */
    prctl(PR_SET_NAME, "toolexecd-spawn");
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* exec kept what the daemon ignored: ours are the defaults, so that the
     * children's step 4 has nothing to reset */
    for (int sig = 1; sig < NSIG; sig++)
        te_sig_default(sig); /* raw: glibc refuses 32 and 33 (rawsig.h) */
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_SETMASK, &chld, NULL);
    /* Nothing of the daemon's but 0-2 and our socket (one without
     * close-on-exec would have come through). */
    int sock = TD_SPAWNPROC_FD;
    daemon_sock = sock;
    close_range(sock + 1, ~0U, 0);
    if (fcntl(sock, F_SETFD, FD_CLOEXEC) < 0)
        _exit(1);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        _exit(1);
    /* every call but a root one is born with an empty bounding set: this
     * thread's, emptied once here, not 41 system calls in each call */
    td_sandbox_bset_once();
    static uint8_t buf[sizeof(struct td_spawn_req) + TD_SPAWNMSG_MAX] __attribute__((aligned(8)));
    struct pollfd p[2 + MAX_SPARES] = {{.fd = sock, .events = POLLIN},
                                       {.fd = sfd, .events = POLLIN}};
    for (;;) {
        /* spares still getting ready: what they say is read as it comes */
        nfds_t np = 2;
        for (size_t i = 0; i < nspares; i++)
            if (!spares[i].ready)
                p[np++] = (struct pollfd){.fd = spares[i].ctl, .events = POLLIN};
        if (poll(p, np, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        for (nfds_t j = 2; j < np; j++) {
            if (!p[j].revents)
                continue;
            for (size_t i = 0; i < nspares; i++)
                if (spares[i].ctl == p[j].fd)
                    spare_read(&spares[i], MSG_DONTWAIT);
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
        if (q.type == TD_SPAWN_REQ_PREPARE) {
            prepare(sock, &q, buf + sizeof(q), (size_t)n - sizeof(q), fds, nfds);
        } else if (q.type == TD_SPAWN_REQ_DROP) {
            struct spare *sp = spare_find(q.id, q.gen);
            if (sp) /* reaped next, and said SPARE_GONE */
                syscall(SYS_pidfd_send_signal, sp->pidfd, SIGKILL, NULL, 0);
            for (size_t i = 0; i < nfds; i++)
                close(fds[i]);
        } else {
            started(sock, &q, buf + sizeof(q), (size_t)n - sizeof(q), fds, nfds);
        }
        /* a call's environment may hold a credential (env_credentials):
         * gone from here once its process is started */
        explicit_bzero(buf, (size_t)n);
    }
}
