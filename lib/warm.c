/*
 * warm.c - the template side of warm start (proto/PROTOCOL.md, "Warm
 * start"): the loop a template runs between calls, and the making of each
 * call's PID 1 (a spare among them). Written once, in C, for both SDKs: the
 * C SDK calls it from te_worker_main(), the Python SDK through ctypes, so
 * both apply the same steps in the same order.
 *
 * The daemon starts a template like a cold worker (same user, limits, PID and
 * mount namespace, filter) and sends it {"template": {...}} as its first
 * frame on fd 0, here one end of a Unix stream socket. The template answers
 * {"ready": {}} (with a pidfd of itself) and then only forks on request:
 * each {"fork": {"id", "dir", "newnet"}} frame carries the call's stdin,
 * stdout, stderr and report-pipe ends (SCM_RIGHTS). For each call:
 *
 *  P1 = PID 1 of the call's own namespaces, cloned by the template, and
 *  P2 = the call's process, forked by P1; their steps are in warmp1.c, the
 *       view's mounts in warmview.c, what makes P2 a call of its own in
 *       warmcall.c. P2 returns to the SDK, which reads the request frame on
 *       fd 0 and answers on fd 1 exactly as a cold worker does.
 *
 * With "proxy": PORT in the fork frame (a tool with an egress allow-list;
 * with newnet), P1 also brings the loopback of its fresh network namespace
 * up and listens on 127.0.0.1:PORT there (a cold call's step 7d), and sends
 * the listener back over a socketpair made for this fork; the template
 * waits for it and attaches it to its "forked" frame, where the daemon
 * serves the call's proxy on it (call_proxy() in warmp1.c).
 *
 * The template reaps each P1 and reports {"exited": {"id", "status",
 * "utime_us", "stime_us", "maxrss_kb"}}. The daemon kills a call through the
 * pidfd of P1 it got with {"forked": {"id"}}: P1 is the namespace's init, so
 * that one SIGKILL ends the call's whole tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "toolexec.h"

#include "fdpass.h"
#include "warmp1.h"
#include "warmview.h"

/* A template serves at most this many calls at once. */
#define MAX_KIDS 1024

static struct kid {
    pid_t pid;
    unsigned id;
    void *stack; /* P1's (p1_stack()), freed once P1 is reaped */
    bool quiet;  /* a P1 that got no call (p1_drop()): no "exited" */
} kids[MAX_KIDS];
static size_t nkids;

/* Sharing the template's memory, P1 cannot run on the template's stack.
 * 128 KiB with a guard page below: room to spare over its deepest steps
 * (the mounts' PATH_MAX buffers, libc's fork(), Landlock in P2). */
#define P1_STACK (128 * 1024)
#define P1_GUARD 4096

#ifdef P1_SHARES_MEMORY
static void *p1_stack(void)
{
    char *p = mmap(NULL, P1_STACK + P1_GUARD, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (mprotect(p, P1_GUARD, PROT_NONE) < 0) {
        munmap(p, P1_STACK + P1_GUARD);
        return NULL;
    }
    return p;
}
#endif

static void p1_stack_free(void *p)
{
    if (p)
        munmap(p, P1_STACK + P1_GUARD);
}

/* A P1 whose first half is done (te_warm_p1()), waiting for its call. */
struct p1 {
    pid_t pid; /* 0: none */
    void *stack;
    int hand;      /* the template's end of the socketpair */
    unsigned view; /* view_gen it was made in */
    bool newnet;
};

/* The spare: made in te_template_next() while the template idles, with the
 * namespaces its last call had, and taken by the next call that wants the
 * same. Its first half is ~450 us of a ~3.6 ms warm calc call (temporary
 * timestamps in the template, 300 calls on a 2-CPU VM: clone 100-130 us,
 * id maps 20-90, mounts ~300) that no call waits for any more: serial calc
 * calls 1.11x as fast, 4 at once 1.05x (bench/warm_ab.py, 16 and 12 pairs).
 * Only where P1 shares the template's memory: a copy made ahead would give
 * P2 a template of the past. Forking P2 ahead too (its first half: no
 * capabilities, the stacked filter) was tried and measured no faster
 * (0.99x serial, 0.93x 4 at once): P2's cost is its copy-on-write faults
 * and its exit, which stay the call's. */
static struct p1 spare;
static bool spare_known; /* a call has said which namespaces (newnet) */
static bool spare_newnet;

static void p1_drop(struct p1 *p);
static void spare_ahead(void);

static int sigfd = -1;
static bool ready_sent;

/* As the fork requests say (the same for every call of a template):
 * daemon_maps, the daemon writes each P1's id maps, with a uid of the
 * call's own (a root daemon's --call-uids; P1 asks with {"map"} and waits);
 * call_nproc, each call's own RLIMIT_NPROC (0: none). ll_abi: Landlock's. */
static bool daemon_maps;
static unsigned long call_nproc;
static int ll_abi = -1;

/* ---- frames on the control socket (fd 0) ------------------------------------ */

static int send_frame_fds(json_t *msg, const int *fds, int nfds)
{
    char *body = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!body)
        return -ENOMEM;
    int rc = te_frame_send(0, body, strlen(body), fds, nfds, 0);
    free(body);
    return rc;
}

static int send_frame(json_t *msg, int fd)
{
    return send_frame_fds(msg, &fd, fd >= 0 ? 1 : 0);
}

/* One frame; up to 4 descriptors that came with it in fds (the rest closed).
 * 0, -ENODATA at a clean end, or -errno. */
static int recv_frame(json_t **msg, int fds[4], int *nfds)
{
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    size_t have = 0;
    *nfds = 0;
    *msg = NULL;
    while (have < sizeof(hdr)) {
        te_fds_space c;
        struct iovec iov = {hdr + have, sizeof(hdr) - have};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        te_fds_room(&m, &c, TE_FDS_MAX);
        ssize_t n = recvmsg(0, &m, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        *nfds += (int)te_fds_take(&m, fds + *nfds, 4 - (size_t)*nfds);
        if (n == 0)
            return have ? -EBADMSG : -ENODATA;
        have += (size_t)n;
    }
    uint32_t len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (len > 65536)
        return -EMSGSIZE;
    char *body = malloc(len ? len : 1);
    if (!body)
        return -ENOMEM;
    for (size_t got = 0; got < len;) {
        ssize_t n = read(0, body + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(body);
            return n < 0 ? -errno : -EBADMSG;
        }
        got += (size_t)n;
    }
    *msg = json_loadb(body, len, 0, NULL);
    free(body);
    return json_is_object(*msg) ? 0 : -EBADMSG;
}

/* ---- the template --------------------------------------------------------- */

bool te_template_requested(const json_t *first)
{
    return json_is_object(json_object_get(first, "template"));
}

/* Reap every finished call process and report it. */
static void reap(void)
{
    for (;;) {
        int st;
        struct rusage ru;
        pid_t pid = wait4(-1, &st, WNOHANG, &ru);
        if (pid <= 0)
            return;
        if (pid == spare.pid) { /* died waiting: the next call makes its own */
            close(spare.hand);
            p1_stack_free(spare.stack);
            spare.pid = 0;
        }
        for (size_t i = 0; i < nkids; i++) {
            if (kids[i].pid != pid)
                continue;
            if (!kids[i].quiet)
                send_frame(json_pack("{s:{s:I,s:i,s:I,s:I,s:I}}", "exited", "id",
                                     (json_int_t)kids[i].id, "status", st, "utime_us",
                                     (json_int_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
                                     "stime_us",
                                     (json_int_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
                                     "maxrss_kb", (json_int_t)ru.ru_maxrss),
                           -1);
            p1_stack_free(kids[i].stack);
            kids[i] = kids[--nkids];
            break;
        }
    }
}

int te_template_next(te_fork_request *r)
{
    if (!ready_sent) {
        /* SIGCHLD through a descriptor: the loop waits on one poll() */
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &chld, NULL) < 0 ||
            (sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
            return -errno;
        int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
        int rc = send_frame(json_pack("{s:{}}", "ready"), self);
        if (self >= 0)
            close(self);
        if (rc < 0)
            return rc;
        ready_sent = true;
    }
    for (;;) {
        spare_ahead(); /* the next call's P1, while nothing waits for us */
        struct pollfd p[2] = {{0, POLLIN, 0}, {sigfd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sigfd, &si, sizeof(si)) > 0)
                ;
            reap();
        }
        if (!p[0].revents)
            continue;
        json_t *msg;
        int fds[4], nfds;
        int rc = recv_frame(&msg, fds, &nfds);
        if (rc == -ENODATA) {
            /* Retired or the daemon stopping: the calls in flight finish
             * first (they die with us: PR_SET_PDEATHSIG). */
            if (spare.pid)
                p1_drop(&spare);
            while (nkids) {
                struct pollfd w = {sigfd, POLLIN, 0};
                if (poll(&w, 1, -1) < 0 && errno != EINTR)
                    break;
                struct signalfd_siginfo si;
                while (read(sigfd, &si, sizeof(si)) > 0)
                    ;
                reap();
            }
            return 0;
        }
        json_t *f = json_object_get(msg, "fork");
        json_t *id = json_object_get(f, "id");
        const char *dir = json_string_value(json_object_get(f, "dir"));
        if (rc < 0 || !json_is_integer(id) || !dir || strlen(dir) >= sizeof(r->dir) ||
            strchr(dir, '/') || nfds != 4) {
            for (int i = 0; i < nfds; i++)
                close(fds[i]);
            json_decref(msg);
            return rc < 0 ? rc : -EBADMSG;
        }
        if (te_warm_view_parse(json_object_get(f, "view")) < 0) {
            for (int i = 0; i < nfds; i++)
                close(fds[i]);
            json_decref(msg);
            return -EBADMSG;
        }
        r->id = (unsigned)json_integer_value(id);
        r->in = fds[0], r->out = fds[1], r->err = fds[2], r->report = fds[3];
        r->newnet = json_is_true(json_object_get(f, "newnet"));
        daemon_maps = json_is_true(json_object_get(f, "uid_map"));
        json_int_t nproc = json_integer_value(json_object_get(f, "nproc"));
        call_nproc = nproc > 0 ? (unsigned long)nproc : 0;
        strcpy(r->dir, dir);
        json_int_t port = json_integer_value(json_object_get(f, "proxy"));
        r->proxy_port = r->newnet && port > 0 && port < 65536 ? (int)port : 0;
        snprintf(r->call_id, sizeof(r->call_id), "%s",
                 json_string_value(json_object_get(f, "call_id")) ?: "");
        snprintf(r->batch, sizeof(r->batch), "%s",
                 json_string_value(json_object_get(f, "batch")) ?: "");
        json_decref(msg);
        return 1;
    }
}

static void close_req(const te_fork_request *r)
{
    close(r->in), close(r->out), close(r->err), close(r->report);
}

static int fork_failed(const te_fork_request *r, const char *why, int err)
{
    close_req(r);
    char text[160];
    snprintf(text, sizeof(text), "%s%s%s", why, err ? ": " : "", err ? strerror(err) : "");
    send_frame(json_pack("{s:{s:I,s:s}}", "fork_failed", "id", (json_int_t)r->id, "error", text),
               -1);
    return err ? -err : -EAGAIN;
}

/* The threads of this process: /proc/self/task links one directory per
 * thread besides . and .. (one stat(), where reading /proc/self/status
 * took stdio and a parse on every fork). */
static int threads(void)
{
    struct stat st;
    return stat("/proc/self/task", &st) == 0 ? (int)st.st_nlink - 2 : -1;
}

/* In the template: the listener P1 sent on hand (call_proxy()), or -1 with
 * errno the reason (P1's, or EPIPE when it died before saying). */
static int recv_proxy(int hand)
{
    int e = EPIPE, fd = -1;
    te_fds_space c;
    struct iovec iov = {&e, sizeof(e)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_room(&m, &c, 1);
    long n = te_warm_recvmsg(hand, &m); /* raw: P1 runs the C library meanwhile */
    if (n > 0)
        te_fds_take(&m, &fd, 1);
    if (n == (long)sizeof(e) && e == 0 && fd >= 0)
        return fd;
    if (fd >= 0)
        te_sys(SYS_close, fd, 0, 0, 0);
    errno = n < 0 ? (int)-n : n != (long)sizeof(e) || e == 0 ? EPIPE : e;
    return -1;
}

#ifdef P1_SHARES_MEMORY
/* Where a call's process (P2) leaves P1's stack for the template's:
 * te_template_fork()'s frame, set before P1 gets its call. P2's memory is a
 * copy of the template's taken while the template waits inside that very
 * frame (for P1's "go"), so the frame is intact in the copy. */
static void *p2_back[5]; /* __builtin_setjmp's buffer: frame, label, stack */
#endif

/* In the template: P1's call sent (wait_call()). 0, or -errno (P1 is gone). */
static int hand_over(int hand, const te_fork_request *r)
{
    te_fds_space c;
    int fds[4] = {r->in, r->out, r->err, r->report};
    struct iovec iov = {(void *)&r, sizeof(r)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_put(&m, &c, fds, 4);
    long n;
    while ((n = te_sys(SYS_sendmsg, hand, (long)&m, MSG_NOSIGNAL, 0)) == -EINTR)
        ;
    return n == (long)sizeof(r) ? 0 : n < 0 ? (int)n : -EPIPE;
}

/* In the template: one byte from P1 (its "p" or "go"): 0, or -1 when it
 * closed its end first (it died, or failed a step and said so on its
 * call's report pipe). Raw: P1 may be running the C library meanwhile. */
static int wait_word(int hand)
{
    char w;
    long n;
    while ((n = te_sys(SYS_read, hand, (long)&w, 1, 0)) == -EINTR)
        ;
    return n == 1 ? 0 : -1;
}

#ifdef P1_SHARES_MEMORY
/* P1 on its own stack: P2 returns from te_warm_p1() and jumps back. */
static int p1_main(void *arg)
{
    if (te_warm_p1(arg) == 0)
        __builtin_longjmp(p2_back, 1);
    return 127; /* not reached */
}
#endif

/* P1 made and its first half done, all signals blocked by the caller:
 * its pid, 0 as P2 (where P1 is a copy, which returns through here), or
 * -errno. While it works the template waits for its "p": it may run the C
 * library on the memory they share. */
static pid_t p1_make(bool newnet, struct p1 *out)
{
    te_warm_view_plan(); /* once: a failure is P1's to report, as before */
    /* CLONE_NEWIPC: SysV IPC and POSIX message queues of the call's own,
     * gone with it */
    int flags =
        CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | (newnet ? CLONE_NEWNET : 0);
    if (ll_abi < 0)
        ll_abi = te_landlock_abi();
    /* "p", the call, with a proxy the listener, and "go" go on this (a
     * record each; its end seen closed when P1 dies first) */
    int hand[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, hand) < 0)
        return -errno;
    int mp[2] = {-1, -1};
    if (daemon_maps && pipe2(mp, O_CLOEXEC) < 0) {
        int e = errno;
        close(hand[0]), close(hand[1]);
        return -e;
    }
    struct te_warm_p1_args args = {geteuid(), getegid(), hand[1],    mp[0],
                                   mp[1],     ll_abi,    &call_nproc};
    /* The call's user namespace counts its processes against the limit we
     * have when we make it, for every call of ours together (the kernel's
     * ucounts: the namespace's creator's uid, one level up): made with our
     * hard limit, which the daemon leaves high, so that only each call's
     * own limit (call_nproc, set in P2) binds its processes. */
    struct rlimit np, np_hi;
    bool np_raised = getrlimit(RLIMIT_NPROC, &np) == 0 && np.rlim_cur < np.rlim_max;
    np_hi = (struct rlimit){np.rlim_max, np.rlim_max};
    if (np_raised)
        np_raised = setrlimit(RLIMIT_NPROC, &np_hi) == 0;
    void *stack = NULL;
#ifdef P1_SHARES_MEMORY
    /* P1 shares our memory: one copy of the template's page tables per call
     * (P2's) instead of two. A fork of the Python template costs ~0.8 ms
     * on a loaded 2-CPU VM (os.fork() of a 14 MB interpreter, 300 times),
     * and P1's exit then tears no copy down. */
    if (!(stack = p1_stack())) {
        int e = errno;
        close(hand[0]), close(hand[1]);
        if (mp[0] >= 0)
            close(mp[0]), close(mp[1]);
        if (np_raised)
            setrlimit(RLIMIT_NPROC, &np);
        return -e;
    }
    pid_t pid =
        clone(p1_main, (char *)stack + P1_GUARD + P1_STACK, flags | CLONE_VM | SIGCHLD, &args);
#else
    /* as fork(): P1 continues here, on its copy of our stack */
    pid_t pid = (pid_t)syscall(SYS_clone, (unsigned long)flags | SIGCHLD, 0UL, NULL, NULL, 0UL);
    if (pid == 0 && te_warm_p1(&args) == 0)
        return 0; /* P2 */
#endif
    int e = errno;
    if (np_raised)
        setrlimit(RLIMIT_NPROC, &np);
    close(hand[1]);
    if (pid > 0 && mp[0] >= 0) {
        /* P1 waits (raw) for the daemon's answer: ask for its maps */
        int fds[2] = {(int)syscall(SYS_pidfd_open, pid, 0), mp[1]};
        if (fds[0] >= 0) {
            send_frame_fds(json_pack("{s:{}}", "map"), fds, 2);
            close(fds[0]);
        } /* else: P1 reads EOF and fails its call */
    }
    if (mp[0] >= 0)
        close(mp[0]), close(mp[1]);
    if (pid < 0) {
        close(hand[0]);
        p1_stack_free(stack);
        return -e;
    }
    wait_word(hand[0]); /* or closed: then its call fails to be handed over */
    *out = (struct p1){pid, stack, hand[0], te_warm_view_gen(), newnet};
    return pid;
}

/* A P1 killed and reaped here and now. */
static void p1_kill(struct p1 *p)
{
    close(p->hand);
    kill(p->pid, SIGKILL);
    while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    p1_stack_free(p->stack);
    p->pid = 0;
}

/* A P1 that will get no call: its end closed, so it exits (wait_call());
 * reaped without a word to the daemon (at once where kids[] is full). */
static void p1_drop(struct p1 *p)
{
    if (nkids == MAX_KIDS) {
        p1_kill(p);
        return;
    }
    close(p->hand);
    kids[nkids++] = (struct kid){p->pid, 0, p->stack, true};
    p->pid = 0;
}

/* Before the template blocks for its next request. */
static void spare_ahead(void)
{
#ifdef P1_SHARES_MEMORY
    if (spare.pid || !spare_known || nkids >= MAX_KIDS - 1)
        return;
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    if (p1_make(spare_newnet, &spare) < 0)
        spare.pid = 0; /* the request makes its own, and reports */
    sigprocmask(SIG_SETMASK, &old, NULL);
#endif
}

int te_template_fork(const te_fork_request *r)
{
    int n = threads();
    if (n != 1) {
        char why[64];
        snprintf(why, sizeof(why), "the template runs %d threads: forking it is unsafe", n);
        return fork_failed(r, why, 0);
    }
    if (nkids >= MAX_KIDS - 1)
        return fork_failed(r, "too many calls at once", EAGAIN);
    spare_known = true, spare_newnet = r->newnet;
    if (spare.pid && (spare.view != te_warm_view_gen() || spare.newnet != r->newnet))
        p1_drop(&spare); /* made for other namespaces or another view */
    /* every signal blocked from here until P2's copy is taken: P1 keeps
     * them blocked (te_warm_p1()), and no handler of ours changes the
     * memory P2 copies */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
#ifdef P1_SHARES_MEMORY
    /* P2 comes back here, in its own copy of this frame */
    if (__builtin_setjmp(p2_back))
        return 0;
#endif
    struct p1 p = spare;
    spare.pid = 0;
    int e = 0;
    for (int tries = 0; tries < 2; tries++) {
        if (!p.pid) {
            pid_t pid = p1_make(r->newnet, &p);
            if (pid == 0)
                return 0; /* P2, where P1 is a copy */
            if (pid < 0) {
                sigprocmask(SIG_SETMASK, &old, NULL);
                return fork_failed(r, "clone", -pid);
            }
        }
        if ((e = -hand_over(p.hand, r)) == 0)
            break;
        p1_drop(&p); /* a spare that died while it waited: once more */
    }
    if (e) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        return fork_failed(r, "P1 died before its call", e);
    }
    int fds[2] = {-1, -1};
    if (r->proxy_port) {
        fds[1] = recv_proxy(p.hand);
        if (fds[1] < 0) { /* P1 has told the report pipe too: reaped here */
            e = errno;
            sigprocmask(SIG_SETMASK, &old, NULL);
            p1_kill(&p);
            return fork_failed(r, "the call's proxy listener", e);
        }
    }
    wait_word(p.hand); /* "go", or closed (P1 failed a step) */
    /* our signals' handlers may run again: P2's copy is taken */
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(p.hand);
    fds[0] = (int)syscall(SYS_pidfd_open, p.pid, 0);
    close_req(r);
    kids[nkids++] = (struct kid){p.pid, r->id, p.stack, false};
    send_frame_fds(json_pack("{s:{s:I}}", "forked", "id", (json_int_t)r->id), fds,
                   fds[0] < 0   ? 0
                   : fds[1] < 0 ? 1
                                : 2);
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return p.pid;
}

int te_template_run(int *exit_code)
{
    *exit_code = 0;
    for (;;) {
        te_fork_request r;
        int rc = te_template_next(&r);
        if (rc <= 0) {
            *exit_code = rc < 0 ? 1 : 0;
            return 0;
        }
        if (te_template_fork(&r) == 0)
            return 1;
    }
}
