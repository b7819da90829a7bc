/*
 * template.c - warm start (proto/PROTOCOL.md, "Warm start"): for each tool
 * with "start": "warm", a template process started like a cold worker of the
 * tool (worker.c's spawn description: user, limits, PID and mount namespace,
 * filter), told by its first frame that it is a template; per call a fork
 * request carrying the call's descriptors over the control socket (its
 * stdin). The set-up of each call's process is the SDKs' (lib/warm.c).
 *
 * A template that dies, says garbage, or does not answer (at start within
 * START_MS, a fork request within FORK_MS) is killed and started again after
 * a back-off (BACKOFF_MIN_MS doubling to BACKOFF_MAX_MS; reset once one is
 * ready). Meanwhile calls run cold. After max_forks calls, and when a reload
 * changes its definition, a template is retired: told to finish (its stdin
 * shut), it exits once its calls have ended, and a fresh one serves the next
 * calls.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <linux/sockios.h> /* SIOCGSKNS */
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calldir.h"
#include "cgroup.h"
#include "config.h"
#include "containment.h"
#include "egress.h"
#include "fdpass.h"
#include "fsview.h"
#include "identity.h"
#include "log.h"
#include "reaper.h"
#include "registry.h"
#include "sandbox.h"
#include "sysnotify.h"
#include "template.h"
#include "toolexec.h"
#include "warmid.h"

#define START_MS 10000     /* from spawn to "ready" */
#define FORK_MS 2000       /* from a fork request to its answer */
#define BACKOFF_MIN_MS 100 /* first restart after a failure */
#define BACKOFF_MAX_MS 30000
#define CTL_MAX 65536 /* largest control frame */

enum inst_state { I_STARTING, I_READY, I_RETIRING, I_DEAD };

struct td_warm_call {
    TAILQ_ENTRY(td_warm_call) link;
    struct inst *inst;
    unsigned id;
    char *dir; /* name in the template's directory */
    const struct td_warm_ops *ops;
    void *data; /* NULL once its worker is gone */
    bool forked, exited;
    bool proxy; /* its tool's egress allow-list: "forked" brings the listener */
    int pidfd;
    uint64_t asked_ns;
    /* wd: its denied system calls go there (NULL: nowhere, its result is
     * out); ns: its PID namespace (inode), 0 until asked */
    struct td_denials *denied;
    uint64_t ns;
};
TAILQ_HEAD(call_list, td_warm_call);

/* One template process. Lives until its process is reaped and every call
 * it served has ended (refs). */
struct inst {
    LIST_ENTRY(inst) ilink; /* every instance not yet freed */
    struct warm *owner;     /* NULL once retired */
    struct td_tool *tool;
    enum inst_state state;
    int refs;
    pid_t pid;  /* as spawned (toolexecd-init in a PID namespace) */
    pid_t tpid; /* the template itself, from its pidfd */
    int ctl, out, err, report;
    uv_poll_t poll, *outp, *errp; /* its stdout and stderr: logged */
    uv_timer_t timer;
    int handles;
    te_frame_decoder dec;
    int fdq[16]; /* descriptors received, in order, for ready/forked */
    int nfdq;
    char *dir; /* its directory (WORK/...) */
    int dirfd;
    uid_t uid; /* from the identity pool, (uid_t)-1 none */
    gid_t gid;
    struct td_cgroup *cg;
    uint64_t started_ns;
    unsigned served, next_id;
    struct call_list calls;
    /* wd: the listener of its filter, for it and its calls (sysnotify.c);
     * its PID namespace (inode), 0 unknown */
    struct td_sysnotify *sysn;
    uint64_t ns;
    /* the last process that had a denial routed: its pid, a pidfd of it
     * (-1: none) and its PID namespace */
    pid_t last_pid;
    int last_pidfd;
    uint64_t last_ns;
    /* its tool's file-system view, sent with each fork request: NULL
     * where it sees the host's */
    json_t *view;
};

/* Per warm tool. */
struct warm {
    SLIST_ENTRY(warm) link;
    char *name;
    struct td_tool *tool;
    struct inst *cur;
    unsigned restarts, failures;
    uv_timer_t backoff;
    bool backoff_running;
};
static SLIST_HEAD(, warm) all = SLIST_HEAD_INITIALIZER(all);
static LIST_HEAD(, inst) insts = LIST_HEAD_INITIALIZER(insts);
static td_template_spawn_fn spawn_fn;
static char ctl_buf[CTL_MAX];

static void inst_stop(struct inst *in, const char *why);
static void start(struct warm *w);
static int route_denial(void *ctx, pid_t pid, struct td_denials **d);
static uint64_t pidns_of(pid_t pid);

void td_template_setup(td_template_spawn_fn spawn)
{
    spawn_fn = spawn;
}

/* ---- instances ---------------------------------------------------------------- */

static void inst_maybe_free(struct inst *in)
{
    if (in->refs > 0 || in->handles > 0)
        return;
    LIST_REMOVE(in, ilink);
    te_frame_decoder_free(&in->dec);
    for (int i = 0; i < in->nfdq; i++)
        close(in->fdq[i]);
    if (in->dirfd >= 0)
        close(in->dirfd);
    if (in->dir)
        td_calldir_remove_async(in->dir);
    json_decref(in->view);
    td_tool_unref(in->tool);
    free(in);
}

static void on_inst_handle_closed(uv_handle_t *h)
{
    struct inst *in = h->data;
    if (h == (uv_handle_t *)in->outp || h == (uv_handle_t *)in->errp)
        free(h);
    in->handles--;
    inst_maybe_free(in);
}

static void inst_unref(struct inst *in)
{
    in->refs--;
    inst_maybe_free(in);
}

/* Reaped: its handles and descriptors go; calls may still hold it. */
static void inst_close(struct inst *in)
{
    uv_handle_t *hs[4] = {(uv_handle_t *)&in->poll, (uv_handle_t *)&in->timer,
                          (uv_handle_t *)in->outp, (uv_handle_t *)in->errp};
    for (int i = 0; i < 4; i++)
        if (hs[i] && hs[i]->data == in && !uv_is_closing(hs[i]))
            uv_close(hs[i], on_inst_handle_closed);
    if (in->ctl >= 0)
        close(in->ctl);
    if (in->out >= 0)
        close(in->out);
    if (in->err >= 0)
        close(in->err);
    in->ctl = in->out = in->err = -1;
    td_sysnotify_stop(in->sysn);
    in->sysn = NULL;
    if (in->last_pidfd >= 0)
        close(in->last_pidfd);
    in->last_pidfd = -1;
}

static int send_ctl(struct inst *in, json_t *msg, const int *fds, int nfds)
{
    char *body = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!body)
        return -ENOMEM;
    /* A few hundred bytes into an idle socket: all or nothing. A template
     * that lets its socket fill up is not reading: hung. */
    int rc = te_frame_send(in->ctl, body, strlen(body), fds, nfds, MSG_DONTWAIT);
    free(body);
    return rc;
}

static struct td_warm_call *find_call(struct inst *in, unsigned id)
{
    struct td_warm_call *c;
    TAILQ_FOREACH(c, &in->calls, link)
        if (c->id == id)
            return c;
    return NULL;
}

static void call_exit(struct td_warm_call *c, int status, const struct rusage *ru, const char *why)
{
    if (c->exited)
        return;
    c->exited = true;
    if (c->data)
        c->ops->exited(c->data, status, ru, why);
}

static void arm_fork_timer(struct inst *in);

static int take_fd(struct inst *in)
{
    if (!in->nfdq)
        return -1;
    int fd = in->fdq[0];
    memmove(in->fdq, in->fdq + 1, (size_t)(--in->nfdq) * sizeof(int));
    return fd;
}

/* Is fd what a call's P1 makes for its proxy (lib/warm.c call_proxy(), a
 * cold call's step 7d): a TCP socket listening on 127.0.0.1:TD_EGRESS_PORT
 * in a network namespace that is not the template's (tpid), and is the
 * call's own (behind pidfd) when that process is still there to ask (a
 * quick call's P1 may have exited already, its namespace kept by fd)? */
static bool proxy_listener_ok(int fd, pid_t tpid, int pidfd)
{
    int v[3];
    socklen_t l[3] = {sizeof(int), sizeof(int), sizeof(int)};
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v[0], &l[0]) < 0 || v[0] != AF_INET ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &v[1], &l[1]) < 0 || v[1] != SOCK_STREAM ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v[2], &l[2]) < 0 || !v[2] ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0 || al != sizeof(a) ||
        a.sin_addr.s_addr != htonl(INADDR_LOOPBACK) || a.sin_port != htons(TD_EGRESS_PORT))
        return false;
    char path[64];
    struct stat sk, tpl, call;
    int ns = ioctl(fd, SIOCGSKNS);
    bool ok = ns >= 0 && fstat(ns, &sk) == 0;
    if (ns >= 0)
        close(ns);
    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)tpid);
    if (!ok || stat(path, &tpl) < 0 || (sk.st_dev == tpl.st_dev && sk.st_ino == tpl.st_ino))
        return false;
    pid_t p1 = td_sandbox_pidfd_pid(pidfd);
    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)p1);
    if (p1 > 0 && stat(path, &call) == 0 && td_sandbox_pidfd_pid(pidfd) == p1)
        return sk.st_dev == call.st_dev && sk.st_ino == call.st_ino;
    return true;
}

/* One control frame; false: garbage (why says what). */
static bool on_msg(struct inst *in, const char *body, size_t len, char *why, size_t whylen)
{
    json_t *m = json_loadb(body, len, 0, NULL);
    json_t *v;
    bool ok = true;
    if (!json_is_object(m) || json_object_size(m) != 1) {
        snprintf(why, whylen, "not a control message: %.*s", (int)(len > 80 ? 80 : len), body);
        ok = false;
    } else if ((v = json_object_get(m, "ready"))) {
        int fd = take_fd(in);
        if (in->state != I_STARTING || fd < 0) {
            snprintf(why, whylen, "\"ready\" out of turn");
            ok = false;
        } else {
            in->tpid = td_sandbox_pidfd_pid(fd);
            in->state = I_READY;
            uv_timer_stop(&in->timer);
            if (in->owner)
                in->owner->failures = 0;
            td_log(TD_LOG_INFO, "tool %s: warm template ready (pid %d)", in->tool->name,
                   (int)in->tpid);
        }
        if (fd >= 0)
            close(fd);
    } else if ((v = json_object_get(m, "map"))) {
        /* a P1's id maps, with a uid of its call's own (warmid.c) */
        int pidfd = take_fd(in), answer = take_fd(in);
        if (pidfd < 0 || answer < 0 || in->uid == (uid_t)-1 || in->tpid <= 0) {
            snprintf(why, whylen, "\"map\" out of turn");
            ok = false;
            if (pidfd >= 0)
                close(pidfd);
            if (answer >= 0)
                close(answer);
        } else {
            int rc = td_warmid_map(pidfd, answer, in->tpid, in->uid, in->gid, !in->tool->group);
            if (rc == -EPERM) {
                snprintf(why, whylen, "\"map\" for a process not its call's PID 1");
                ok = false;
            } else if (rc < 0) {
                td_log(TD_LOG_WARN, "tool %s: no uid for a warm call: %s", in->tool->name,
                       strerror(-rc));
            }
        }
    } else if ((v = json_object_get(m, "forked")) || (v = json_object_get(m, "fork_failed")) ||
               (v = json_object_get(m, "exited"))) {
        const char *kind = json_object_iter_key(json_object_iter(m));
        json_t *id = json_object_get(v, "id");
        struct td_warm_call *c =
            json_is_integer(id) ? find_call(in, (unsigned)json_integer_value(id)) : NULL;
        if (!c || (strcmp(kind, "exited") && c->forked) ||
            (strcmp(kind, "exited") == 0 && !c->forked)) {
            snprintf(why, whylen, "\"%s\" for no call waiting for it", kind);
            ok = false;
        } else if (strcmp(kind, "forked") == 0) {
            int fd = take_fd(in);
            int lfd = c->proxy ? take_fd(in) : -1;
            c->forked = true;
            c->pidfd = fd;
            if (fd < 0) {
                snprintf(why, whylen, "\"forked\" without a pidfd");
                ok = false;
            } else if (c->proxy && (lfd < 0 || !proxy_listener_ok(lfd, in->tpid, fd))) {
                snprintf(why, whylen, "\"forked\" without the call's proxy listener");
                ok = false;
            } else if (c->data) {
                if (lfd >= 0) /* before forked(): a kill there may end the call */
                    c->ops->listener(c->data, lfd);
                lfd = -1;
                c->ops->forked(c->data, fd);
            } else { /* its worker is gone */
                syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
            }
            /* its denials that came before this frame */
            td_sysnotify_retry(in->sysn);
            if (lfd >= 0)
                close(lfd);
            arm_fork_timer(in);
        } else if (strcmp(kind, "fork_failed") == 0) {
            const char *e = json_string_value(json_object_get(v, "error"));
            char text[256];
            snprintf(text, sizeof(text), "the warm template could not fork: %s", e ? e : "?");
            td_log(TD_LOG_WARN, "tool %s: %s", in->tool->name, text);
            c->forked = true;
            call_exit(c, W_EXITCODE(127, 0), NULL, text);
            arm_fork_timer(in);
            /* a template that cannot fork (threads) is replaced */
            inst_stop(in, NULL);
        } else {
            json_t *st = json_object_get(v, "status");
            struct rusage ru;
            memset(&ru, 0, sizeof(ru));
            long long u = json_integer_value(json_object_get(v, "utime_us"));
            long long s = json_integer_value(json_object_get(v, "stime_us"));
            ru.ru_utime.tv_sec = u / 1000000, ru.ru_utime.tv_usec = u % 1000000;
            ru.ru_stime.tv_sec = s / 1000000, ru.ru_stime.tv_usec = s % 1000000;
            ru.ru_maxrss = (long)json_integer_value(json_object_get(v, "maxrss_kb"));
            if (!json_is_integer(st)) {
                snprintf(why, whylen, "\"exited\" without a status");
                ok = false;
            } else {
                call_exit(c, (int)json_integer_value(st), &ru, NULL);
            }
        }
    } else {
        snprintf(why, whylen, "unknown control message: %.*s", (int)(len > 80 ? 80 : len), body);
        ok = false;
    }
    json_decref(m);
    return ok;
}

static void on_ctl(uv_poll_t *p, int status, int events)
{
    struct inst *in = p->data;
    (void)events;
    if (status < 0) {
        inst_stop(in, "control socket failed");
        return;
    }
    for (;;) {
        te_fds_space c;
        struct iovec iov = {ctl_buf, sizeof(ctl_buf)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        te_fds_room(&m, &c, TE_FDS_MAX);
        ssize_t n = recvmsg(in->ctl, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n >= 0)
            in->nfdq += (int)te_fds_take(&m, in->fdq + in->nfdq,
                                         sizeof(in->fdq) / sizeof(in->fdq[0]) - (size_t)in->nfdq);
        if (n <= 0) { /* it closed its end: it is ending (its exit says more) */
            uv_poll_stop(p);
            return;
        }
        const char *d = ctl_buf;
        size_t left = (size_t)n;
        while (left) {
            size_t used;
            int rc = te_frame_feed(&in->dec, d, left, &used);
            d += used;
            left -= used;
            if (rc == TE_FRAME_DONE) {
                size_t len;
                char *body = te_frame_take(&in->dec, &len);
                char why[160];
                bool ok = on_msg(in, body, len, why, sizeof(why));
                free(body);
                if (!ok) {
                    char text[200];
                    snprintf(text, sizeof(text), "answered garbage: %s", why);
                    inst_stop(in, text);
                    return;
                }
                if (in->state == I_DEAD)
                    return;
            } else if (rc < 0) {
                inst_stop(in, "answered garbage: not a control frame");
                return;
            }
        }
    }
}

/* Its stdout is not a channel of the protocol, its stderr its own log: what
 * comes there is logged (a line per read, at most 400 bytes of it). */
static void on_out(uv_poll_t *p, int status, int events)
{
    struct inst *in = p->data;
    (void)status, (void)events;
    ssize_t n = read(p == in->outp ? in->out : in->err, ctl_buf, sizeof(ctl_buf));
    if (n <= 0) {
        uv_poll_stop(p);
        return;
    }
    size_t k = 0;
    while (k < (size_t)n && ctl_buf[k] != '\n' && k < 400)
        k++;
    /* "stderr: " as a worker's relayed lines have it: what follows is the
     * tool's text, not the daemon's */
    td_log(TD_LOG_INFO, "tool %s: warm template: %s: %.*s", in->tool->name,
           p == in->outp ? "stdout" : "stderr", (int)k, ctl_buf);
}

static void on_timer(uv_timer_t *t)
{
    struct inst *in = t->data;
    if (in->state == I_STARTING)
        inst_stop(in, "hung: not ready in time");
    else
        inst_stop(in, "hung: a fork request was not answered in time");
}

/* The oldest unanswered fork request bounds the next answer. */
static void arm_fork_timer(struct inst *in)
{
    if (in->state == I_STARTING || in->state == I_DEAD)
        return;
    struct td_warm_call *c;
    TAILQ_FOREACH(c, &in->calls, link)
        if (!c->forked) {
            uint64_t el = (uv_hrtime() - c->asked_ns) / 1000000;
            uv_timer_start(&in->timer, on_timer, el >= FORK_MS ? 0 : FORK_MS - el, 0);
            return;
        }
    uv_timer_stop(&in->timer);
}

static void backoff_done(uv_timer_t *t)
{
    struct warm *w = t->data;
    w->backoff_running = false;
    if (!w->cur && w->tool)
        start(w);
}

static void on_inst_reaped(void *data)
{
    (void)data;
}

static void on_inst_exit(void *data, int status, const struct rusage *ru)
{
    struct inst *in = data;
    (void)ru;
    struct td_report rep;
    td_sandbox_report(in->report, &rep);
    if (rep.have_status)
        status = rep.status;
    bool retired = !in->owner || in->state == I_RETIRING;
    if (rep.failed) {
        td_log(TD_LOG_WARN, "tool %s: warm template could not start: %s: %s", in->tool->name,
               rep.step, strerror(rep.err));
    }
    char why[64];
    if (WIFSIGNALED(status))
        snprintf(why, sizeof(why), "died by signal %d", WTERMSIG(status));
    else
        snprintf(why, sizeof(why), "exited with status %d", WEXITSTATUS(status));
    in->pid = 0; /* reaped: the number may be another's now */
    if (in->state != I_DEAD)
        inst_stop(in, retired ? NULL : why);
    /* every process of it is gone: its calls too (PR_SET_PDEATHSIG) */
    /* (a worker may end its call, and free it, from the callback) */
    struct td_warm_call *c, *cnext;
    for (c = TAILQ_FIRST(&in->calls); c; c = cnext) {
        cnext = TAILQ_NEXT(c, link);
        call_exit(c, W_EXITCODE(0, SIGKILL), NULL, "the tool's warm template died");
    }
    if (in->uid != (uid_t)-1)
        td_identity_give(in->uid);
    in->uid = (uid_t)-1;
    td_cgroup_release(in->cg);
    in->cg = NULL;
    close(in->report);
    in->report = -1;
    inst_close(in);
    inst_unref(in);
}

/* Kill it (why: a failure to log and back off from; NULL: retired or
 * replaced, no back-off). Its calls end with it. */
static void inst_stop(struct inst *in, const char *why)
{
    if (in->state == I_DEAD)
        return;
    struct warm *w = in->owner;
    if (why)
        td_log(TD_LOG_WARN, "tool %s: warm template %s; restarting it", in->tool->name, why);
    in->state = I_DEAD;
    uv_timer_stop(&in->timer);
    if (uv_is_active((uv_handle_t *)&in->poll))
        uv_poll_stop(&in->poll);
    if (in->pid > 0 && kill(in->pid, SIGKILL) < 0 && errno != ESRCH)
        td_log(TD_LOG_WARN, "kill(%d): %s", (int)in->pid, strerror(errno));
    td_cgroup_kill(in->cg);
    if (w && w->cur == in) {
        w->cur = NULL;
        w->restarts++;
        unsigned delay = 0;
        if (why) {
            delay = BACKOFF_MIN_MS << (w->failures < 9 ? w->failures : 9);
            if (delay > BACKOFF_MAX_MS)
                delay = BACKOFF_MAX_MS;
            w->failures++;
        }
        w->backoff_running = true;
        uv_timer_start(&w->backoff, backoff_done, delay, 0);
    }
    in->owner = NULL;
}

/* No new calls; it exits once those in flight have ended. */
static void inst_retire(struct inst *in)
{
    if (in->state == I_DEAD || in->state == I_RETIRING)
        return;
    struct warm *w = in->owner;
    if (in->state == I_STARTING) {
        inst_stop(in, NULL);
        return;
    }
    in->state = I_RETIRING;
    shutdown(in->ctl, SHUT_WR);
    if (w && w->cur == in) {
        w->cur = NULL;
        w->restarts++;
        start(w);
    }
}

static void inst_handle(struct inst *in, uv_handle_t *h)
{
    h->data = in;
    in->handles++;
}

/* What each call of in must redo of its tool's view (proto/PROTOCOL.md,
 * "Warm start", step 4): {"fresh": [{"path", "options"}], "landlock": ABI,
 * "write": [paths]}: the tmpfs mounts a call gets fresh (/tmp and /dev,
 * unless a "read" or "write" path names one: then it is the host's), and
 * the paths Landlock lets it write beneath besides its directory (ABI 0:
 * no Landlock). None where the tool sees the host. 0 or -ENOMEM. */
static int view_of(struct inst *in)
{
    const struct td_fsplan *plan;
    const char *const *ll;
    const struct td_tool *t = in->tool;
    if (td_fsview_plan(t->fs, t->argv ? t->argv[0] : NULL, td_init_path, true, &plan, &ll) < 0)
        return -ENOMEM;
    if (!plan)
        return 0;
    json_t *write = json_array(), *fresh = json_array();
    for (const char *const *p = ll; p && *p; p++)
        json_array_append_new(write, json_string(*p));
    static const char *const tmpfs[][2] = {{"/tmp", TD_FS_TMP_OPTS}, {"/dev", TD_FS_DEV_OPTS}};
    for (int i = 0; i < 2; i++) {
        bool named = false;
        for (char **p = t->fs->read; p && *p; p++)
            named |= strcmp(*p, tmpfs[i][0]) == 0;
        for (char **p = t->fs->write; p && *p; p++)
            named |= strcmp(*p, tmpfs[i][0]) == 0;
        if (!named)
            json_array_append_new(
                fresh, json_pack("{s:s,s:s}", "path", tmpfs[i][0], "options", tmpfs[i][1]));
    }
    in->view = json_pack("{s:o,s:i,s:o}", "fresh", fresh, "landlock",
                         ll ? td_fsview_landlock_abi() : 0, "write", write);
    return in->view ? 0 : -ENOMEM;
}

static void start(struct warm *w)
{
    if (w->cur || !spawn_fn || td_shutting_down)
        return;
    struct inst *in = calloc(1, sizeof(*in));
    if (!in)
        return;
    in->refs = 1; /* its process's, until reaped */
    LIST_INSERT_HEAD(&insts, in, ilink);
    in->tool = td_tool_ref(w->tool);
    in->uid = (uid_t)-1;
    in->dirfd = -1;
    in->last_pidfd = -1;
    in->report = in->ctl = in->out = in->err = -1;
    TAILQ_INIT(&in->calls);
    te_frame_decoder_init(&in->dec, CTL_MAX);
    const char *what = "malloc";
    int err = 0;
    uid_t uid = in->tool->uid;
    gid_t gid = in->tool->gid;
    if (in->tool->switch_user && !in->tool->user && td_identity_active()) {
        what = "template uid";
        if ((err = -td_identity_take(&in->uid)) > 0)
            goto fail;
        uid = in->uid;
        gid = in->tool->group ? in->tool->gid : (gid_t)in->uid;
    }
    in->gid = gid;
    int mk = in->tool->switch_user ? td_calldir_make(uid, gid, &in->dir, &what)
                                   : td_calldir_make((uid_t)-1, (gid_t)-1, &in->dir, &what);
    if (mk < 0) {
        err = -mk;
        goto fail;
    }
    in->dirfd = open(in->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    what = "filesystem view";
    if ((err = -view_of(in)) > 0)
        goto fail;
    struct td_child ch;
    int rc = spawn_fn(in->tool, in->dir, in->tool->switch_user ? uid : (uid_t)-1, gid, &ch, &in->cg,
                      &what);
    if (rc < 0) {
        err = -rc;
        goto fail;
    }
    in->pid = ch.pid;
    /* its init is PID 1 of the template's namespace; the listener serves
     * the template and all its calls, told apart by namespace */
    in->ns = pidns_of(in->pid);
    if (ch.handed[TD_HAND_SECCOMP] >= 0) {
        char label[300];
        snprintf(label, sizeof(label), "tool %s", in->tool->name);
        in->sysn = td_sysnotify_start_routed(ch.handed[TD_HAND_SECCOMP], route_denial, in, label);
    }
    in->ctl = ch.in;
    in->report = ch.report;
    in->out = ch.out;
    in->err = ch.err;
    in->state = I_STARTING;
    in->started_ns = uv_hrtime();
    in->owner = w;
    w->cur = in;
    fcntl(in->ctl, F_SETFL, O_NONBLOCK);
    fcntl(in->out, F_SETFL, O_NONBLOCK);
    fcntl(in->err, F_SETFL, O_NONBLOCK);
    uv_poll_init(td_loop, &in->poll, in->ctl);
    inst_handle(in, (uv_handle_t *)&in->poll);
    uv_poll_start(&in->poll, UV_READABLE, on_ctl);
    uv_poll_t **ps[2] = {&in->outp, &in->errp};
    for (int i = 0; i < 2; i++) {
        if (!(*ps[i] = malloc(sizeof(uv_poll_t))))
            continue;
        uv_poll_init(td_loop, *ps[i], i ? in->err : in->out);
        inst_handle(in, (uv_handle_t *)*ps[i]);
        uv_poll_start(*ps[i], UV_READABLE, on_out);
    }
    uv_timer_init(td_loop, &in->timer);
    inst_handle(in, (uv_handle_t *)&in->timer);
    uv_timer_start(&in->timer, on_timer, START_MS, 0);
    td_reaper_watch(in->pid, on_inst_reaped, on_inst_exit, in);
    /* "lib": where libtoolexec is, for an SDK that loads it (Python's) */
    Dl_info dl;
    const char *lib = dladdr((void *)te_frame_header, &dl) && dl.dli_fname ? dl.dli_fname : NULL;
    rc = send_ctl(in, json_pack("{s:{s:i,s:s?}}", "template", "version", 1, "lib", lib), NULL, 0);
    if (rc < 0)
        inst_stop(in, "would not take its first frame");
    td_log(TD_LOG_DEBUG, "tool %s: warm template started (pid %d)", in->tool->name, (int)in->pid);
    return;
fail:
    td_log(TD_LOG_WARN, "tool %s: cannot start its warm template: %s: %s", w->tool->name, what,
           strerror(err));
    if (in->uid != (uid_t)-1)
        td_identity_give(in->uid);
    in->uid = (uid_t)-1;
    inst_unref(in);
    w->failures++;
    w->backoff_running = true;
    unsigned delay = BACKOFF_MIN_MS << (w->failures < 9 ? w->failures : 9);
    uv_timer_start(&w->backoff, backoff_done, delay > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay, 0);
}

/* ---- the tools ------------------------------------------------------------ */

static bool same_strv(char **a, char **b)
{
    for (; a && b && *a && *b; a++, b++)
        if (strcmp(*a, *b))
            return false;
    return (!a || !*a) == (!b || !*b);
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_fs(const struct td_fsview *a, const struct td_fsview *b)
{
    return (!a || !b) ? a == b
                      : a->dflt == b->dflt && a->host == b->host && a->minimal == b->minimal &&
                            same_strv(a->read, b->read) && same_strv(a->write, b->write) &&
                            same_strv(a->hide, b->hide);
}

/* Would a template started from b differ from one started from a? */
static bool same_def(const struct td_tool *a, const struct td_tool *b)
{
    return same_strv(a->argv, b->argv) && same_strv(a->env, b->env) &&
           memcmp(&a->limits, &b->limits, sizeof(a->limits)) == 0 && a->network == b->network &&
           same_str(a->user, b->user) && same_str(a->group, b->group) &&
           a->switch_user == b->switch_user && a->uid == b->uid && a->gid == b->gid &&
           a->max_forks == b->max_forks && a->timeout_ms == b->timeout_ms &&
           same_fs(a->fs, b->fs) &&
           !a->egress == !b->egress; /* its filter lets AF_INET through for the proxy */
}

static void warm_free_closed(uv_handle_t *h)
{
    struct warm *w = h->data;
    free(w->name);
    free(w);
}

/* A warm call gets what a cold call of its tool would, or the tool runs
 * cold: what a template cannot give its calls yet is named here (the
 * egress proxy's listener is made by each call's P1 (lib/warm.c); the
 * file-system view is the template's, redone per call where it must be:
 * view_of()). NULL: nothing missing. */
static const char *warm_gap(const struct td_tool *t)
{
    size_t len = 0; /* each fork request carries them: within a control frame */
    for (char **p = t->fs ? t->fs->write : NULL; p && *p; p++)
        len += strlen(*p) + 8;
    if (len > CTL_MAX / 2)
        return "its \"write\" paths are too long to send with each fork request";
    return NULL;
}

static bool warm_ok(const struct td_tool *t)
{
    return t->warm && !warm_gap(t);
}

void td_template_sync(void)
{
    for (size_t i = 0; i < td_tools->n; i++) {
        const char *gap = td_tools->tools[i]->warm ? warm_gap(td_tools->tools[i]) : NULL;
        if (gap)
            td_log(TD_LOG_WARN, "tool %s: %s; its calls run cold", td_tools->tools[i]->name, gap);
    }
    if (!td_call_ns) {
        for (size_t i = 0; i < td_tools->n; i++)
            if (td_tools->tools[i]->warm)
                td_log(TD_LOG_WARN,
                       "tool %s: warm start needs a PID namespace per call, which this kernel "
                       "does not give; its calls run cold",
                       td_tools->tools[i]->name);
        return;
    }
    struct warm *w, *next;
    /* gone, no longer warm, or changed: retired */
    for (w = SLIST_FIRST(&all); w; w = next) {
        next = SLIST_NEXT(w, link);
        struct td_tool *t = td_registry_find(td_tools, w->name);
        if (t && warm_ok(t) && same_def(w->tool, t)) {
            td_tool_unref(w->tool);
            w->tool = td_tool_ref(t);
            if (w->cur) {
                td_tool_unref(w->cur->tool);
                w->cur->tool = td_tool_ref(t);
            }
            continue;
        }
        if (w->cur)
            inst_retire(w->cur);
        if (w->cur) /* retire started a fresh one: not for a changed or gone tool */
            inst_stop(w->cur, NULL);
        td_tool_unref(w->tool);
        w->tool = NULL;
        if (t && warm_ok(t)) { /* changed: a fresh one from the new definition */
            w->tool = td_tool_ref(t);
            td_log(TD_LOG_INFO, "tool %s: definition changed; its warm template is replaced",
                   w->name);
            uv_timer_stop(&w->backoff);
            w->backoff_running = false;
            w->failures = 0;
            start(w);
            continue;
        }
        SLIST_REMOVE(&all, w, warm, link);
        uv_close((uv_handle_t *)&w->backoff, warm_free_closed);
    }
    for (size_t i = 0; i < td_tools->n; i++) {
        struct td_tool *t = td_tools->tools[i];
        if (!warm_ok(t))
            continue;
        SLIST_FOREACH(w, &all, link)
            if (strcmp(w->name, t->name) == 0)
                break;
        if (w)
            continue;
        w = calloc(1, sizeof(*w));
        if (!w || !(w->name = strdup(t->name))) {
            free(w);
            continue;
        }
        w->tool = td_tool_ref(t);
        uv_timer_init(td_loop, &w->backoff);
        w->backoff.data = w;
        SLIST_INSERT_HEAD(&all, w, link);
        start(w);
    }
}

void td_template_shutdown(void)
{
    struct warm *w;
    struct inst *in, *inext;
    td_warmid_close();
    while ((w = SLIST_FIRST(&all))) {
        SLIST_REMOVE_HEAD(&all, link);
        if (w->cur)
            inst_retire(w->cur);
        if (w->cur)
            inst_stop(w->cur, NULL);
        td_tool_unref(w->tool);
        w->tool = NULL;
        uv_close((uv_handle_t *)&w->backoff, warm_free_closed);
    }
    /* The daemon is leaving (its calls have ended, the reaper stops): each
     * template is killed and forgotten; PR_SET_PDEATHSIG covers the rest. */
    for (in = LIST_FIRST(&insts); in; in = inext) {
        inext = LIST_NEXT(in, ilink);
        if (in->pid > 0)
            kill(in->pid, SIGKILL);
        in->pid = 0;
        if (in->report >= 0) { /* not reaped yet: drop the process's ref */
            close(in->report);
            in->report = -1;
            if (in->uid != (uid_t)-1)
                td_identity_give(in->uid);
            in->uid = (uid_t)-1;
            td_cgroup_release(in->cg);
            in->cg = NULL;
            in->refs--;
        }
        in->state = I_DEAD;
        inst_close(in);
    }
}

/* ---- calls -------------------------------------------------------------- */

/* An unprivileged daemon cannot give a limit above its own hard one (as
 * worker.c's build_rlimits()). */
static uint64_t warm_nproc(uint64_t n)
{
    struct rlimit own;
    if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &own) == 0 && own.rlim_max < n)
        n = own.rlim_max;
    return n;
}

static struct warm *find_warm(const struct td_tool *t)
{
    struct warm *w;
    SLIST_FOREACH(w, &all, link)
        if (strcmp(w->name, t->name) == 0)
            return w;
    return NULL;
}

struct td_warm_call *td_template_call(struct td_tool *t, const char *call_id, const char *batch_id,
                                      bool newnet, int fds[4], const struct td_warm_ops *ops,
                                      void *data, char **dir)
{
    struct warm *w = find_warm(t);
    struct inst *in = w ? w->cur : NULL;
    struct td_warm_call *c = NULL;
    *dir = NULL;
    if (!in || in->state != I_READY || in->tool != t)
        goto fail;
    c = calloc(1, sizeof(*c));
    if (!c)
        goto fail;
    /* its directory, in the template's: the only place the template's
     * mount namespace shows of the work directory */
    char name[40];
    for (int tries = 0;; tries++) {
        uint8_t r[8];
        if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
            goto fail;
        snprintf(name, sizeof(name), "c%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3],
                 r[4], r[5], r[6], r[7]);
        if (mkdirat(in->dirfd, name, 0700) == 0)
            break;
        if (errno != EEXIST || tries == 4)
            goto fail;
    }
    if ((in->tool->switch_user &&
         fchownat(in->dirfd, name, in->uid != (uid_t)-1 ? in->uid : in->tool->uid, in->gid,
                  AT_SYMLINK_NOFOLLOW) < 0) ||
        !(c->dir = strdup(name)) || asprintf(dir, "%s/%s", in->dir, name) < 0) {
        unlinkat(in->dirfd, name, AT_REMOVEDIR);
        *dir = NULL;
        goto fail;
    }
    c->inst = in;
    c->id = ++in->next_id;
    c->ops = ops;
    c->data = data;
    c->pidfd = -1;
    c->asked_ns = uv_hrtime();
    /* an egress allow-list: P1 makes the proxy's listener in the call's
     * own network namespace (a newnet one) and "forked" brings it */
    c->proxy = t->egress && newnet;
    /* uid_map: each call's PID 1 asks us for a uid of the call's own, as a
     * cold call of the tool gets (warmid.c); nproc: the call's own process
     * limit, as a cold call's (its PID 1 counted) */
    uint64_t nproc = t->limits.processes ? t->limits.processes : td_cfg.limits.processes;
    json_t *req = json_pack("{s:{s:I,s:s,s:b,s:s,s:s,s:O*,s:b,s:I}}", "fork", "id",
                            (json_int_t)c->id, "dir", name, "newnet", newnet, "call_id", call_id,
                            "batch", batch_id, "view", in->view, "uid_map", in->uid != (uid_t)-1,
                            "nproc", (json_int_t)(nproc ? warm_nproc(nproc + 1) : 0));
    if (req && c->proxy)
        json_object_set_new(json_object_get(req, "fork"), "proxy", json_integer(TD_EGRESS_PORT));
    if (send_ctl(in, req, fds, 4) < 0) {
        unlinkat(in->dirfd, name, AT_REMOVEDIR);
        free(*dir);
        *dir = NULL;
        inst_stop(in, "would not take a fork request");
        goto fail;
    }
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    TAILQ_INSERT_TAIL(&in->calls, c, link);
    in->refs++;
    in->served++;
    arm_fork_timer(in);
    if (in->served >= in->tool->max_forks)
        inst_retire(in);
    return c;
fail:
    if (c)
        free(c->dir);
    free(c);
    if (w && !w->cur && !w->backoff_running)
        start(w);
    return NULL;
}

void td_template_call_denials(struct td_warm_call *c, struct td_denials *d)
{
    c->denied = d;
}

void td_template_call_end(struct td_warm_call *c)
{
    struct inst *in = c->inst;
    c->data = NULL;
    if (c->pidfd >= 0)
        close(c->pidfd);
    TAILQ_REMOVE(&in->calls, c, link);
    /* (off the loop when it is not empty: td_calldir_remove_async's way) */
    char *path = NULL;
    if (asprintf(&path, "%s/%s", in->dir, c->dir) >= 0)
        td_calldir_remove_in_async(in->dirfd, path);
    else if (unlinkat(in->dirfd, c->dir, AT_REMOVEDIR) < 0 && errno != ENOENT)
        td_log(TD_LOG_WARN, "cannot remove %s/%s: out of memory", in->dir, c->dir);
    free(c->dir);
    free(c);
    arm_fork_timer(in);
    inst_unref(in);
}

/* ---- denials (issue 12: reported as a cold call's) ------------------------ */

/* The PID namespace of pid, as its inode; 0 when it cannot be read (gone). */
static uint64_t pidns_of(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
    return pid > 0 && stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static bool pidfd_alive(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

/* A forked call's namespace: its PID 1's, through the pidfd; asked only
 * when a denial needs it, and only while PID 1 lives (after the stat: so
 * the pid read was not reused meanwhile). */
static uint64_t call_ns(struct td_warm_call *c)
{
    if (c->ns || c->pidfd < 0)
        return c->ns;
    uint64_t ns = pidns_of(td_sandbox_pidfd_pid(c->pidfd));
    if (ns && pidfd_alive(c->pidfd))
        c->ns = ns;
    return c->ns;
}

/* pid's namespace, remembered for the last pid asked: a tool looping on a
 * denied call costs a poll() per call rather than a walk of /proc. 100,000
 * denied calls in a row, daemon CPU per call (loaded 2-CPU VM, 3 runs):
 * 8.1-9.6 us without, 3.9-4.3 us with, a cold call's 3.7-3.8 us. A pid's
 * namespace never changes, and while the process the pidfd holds lives,
 * its pid is not another's. */
static uint64_t pidns_cached(struct inst *in, pid_t pid)
{
    if (in->last_pidfd >= 0 && in->last_pid == pid && pidfd_alive(in->last_pidfd))
        return in->last_ns;
    if (in->last_pidfd >= 0)
        close(in->last_pidfd);
    in->last_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    uint64_t ns = pidns_of(pid);
    /* alive after the stat: the stat was of the process the pidfd holds */
    if (in->last_pidfd >= 0 && (!ns || !pidfd_alive(in->last_pidfd))) {
        close(in->last_pidfd);
        in->last_pidfd = -1;
    }
    in->last_pid = pid;
    in->last_ns = ns;
    return ns;
}

/* sysnotify.c's router for a template's listener: whose is pid's denial?
 * A process of a call is in the call's PID namespace (its stacked filter
 * refuses it any other), one of the template in the template's. */
static int route_denial(void *ctx, pid_t pid, struct td_denials **d)
{
    struct inst *in = ctx;
    if (pid == in->tpid || pid == in->pid)
        return TD_SYSNOTIFY_OWN;
    uint64_t ns = pidns_cached(in, pid);
    if (!in->ns)
        in->ns = pidns_of(in->pid);
    if (!ns || ns == in->ns)
        return TD_SYSNOTIFY_OWN;
    struct td_warm_call *c;
    bool unforked = false;
    TAILQ_FOREACH(c, &in->calls, link) {
        if (call_ns(c) == ns) {
            *d = c->denied;
            return TD_SYSNOTIFY_CALL;
        }
        unforked |= !c->forked;
    }
    /* a call whose "forked" is still on its way, or none of ours (the
     * template may make namespaces of its own) */
    return unforked ? TD_SYSNOTIFY_LATER : TD_SYSNOTIFY_OWN;
}

/* ---- stats ----------------------------------------------------------------- */

static long long pss_kb(pid_t pid)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
    FILE *f = fopen(path, "re");
    long long kb = -1, v;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "Pss: %lld kB", &v) == 1)
            kb = v;
    if (f)
        fclose(f);
    return kb;
}

json_t *td_template_stats(void)
{
    json_t *o = json_object();
    struct warm *w;
    SLIST_FOREACH(w, &all, link) {
        struct inst *in = w->cur;
        bool up = in && in->state == I_READY;
        long long pss = up && in->tpid > 0 ? pss_kb(in->tpid) : -1;
        json_object_set_new(
            o, w->name,
            json_pack("{s:s,s:o,s:o,s:I,s:I,s:o}", "state",
                      !in                       ? "down"
                      : in->state == I_STARTING ? "starting"
                                                : "ready",
                      "pid", up ? json_integer(in->tpid) : json_null(), "age_ms",
                      in ? json_integer((json_int_t)((uv_hrtime() - in->started_ns) / 1000000))
                         : json_null(),
                      "children", (json_int_t)(in ? in->served : 0), "restarts",
                      (json_int_t)w->restarts, "pss_kb",
                      pss >= 0 ? json_integer(pss) : json_null()));
    }
    return o;
}
