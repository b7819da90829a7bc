/*
 * warm.c - the template side of warm start (proto/PROTOCOL.md, "Warm
 * start"): the loop a template runs between calls, and the set-up of each
 * call's process. Written once, in C, for both SDKs: the C SDK calls it from
 * te_worker_main(), the Python SDK through ctypes, so both apply the same
 * steps in the same order.
 *
 * The daemon starts a template like a cold worker (same user, limits, PID and
 * mount namespace, filter) and sends it {"template": {...}} as its first
 * frame on fd 0, here one end of a Unix stream socket. The template answers
 * {"ready": {}} (with a pidfd of itself) and then only forks on request:
 * each {"fork": {"id", "dir", "newnet"}} frame carries the call's stdin,
 * stdout, stderr and report-pipe ends (SCM_RIGHTS). For each call:
 *
 *  P1 = clone(CLONE_VM | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS
 *       [| CLONE_NEWNET]), on a stack of its own, sharing the template's
 *       memory until it dies (see call_process() for the discipline that
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
 *
 * With "proxy": PORT in the fork frame (a tool with an egress allow-list;
 * with newnet), P1 also brings the loopback of its fresh network namespace
 * up and listens on 127.0.0.1:PORT there (a cold call's step 7d), and sends
 * the listener back over a socketpair made for this fork; the template
 * waits for it and attaches it to its "forked" frame, where the daemon
 * serves the call's proxy on it (call_proxy()).
 *
 * The template reaps each P1 and reports {"exited": {"id", "status",
 * "utime_us", "stime_us", "maxrss_kb"}}. The daemon kills a call through the
 * pidfd of P1 it got with {"forked": {"id"}}: P1 is the namespace's init, so
 * that one SIGKILL ends the call's whole tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "toolexec.h"

#include "fdpass.h"
#include "initwait.h" /* the report records, and P1's last duty as init.c's */
#include "warmcall.h"

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
};

/* A template serves at most this many calls at once. */
#define MAX_KIDS 1024

static struct kid {
    pid_t pid;
    unsigned id;
    void *stack; /* P1's (p1_stack()), freed once P1 is reaped */
    bool quiet;  /* a P1 that got no call (p1_drop()): no "exited" */
} kids[MAX_KIDS];
static size_t nkids;

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

/* A P1 whose first half is done (call_process()), waiting for its call. */
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

/* The tool's file-system view, as the last fork request gave it (the same
 * for every call of a template): on when the template was started in one
 * (the daemon's step 7c). */
#define VIEW_MAX 40 /* write paths: the daemon's 32 and /tmp, /dev */
static struct {
    bool on;
    int landlock;              /* its ABI; 0: no Landlock */
    char *write[VIEW_MAX + 1]; /* NULL-terminated */
    struct {
        char *path, *options;
        /* what refresh() clones back below path, planned in the template
         * (plan_fresh()); plan_err: why there is no plan */
        bool planned;
        int plan_err;
        size_t nkids;
        char *kids[64];
    } fresh[2];
    int nfresh;
    json_t *given; /* the view as the fork frame gave it, to see it unchanged */
} view;
static unsigned view_gen; /* one more at each change of the view */

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

static void view_clear(void)
{
    for (int i = 0; view.write[i]; i++) {
        free(view.write[i]);
        view.write[i] = NULL;
    }
    for (int i = 0; i < view.nfresh; i++) {
        free(view.fresh[i].path);
        free(view.fresh[i].options);
        for (size_t k = 0; k < view.fresh[i].nkids; k++)
            free(view.fresh[i].kids[k]);
    }
    json_decref(view.given);
    memset(&view, 0, sizeof(view));
}

static char *abs_path(const json_t *v)
{
    const char *p = json_string_value(v);
    return p && p[0] == '/' && strlen(p) < PATH_MAX ? strdup(p) : NULL;
}

/* A fork request's "view" (NULL: none): 0 or -1 when it is not one. */
static int parse_view(const json_t *v)
{
    /* the same for every call of a template: kept, with its plans (and a
     * spare made in it: view_gen), while the frames say the same, no view
     * included */
    static bool known;
    bool none = !v || json_is_null(v);
    if (known && (none ? !view.given : view.given && json_equal(v, view.given)))
        return 0;
    view_clear();
    view_gen++;
    known = true;
    if (none)
        return 0;
    view.given = json_incref((json_t *)v);
    json_t *fresh = json_object_get(v, "fresh"), *write = json_object_get(v, "write"), *x;
    json_t *ll = json_object_get(v, "landlock");
    size_t i;
    if (!json_is_object(v) || !json_is_array(fresh) || json_array_size(fresh) > 2 ||
        !json_is_array(write) || json_array_size(write) > VIEW_MAX || !json_is_integer(ll))
        return -1;
    view.on = true;
    view.landlock = (int)json_integer_value(ll);
    json_array_foreach(write, i, x)
    {
        if (!(view.write[i] = abs_path(x)))
            goto bad;
    }
    json_array_foreach(fresh, i, x)
    {
        const char *o = json_string_value(json_object_get(x, "options"));
        view.fresh[i].path = abs_path(json_object_get(x, "path"));
        view.fresh[i].options = o ? strdup(o) : NULL;
        view.nfresh++;
        if (!view.fresh[i].path || !view.fresh[i].options)
            goto bad;
    }
    return 0;
bad:
    view_clear();
    return -1;
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
        if (parse_view(json_object_get(f, "view")) < 0) {
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

/* ---- the call's processes --------------------------------------------------- */

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

enum { HAND_FD = 4 };

/* A cold call's step 7d (daemon/sandbox.c) in P1, in the call's fresh
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

/* A raw recvmsg() (no errno: the template runs meanwhile, see call_process()):
 * its byte count, 0 at the end, or -errno. */
static long sys_recvmsg(int fd, struct msghdr *m)
{
    long n;
    while ((n = te_sys(SYS_recvmsg, fd, (long)m, MSG_CMSG_CLOEXEC, 0)) == -EINTR)
        ;
    return n;
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
    long n = sys_recvmsg(hand, &m); /* raw: P1 runs the C library meanwhile */
    if (n > 0)
        te_fds_take(&m, &fd, 1);
    if (n == (long)sizeof(e) && e == 0 && fd >= 0)
        return fd;
    if (fd >= 0)
        te_sys(SYS_close, fd, 0, 0, 0);
    errno = n < 0 ? (int)-n : n != (long)sizeof(e) || e == 0 ? EPIPE : e;
    return -1;
}

/* ---- a warm call's own /tmp and /dev ------------------------------------------ */

/* The template's view (the daemon's step 7c) gave it a /tmp and a /dev of
 * its own, tmpfs mounts its calls would share: each call gets fresh ones,
 * with what the view mounted below the template's (the device nodes, "read"
 * and "write" paths, the way down to the work directory) cloned onto the
 * same places. What is below is found in mountinfo, by the template once
 * (plan_fresh()); P1 runs refresh(): system calls and static buffers only
 * (no at-fork handlers ran in it). */
struct mnt {
    int id, parent;
    const char *at;
};
#define MNT_MAX 256
static struct mnt mnts[MNT_MAX];
static size_t nmnts, pool_used;
static char mnt_pool[65536], mi_buf[16384];

/* mountinfo's octal escapes ("\040") back to bytes, in place */
static void unescape(char *s)
{
    char *d = s;
    while (*s) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
            s += 4;
        } else {
            *d++ = *s++;
        }
    }
    *d = '\0';
}

/* One line of mountinfo ("ID PARENT MAJ:MIN ROOT MOUNTPOINT ..."): kept
 * when its mount point is path or below it. */
static int take_mount(char *line, const char *path, size_t plen)
{
    char *f[5];
    int k = 0;
    for (char *p = line; k < 5 && *p;) {
        while (*p == ' ')
            p++;
        f[k++] = p;
        while (*p && *p != ' ')
            p++;
        if (*p)
            *p++ = '\0';
    }
    if (k < 5)
        return 0;
    unescape(f[4]);
    if (strncmp(f[4], path, plen) || (f[4][plen] && f[4][plen] != '/'))
        return 0;
    size_t n = strlen(f[4]) + 1;
    if (nmnts == MNT_MAX || pool_used + n > sizeof(mnt_pool)) {
        errno = E2BIG;
        return -1;
    }
    memcpy(mnt_pool + pool_used, f[4], n);
    mnts[nmnts++] = (struct mnt){atoi(f[0]), atoi(f[1]), mnt_pool + pool_used};
    pool_used += n;
    return 0;
}

static int scan_mounts(const char *path)
{
    nmnts = pool_used = 0;
    int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t have = 0, plen = strlen(path);
    int err = 0;
    while (!err) {
        ssize_t n = read(fd, mi_buf + have, sizeof(mi_buf) - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? errno : 0;
            break;
        }
        have += (size_t)n;
        char *line = mi_buf, *nl;
        while (!err && (nl = memchr(line, '\n', have - (size_t)(line - mi_buf)))) {
            *nl = '\0';
            if (take_mount(line, path, plen) < 0)
                err = errno;
            line = nl + 1;
        }
        have -= (size_t)(line - mi_buf);
        if (have == sizeof(mi_buf) - 1) /* a line longer than the buffer */
            err = E2BIG;
        memmove(mi_buf, line, have);
    }
    close(fd);
    if (!err && !nmnts)
        err = ENOENT;
    errno = err;
    return err ? -1 : 0;
}

/* a is strictly below b */
static bool under(const char *a, const char *b)
{
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && a[n] == '/';
}

/* The directories of rel below dir (0711, as the view's), the last one a
 * file when file is set (a mount point for one). */
static int make_chain_at(int dir, const char *rel, bool file)
{
    char p[PATH_MAX];
    size_t n = strlen(rel);
    if (n >= sizeof(p)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(p, rel, n + 1);
    for (size_t i = 0; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        p[i] = '\0';
        int rc;
        if (i == n && file) {
            int fd = openat(dir, p, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0);
            rc = fd < 0 ? -1 : close(fd);
        } else {
            rc = mkdirat(dir, p, 0711);
        }
        if (rc < 0 && errno != EEXIST)
            return -1;
        p[i] = i == n ? '\0' : '/';
    }
    return 0;
}

/* "k=v,k=v" into the tmpfs being configured */
/* The root of a tmpfs being configured owned by the call's uid and gid
 * (id->set; those of the namespace's, the template's, otherwise): with a
 * uid of its own, the call may use its fresh /dev, /tmp and cover as a cold
 * call of that uid does. */
static int own_root(int fs, const struct te_warm_id *id)
{
    char u[16], g[16];
    if (!id->set)
        return 0;
    snprintf(u, sizeof(u), "%u", (unsigned)id->uid);
    snprintf(g, sizeof(g), "%u", (unsigned)id->gid);
    return fsconfig(fs, FSCONFIG_SET_STRING, "uid", u, 0) < 0 ||
                   fsconfig(fs, FSCONFIG_SET_STRING, "gid", g, 0) < 0
               ? -1
               : 0;
}

static int configure(int fs, const char *options)
{
    char o[256];
    if (strlen(options) >= sizeof(o)) {
        errno = EINVAL;
        return -1;
    }
    strcpy(o, options);
    for (char *k = o, *next; k && *k; k = next) {
        next = strchr(k, ',');
        if (next)
            *next++ = '\0';
        char *v = strchr(k, '=');
        if (v)
            *v++ = '\0';
        if (fsconfig(fs, v ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, k, v, 0) < 0)
            return -1;
    }
    return 0;
}

/* In the template, before P1 is cloned (its mounts are where every P1's
 * copy starts from): which mounts below fresh path i a call's fresh tmpfs
 * gets back, once per template. P1 read mountinfo for it twice a call:
 * ~160 us of a ~3.5 ms warm call on a 2-CPU VM (perf, 300 calc calls:
 * show_mountinfo and seq_read 2.3% of all samples). */
static void plan_fresh(int which)
{
    __typeof__(view.fresh[0]) *f = &view.fresh[which];
    if (f->planned)
        return;
    f->planned = true;
    const char *path = f->path;
    if (scan_mounts(path) < 0) {
        f->plan_err = errno;
        return;
    }
    const struct mnt *top = NULL;
    for (size_t i = 0; i < nmnts; i++) {
        bool covered = false;
        for (size_t k = 0; k < nmnts; k++)
            covered |= mnts[k].parent == mnts[i].id && strcmp(mnts[k].at, path) == 0;
        if (strcmp(mnts[i].at, path) == 0 && !covered)
            top = &mnts[i];
    }
    if (!top) {
        f->plan_err = ENOENT;
        return;
    }
    for (size_t i = 0; i < nmnts; i++) {
        const struct mnt *m = &mnts[i];
        bool below = false; /* below another child: covered by it */
        for (size_t k = 0; k < nmnts; k++)
            below |=
                mnts[k].parent == top->id && strcmp(mnts[k].at, path) && under(m->at, mnts[k].at);
        if (m->parent != top->id || strcmp(m->at, path) == 0 || below)
            continue;
        if (f->nkids == sizeof(f->kids) / sizeof(f->kids[0]) ||
            !(f->kids[f->nkids] = strdup(m->at))) {
            f->plan_err = E2BIG;
            return;
        }
        f->nkids++;
    }
}

/* A fresh tmpfs at path, built detached and then moved there. The cover
 * of the template's directory (its path cdpath, open as *cd), where the
 * call's directory goes, may be below a mount cloned here: *cd is then
 * reopened in the clone, so that nothing the call can reach (not even "..")
 * is of the template's mounts underneath. */
static int refresh(int which, const char *cdpath, int *cd, const struct te_warm_id *id)
{
    const __typeof__(view.fresh[0]) *f = &view.fresh[which];
    const char *path = f->path, *options = f->options;
    if (f->plan_err || !f->planned) {
        errno = f->planned ? f->plan_err : EINVAL;
        return -1;
    }
    bool dev = strcmp(path, "/dev") == 0;
    int fs = -1, mnt = -1, rc = -1;
    if ((fs = fsopen("tmpfs", FSOPEN_CLOEXEC)) < 0 || configure(fs, options) < 0 ||
        own_root(fs, id) < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (mnt = fsmount(fs, FSMOUNT_CLOEXEC,
                       MOUNT_ATTR_NOSUID | (dev ? MOUNT_ATTR_NOEXEC : MOUNT_ATTR_NODEV))) < 0)
        goto out;
    size_t plen = strlen(path);
    for (size_t k = 0; k < f->nkids; k++) {
        const char *at = f->kids[k];
        const char *rel = at + plen + 1;
        struct stat st;
        int clone = (int)syscall(SYS_open_tree, AT_FDCWD, at,
                                 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (clone < 0)
            goto out;
        if (fstat(clone, &st) < 0 || make_chain_at(mnt, rel, !S_ISDIR(st.st_mode)) < 0 ||
            move_mount(clone, "", mnt, rel, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
            int e = errno;
            close(clone);
            errno = e;
            goto out;
        }
        size_t n = strlen(at);
        if (strcmp(cdpath, at) == 0 || under(cdpath, at)) {
            int again =
                openat(clone, cdpath[n] ? cdpath + n + 1 : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (again < 0) {
                int e = errno;
                close(clone);
                errno = e;
                goto out;
            }
            close(*cd);
            *cd = again;
        }
        close(clone);
    }
    if (dev) { /* the rest of fsview.c's /dev */
        static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                               {"stdin", "/proc/self/fd/0"},
                                               {"stdout", "/proc/self/fd/1"},
                                               {"stderr", "/proc/self/fd/2"}};
        for (int i = 0; i < 4; i++)
            if (symlinkat(links[i][1], mnt, links[i][0]) < 0 && errno != EEXIST)
                goto out;
        if (mkdirat(mnt, "shm", 01777) < 0 && errno != EEXIST)
            goto out;
    }
    rc = move_mount(mnt, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH);
out:;
    int e = errno;
    if (fs >= 0)
        close(fs);
    if (mnt >= 0)
        close(mnt);
    errno = e;
    return rc;
}

/* The template's directory (the cwd) under a tmpfs, into which the call's
 * own is bound back later (call_dir()): the same view as a cold call's,
 * where the work directory is covered and only the call's directory is
 * bound back. Through descriptors (the new mount API), never by path: the
 * work directory's ancestors need not let the call's user through (a cold
 * call passes them as root). With every mount private first, the view's
 * fresh /tmp and /dev (refresh()) and a /proc of the call's namespace: all
 * of P1's mounts that are not the call's, so a spare P1 makes them before
 * its call is known. *here: the template's directory itself, below the
 * cover (the way to the call's); *cover: the cover as the call will see it,
 * reopened through a fresh /tmp cloned over it. */
static int base_mounts(int *here, int *cover, const struct te_warm_id *id)
{
    int fs = -1, rc = -1;
    char tpath[PATH_MAX];
    *here = *cover = -1;
    if (view.on && !getcwd(tpath, sizeof(tpath))) /* for refresh() */
        return -1;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        (*here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        (fs = fsopen("tmpfs", FSOPEN_CLOEXEC)) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0711", 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", "8", 0) < 0 || own_root(fs, id) < 0 ||
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (*cover = fsmount(fs, FSMOUNT_CLOEXEC,
                          MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0 ||
        move_mount(*cover, "", *here, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        goto out;
    mode_t mask = umask(0); /* the modes as the view's (1777 for /dev/shm) */
    for (int i = 0; i < view.nfresh; i++)
        if (refresh(i, tpath, cover, id) < 0) {
            int e = errno;
            umask(mask);
            errno = e;
            goto out;
        }
    umask(mask);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        goto out;
    rc = 0;
out:;
    int e = errno;
    if (fs >= 0)
        close(fs);
    errno = e;
    return rc;
}

/* The call's directory (dir, in the template's: here) bound into the cover
 * (base_mounts()), which is read-only from then on, and made the cwd. 0,
 * -1 (a mount step failed) or -2 (the chdir), with errno set. */
static int call_dir(int here, int cover, const char *dir)
{
    int call = -1, tree = -1, cd = -1, rc = -1;
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
    if ((call = openat(here, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        (tree = open_tree(call, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH)) < 0 ||
        mkdirat(cover, dir, 0700) < 0 ||
        move_mount(tree, "", cover, dir, MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
        mount_setattr(cover, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0 ||
        (cd = openat(cover, dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        goto out;
    rc = fchdir(cd) < 0 ? -2 : 0;
out:;
    int e = errno, fds[] = {call, tree, cd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    errno = e;
    return rc;
}

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/* What only the set-up needed, refused from the call's process on; with
 * EPERM, unreported: a stacked filter cannot notify the daemon (one
 * listener per chain, the template's; daemon/sysfilter.c). */
static int stack_filter(void)
{
#ifdef NATIVE_ARCH
    enum { EPERM_ = SECCOMP_RET_ERRNO | EPERM, ENOSYS_ = SECCOMP_RET_ERRNO | ENOSYS };
    const unsigned nsflags = CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                             CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
#define DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, EPERM_)
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, EPERM_),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* x32 */
        BPF_STMT(BPF_RET | BPF_K, EPERM_),
#endif
        DENY(SYS_unshare),
        DENY(SYS_setns),
        DENY(SYS_mount),
        DENY(SYS_umount2),
        DENY(SYS_pivot_root),
        DENY(SYS_open_tree),
        DENY(SYS_move_mount),
        DENY(SYS_fsopen),
        DENY(SYS_fsmount),
        DENY(SYS_fsconfig),
        DENY(SYS_fspick),
        DENY(SYS_mount_setattr),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, ENOSYS_),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, nsflags, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, EPERM_),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
#undef DENY
    struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
    errno = ENOSYS;
    return -1;
#endif
}

static int drop_caps(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    return (int)syscall(SYS_capset, &h, d);
}

#ifdef P1_SHARES_MEMORY
/* Where a call's process (P2) leaves P1's stack for the template's:
 * te_template_fork()'s frame, set before P1 gets its call. P2's memory is a
 * copy of the template's taken while the template waits inside that very
 * frame (for P1's "go"), so the frame is intact in the copy. */
static void *p2_back[5]; /* __builtin_setjmp's buffer: frame, label, stack */
#endif

struct p1_args {
    uid_t uid;
    gid_t gid;
    int hand;       /* P1's end of the socketpair (HAND_FD) */
    int mapr, mapw; /* daemon_maps: the pipe the daemon answers on, -1 */
};

/* In P1: its call, as hand_over() sends it: the request (in the template's
 * memory, which P1 shares or is a copy of) and its four descriptors. 0, or
 * -1 when the template closed its end instead (it dropped this P1, or died). */
static int wait_call(const te_fork_request **r, int fds[4])
{
    te_fds_space c;
    struct iovec iov = {(void *)r, sizeof(*r)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_room(&m, &c, 4);
    long n = sys_recvmsg(HAND_FD, &m);
    return n >= 0 && te_fds_take(&m, fds, 4) == 4 && n == (long)sizeof(*r) ? 0 : -1;
}

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

/* P1, PID 1 of the call's namespace: never returns, except as P2 (0).
 *
 * It runs in two halves. First what does not depend on the call (its
 * namespaces' set-up: session, id maps, base_mounts()); then it says "p"
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
static int call_process(void *arg)
{
    /* the template's frame is gone by the time a spare gets its call */
    const struct p1_args a = *(const struct p1_args *)arg;
    int fail = 0, fail_errno = 0, here = -1, cover = -1;
    /* With daemon_maps, first the daemon's answer (raw: the template is
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
    PREP(STEP_MOUNT, fail || base_mounts(&here, &cover, &id) == 0);
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
    if (fail) {
        errno = fail_errno;
        p1_fail(fail);
    }
    int m = call_dir(here, cover, r->dir);
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
        /* its own uid, limit and bounding set while it has the
         * capabilities for them; then the death signal, which a uid change
         * clears */
        if (te_warm_call_identity(&id, call_nproc) < 0)
            p1_fail(STEP_USERNS);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
            p1_fail(STEP_PDEATHSIG);
        if (drop_caps() < 0)
            p1_fail(STEP_SECCOMP);
        /* the view's second layer, as a cold call's step 11a (after
         * the mounts: Landlock forbids them to its domain) */
        if (view.landlock > 0 &&
            te_landlock_writes(view.landlock, (const char *const *)view.write) < 0)
            p1_fail(STEP_LANDLOCK);
        if (view.landlock <= 0 && te_warm_fence(ll_abi) < 0)
            p1_fail(STEP_LANDLOCK);
        if (stack_filter() < 0)
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

#ifdef P1_SHARES_MEMORY
/* P1 on its own stack: P2 returns from call_process() and jumps back. */
static int p1_main(void *arg)
{
    if (call_process(arg) == 0)
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
    for (int i = 0; i < view.nfresh; i++)
        plan_fresh(i); /* once: a failure is P1's to report, as before */
    /* CLONE_NEWIPC: SysV IPC and POSIX message queues of the call's own,
     * gone with it (issue 20) */
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
    struct p1_args args = {geteuid(), getegid(), hand[1], mp[0], mp[1]};
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
    if (pid == 0 && call_process(&args) == 0)
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
    *out = (struct p1){pid, stack, hand[0], view_gen, newnet};
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
    if (spare.pid && (spare.view != view_gen || spare.newnet != r->newnet))
        p1_drop(&spare); /* made for other namespaces or another view */
    /* every signal blocked from here until P2's copy is taken: P1 keeps
     * them blocked (call_process()), and no handler of ours changes the
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
