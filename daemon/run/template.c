/*
 * template.c - a warm template process's life (template_int.h): spawned
 * as a cold worker of its tool, then read: its control frames (ready, map,
 * forked, fork_failed, exited), its stdout and stderr (logged); timed at
 * start and at each fork request; stopped, retired, reaped.
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
#include <linux/sockios.h> /* SIOCGSKNS */
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
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
#include "mcppy.h"
#include "reaper.h"
#include "registry.h"
#include "sandbox.h"
#include "sysnotify.h"
#include "template.h"
#include "template_int.h"
#include "warmid.h"

const char *td_warm_key(const struct td_tool *t)
{
    const char *k = td_mcppy_template_key(t);
    return k ? k : t->name;
}

const char *td_warm_kind(const struct td_tool *t)
{
    return td_mcppy_template_key(t) ? "MCP server" : "tool";
}

#define START_MS 10000     /* from spawn to "ready" */
#define FORK_MS 2000       /* from a fork request to its answer */
#define BACKOFF_MIN_MS 100 /* first restart after a failure */
#define BACKOFF_MAX_MS 30000

static LIST_HEAD(, inst) insts = LIST_HEAD_INITIALIZER(insts);
static td_template_spawn_fn spawn_fn;
static char ctl_buf[CTL_MAX];

void td_template_setup(td_template_spawn_fn spawn)
{
    spawn_fn = spawn;
}

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

void td_inst_unref(struct inst *in)
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

int td_inst_send_ctl(struct inst *in, json_t *msg, const int *fds, int nfds)
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

void td_inst_arm_fork_timer(struct inst *in);

static int take_fd(struct inst *in)
{
    if (!in->nfdq)
        return -1;
    int fd = in->fdq[0];
    memmove(in->fdq, in->fdq + 1, (size_t)(--in->nfdq) * sizeof(int));
    return fd;
}

/* Is fd what a call's P1 makes for its proxy (lib/warmp1.c call_proxy(), a
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

#ifndef PID_FS_MAGIC
#define PID_FS_MAGIC 0x50494446 /* linux/magic.h since 6.9 */
#endif

/* A pidfd's inode: the process's own on a kernel with pidfs (6.9), which
 * outlives its pid; 0 where every pidfd shares one (anon_inode). Which of
 * the two is the kernel's, so asked of the first pidfd only (a fstatfs()
 * less on each call). */
static uint64_t p1_ino(int pidfd)
{
    static int pidfs = -1;
    struct stat st;
    struct statfs fs;
    if (pidfs < 0 && fstatfs(pidfd, &fs) == 0)
        pidfs = fs.f_type == PID_FS_MAGIC;
    return pidfs > 0 && fstat(pidfd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The uid lent to the P1 behind pidfd (its "forked" came), taken from the
 * ring; -1: none (no uid of its own, or its map failed). */
static long long lent_uid(struct inst *in, int pidfd)
{
    uint64_t ino = p1_ino(pidfd);
    pid_t pid = ino ? 0 : td_sandbox_pidfd_pid(pidfd);
    for (unsigned i = 0; i < LENT_RING; i++)
        if (ino ? in->lent[i].ino == ino : pid > 0 && in->lent[i].pid == pid) {
            in->lent[i].ino = 0, in->lent[i].pid = 0;
            return in->lent[i].uid;
        }
    return -1;
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
                in->owner->failures = in->owner->said_out = in->owner->said_stop = 0;
            td_log(TD_LOG_INFO, "%s %s: warm template ready (pid %d)", td_warm_kind(in->tool),
                   td_warm_key(in->tool), (int)in->tpid);
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
            /* (the pid only where pidfds have no inodes of their own) */
            uint64_t ino = p1_ino(pidfd);
            pid_t p1 = ino ? 0 : td_sandbox_pidfd_pid(pidfd);
            uid_t uid;
            int rc =
                td_warmid_map(pidfd, answer, in->tpid, in->uid, in->gid, !in->tool->group, &uid);
            if (rc == 0) {
                unsigned i = in->nlent++ % LENT_RING;
                in->lent[i].ino = ino, in->lent[i].pid = p1, in->lent[i].uid = uid;
            }
            if (rc == -EPERM) {
                snprintf(why, whylen, "\"map\" for a process not its call's PID 1");
                ok = false;
            } else if (rc < 0) {
                td_log(TD_LOG_WARN, "%s %s: no uid for a warm call: %s", td_warm_kind(in->tool),
                       td_warm_key(in->tool), strerror(-rc));
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
                long long uid = lent_uid(in, fd);
                if (uid >= 0) /* before forked(): a result held for it goes */
                    c->ops->mapped(c->data, (uid_t)uid);
                c->ops->forked(c->data, fd);
            } else { /* its worker is gone */
                syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
            }
            /* its denials that came before this frame */
            td_sysnotify_retry(in->sysn);
            if (lfd >= 0)
                close(lfd);
            td_inst_arm_fork_timer(in);
        } else if (strcmp(kind, "fork_failed") == 0) {
            const char *e = json_string_value(json_object_get(v, "error"));
            char text[256];
            snprintf(text, sizeof(text), "the warm template could not fork: %s", e ? e : "?");
            td_log(TD_LOG_WARN, "%s %s: %s", td_warm_kind(in->tool), td_warm_key(in->tool), text);
            c->forked = true;
            call_exit(c, W_EXITCODE(127, 0), NULL, text);
            td_inst_arm_fork_timer(in);
            /* a template that cannot fork (threads) is replaced */
            td_inst_stop(in, NULL);
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
        td_inst_stop(in, "control socket failed");
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
                    td_inst_stop(in, text);
                    return;
                }
                if (in->state == I_DEAD)
                    return;
            } else if (rc < 0) {
                td_inst_stop(in, "answered garbage: not a control frame");
                return;
            }
        }
    }
}

/* Its stdout is not a channel of the protocol, its stderr its own log: what
 * comes there is logged (a line per read, at most 400 bytes of it). */
/* a line's hash (FNV-1a), never 0: what a template said last */
static uint32_t said(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h ? h : 1;
}

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
    uint32_t h = said(ctl_buf, k);
    td_log(in->owner && in->owner->said_out == h ? TD_LOG_DEBUG : TD_LOG_INFO,
           "%s %s: warm template: %s: %.*s", td_warm_kind(in->tool), td_warm_key(in->tool),
           p == in->outp ? "stdout" : "stderr", (int)k, ctl_buf);
    if (in->owner)
        in->owner->said_out = h;
}

static void on_timer(uv_timer_t *t)
{
    struct inst *in = t->data;
    if (in->state == I_STARTING)
        td_inst_stop(in, "hung: not ready in time");
    else
        td_inst_stop(in, "hung: a fork request was not answered in time");
}

/* The oldest unanswered fork request bounds the next answer. */
void td_inst_arm_fork_timer(struct inst *in)
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
        td_warm_start(w);
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
        td_log(TD_LOG_WARN, "%s %s: warm template could not start: %s: %s", td_warm_kind(in->tool),
               td_warm_key(in->tool), rep.step, strerror(rep.err));
    }
    char why[64];
    if (WIFSIGNALED(status))
        snprintf(why, sizeof(why), "died by signal %d", WTERMSIG(status));
    else
        snprintf(why, sizeof(why), "exited with status %d", WEXITSTATUS(status));
    in->pid = 0; /* reaped: the number may be another's now */
    if (in->state != I_DEAD)
        td_inst_stop(in, retired ? NULL : why);
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
    td_inst_unref(in);
}

/* Kill it (why: a failure to log and back off from; NULL: retired or
 * replaced, no back-off). Its calls end with it. */
void td_inst_stop(struct inst *in, const char *why)
{
    if (in->state == I_DEAD)
        return;
    struct warm *w = in->owner;
    if (why) {
        uint32_t h = said(why, strlen(why));
        td_log(w && w->said_stop == h ? TD_LOG_DEBUG : TD_LOG_WARN,
               "%s %s: warm template %s; restarting it%s", td_warm_kind(in->tool),
               td_warm_key(in->tool), why,
               w && w->said_stop != h ? " (said once until it is ready)" : "");
        if (w)
            w->said_stop = h;
    }
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
void td_inst_retire(struct inst *in)
{
    if (in->state == I_DEAD || in->state == I_RETIRING)
        return;
    struct warm *w = in->owner;
    if (in->state == I_STARTING) {
        td_inst_stop(in, NULL);
        return;
    }
    in->state = I_RETIRING;
    shutdown(in->ctl, SHUT_WR);
    if (w && w->cur == in) {
        w->cur = NULL;
        w->restarts++;
        td_warm_start(w);
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

void td_warm_start(struct warm *w)
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
    in->ns = td_pidns_of(in->pid);
    if (ch.handed[TD_HAND_SECCOMP] >= 0) {
        char label[300];
        snprintf(label, sizeof(label), "%s %s", td_warm_kind(in->tool), td_warm_key(in->tool));
        in->sysn =
            td_sysnotify_start_routed(ch.handed[TD_HAND_SECCOMP], td_inst_route_denial, in, label);
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
    /* (resolved: "build/daemon/../lib/libtoolexec.so.0" needs the way
     * through daemon/, which the view may not show where it shows lib/) */
    Dl_info dl;
    char real[PATH_MAX];
    const char *lib = dladdr((void *)te_frame_header, &dl) && dl.dli_fname ? dl.dli_fname : NULL;
    if (lib && realpath(lib, real))
        lib = real;
    rc = td_inst_send_ctl(in, json_pack("{s:{s:i,s:s?}}", "template", "version", 1, "lib", lib),
                          NULL, 0);
    if (rc < 0)
        td_inst_stop(in, "would not take its first frame");
    td_log(TD_LOG_DEBUG, "%s %s: warm template started (pid %d)", td_warm_kind(in->tool),
           td_warm_key(in->tool), (int)in->pid);
    return;
fail:
    td_log(TD_LOG_WARN, "%s %s: cannot start its warm template: %s: %s", td_warm_kind(w->tool),
           w->name, what, strerror(err));
    if (in->uid != (uid_t)-1)
        td_identity_give(in->uid);
    in->uid = (uid_t)-1;
    td_inst_unref(in);
    w->failures++;
    w->backoff_running = true;
    unsigned delay = BACKOFF_MIN_MS << (w->failures < 9 ? w->failures : 9);
    uv_timer_start(&w->backoff, backoff_done, delay > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay, 0);
}

void td_inst_kill_all(void)
{
    struct inst *in, *inext;
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
