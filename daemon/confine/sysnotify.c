/*
 * sysnotify.c - answers a call's seccomp notifications (sysnotify.h).
 *
 * A denied call blocks its thread in the kernel until we answer, so a tool
 * can have at most as many waiting as it has threads, and a tool that
 * loops on a denied call runs at the pace of our answers. What it can do
 * is make the daemon work per system call. Fairness bounds that: one
 * notification per listener per loop turn (the poll is level-triggered, so
 * the rest wait for the next turn, after every other ready handle had its
 * turn), so a looping tool never starves another call or client. Measured
 * (tests/integration/test_confine_sys.py, loaded 2-CPU VM): a tool making
 * 100,000 denied calls in a row took 2.1 s (root daemon; 3.4 s
 * unprivileged), of which the daemon spent 0.44 s CPU (0.63 s): ~4-6 us a
 * call for poll, receive, answer; another client's calls meanwhile took as
 * long as before (median 9.6 ms against 9.5 ms). So no budget or throttle
 * beyond the turn: the tool pays the round trip, the daemon a few us.
 *
 * Names are noted once per call: the list keeps distinct entries anyway
 * (denials.c), and a bitmap of the numbers seen (in the call's list) keeps
 * a loop from paying for a lookup and a JSON entry each time.
 *
 * A warm tool's template has one listener for itself and every call forked
 * from it: a router (template.c) says, from the notification's
 * pid, whose denial it is: a call's (its list), the template's own (kept
 * here, each name logged once), or not known yet, a call whose "forked"
 * the daemon has not read (the call's process can be that quick). Those
 * are held, unanswered (the process waits in the kernel, so its pid stays
 * its own), until td_sysnotify_retry() after the next "forked", or for at
 * most HOLD_MS; past HOLD_MAX held they are answered at once, unattributed.
 * The router reads /proc/PID (a stat, ~2 us) before the answer; the
 * notification's id is checked to be still valid after it, so that a pid
 * reused meanwhile (its thread killed) is never taken for another's.
 *
 * A kernel hangs the listener up (POLLHUP, no POLLIN) once every process
 * under its filter is gone, and its NOTIF_RECV would then block: each
 * receive is preceded by a poll() of the descriptor alone, which never
 * blocks.
 *
 * A call in learn mode (its denials carry a record, learn.h) has a filter
 * that notifies more (sysfilter.c, td_sysfilter_learn): each notification
 * is recorded (learnsys.c) and answered SECCOMP_USER_NOTIF_FLAG_CONTINUE,
 * the call made as if no filter were there.
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uv.h>

#include "denials.h"
#include "learnsys.h"
#include "log.h"
#include "sysnotify.h"
#include "config.h"

#define SEEN_MAX TD_DENIALS_SEEN_MAX
/* notifications held for a call not known yet; past them, or this long,
 * answered unattributed (a "forked" takes well under a millisecond) */
#define HOLD_MAX 64
#define HOLD_MS 2000

struct held {
    uint64_t id, since_ms;
    pid_t pid;
    uint32_t arch;
    int nr;
    uint64_t arg0;
};

struct td_sysnotify {
    uv_poll_t poll;
    int fd;
    struct td_denials *d;
    unsigned long answered;
    /* routed (a template's listener) */
    td_sysnotify_route_fn route;
    void *ctx;
    char *label;           /* for the log: "tool NAME", "MCP server NAME" */
    struct td_denials own; /* the template's own denials, logged */
    struct held held[HOLD_MAX];
    int nheld;
    uv_timer_t *timer; /* for the oldest held; NULL: not routed */
};

/* The kernel's sizes of the notification structures, which may be larger
 * than our headers' (newer kernels append fields): asked once. */
static struct seccomp_notif_sizes sizes;
static void *req_buf, *resp_buf;

static int buffers(void)
{
    if (req_buf)
        return 0;
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
        return -errno;
    size_t rq = sizes.seccomp_notif > sizeof(struct seccomp_notif) ? sizes.seccomp_notif
                                                                   : sizeof(struct seccomp_notif);
    size_t rs = sizes.seccomp_notif_resp > sizeof(struct seccomp_notif_resp)
                    ? sizes.seccomp_notif_resp
                    : sizeof(struct seccomp_notif_resp);
    req_buf = calloc(1, rq);
    resp_buf = calloc(1, rs);
    if (!req_buf || !resp_buf) {
        free(req_buf), free(resp_buf);
        req_buf = resp_buf = NULL;
        return -ENOMEM;
    }
    sizes.seccomp_notif = (__u16)rq;
    sizes.seccomp_notif_resp = (__u16)rs;
    return 0;
}

/* Note nr in d; true when it is new there. A socket() is named with its
 * address family (arg0), the one thing about it worth knowing. */
static bool note(struct td_denials *d, uint32_t arch, int nr, uint64_t arg0, char *name_out,
                 size_t len)
{
    if (nr == SYS_socket && arch == seccomp_arch_native()) {
        if (name_out && len)
            *name_out = '\0';
        td_denials_socket(d, arg0, name_out, len);
        return name_out && *name_out;
    }
    bool cacheable = nr >= 0 && nr < SEEN_MAX && (d->sys_arch == 0 || d->sys_arch == arch);
    if (cacheable && (d->sys_seen[nr / 8] & (1u << (nr % 8))))
        return false;
    char *name = seccomp_syscall_resolve_num_arch(arch, nr);
    char num[32];
    if (!name)
        snprintf(num, sizeof(num), "%d", nr);
    td_denials_syscall(d, name ? name : num);
    if (name_out)
        snprintf(name_out, len, "%s", name ? name : num);
    free(name);
    if (cacheable) {
        d->sys_arch = arch;
        d->sys_seen[nr / 8] |= (unsigned char)(1u << (nr % 8));
    }
    return true;
}

static void answer(struct td_sysnotify *n, uint64_t id)
{
    struct seccomp_notif_resp *resp = resp_buf;
    memset(resp, 0, sizes.seccomp_notif_resp);
    resp->id = id;
    resp->error = -EPERM;
    /* ENOENT: killed meanwhile; nothing waits for the answer */
    ioctl(n->fd, SECCOMP_IOCTL_NOTIF_SEND, resp);
    n->answered++;
}

/* Still waiting for our answer: its pid is still its own. */
static bool still_valid(struct td_sysnotify *n, uint64_t id)
{
    return ioctl(n->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* The template's own, or one no call claimed: logged once a name. */
static void note_own(struct td_sysnotify *n, uint32_t arch, int nr, uint64_t arg0, bool unclaimed)
{
    char name[64];
    if (note(&n->own, arch, nr, arg0, name, sizeof(name)))
        td_log(TD_LOG_INFO, "%s: warm template: denied system call %s (%s)", n->label, name,
               unclaimed ? "of no call known to the daemon, not reported in any call"
                         : "the template's own, not reported in any call");
}

/* A routed notification: answered and noted, or held (false). */
static bool route(struct td_sysnotify *n, uint64_t id, pid_t pid, uint32_t arch, int nr,
                  uint64_t arg0, bool last_chance)
{
    struct td_denials *d = NULL;
    int r = n->route(n->ctx, pid, &d);
    if (!still_valid(n, id))
        return true; /* killed meanwhile (its pid may be another's now): nothing waits */
    if (r == TD_SYSNOTIFY_LATER && !last_chance)
        return false;
    answer(n, id);
    if (r == TD_SYSNOTIFY_CALL && d)
        note(d, arch, nr, arg0, NULL, 0);
    else if (r != TD_SYSNOTIFY_CALL)
        note_own(n, arch, nr, arg0, r == TD_SYSNOTIFY_LATER);
    return true;
}

static void hold_timer(struct td_sysnotify *n);

/* Route the held ones again; expired ones (all with force) are answered
 * as they are. */
static void retry(struct td_sysnotify *n, bool force)
{
    uint64_t now = uv_now(td_loop);
    int k = 0;
    for (int i = 0; i < n->nheld; i++) {
        struct held *h = &n->held[i];
        if (!route(n, h->id, h->pid, h->arch, h->nr, h->arg0,
                   force || now - h->since_ms >= HOLD_MS))
            n->held[k++] = *h;
    }
    n->nheld = k;
    hold_timer(n);
}

static void on_hold_timer(uv_timer_t *t)
{
    retry(t->data, false);
}

static void hold_timer(struct td_sysnotify *n)
{
    if (!n->nheld) {
        uv_timer_stop(n->timer);
        return;
    }
    uint64_t el = uv_now(td_loop) - n->held[0].since_ms;
    uv_timer_start(n->timer, on_hold_timer, el >= HOLD_MS ? 0 : HOLD_MS - el, 0);
}

void td_sysnotify_retry(struct td_sysnotify *n)
{
    if (n && n->nheld)
        retry(n, false);
}

static void on_closed(uv_handle_t *h)
{
    struct td_sysnotify *n = h->data;
    if (n->timer && h == (uv_handle_t *)&n->poll) {
        uv_close((uv_handle_t *)n->timer, on_closed);
        return;
    }
    close(n->fd);
    free(n->timer);
    free(n->label);
    td_denials_clear(&n->own);
    free(n);
}

static void on_ready(uv_poll_t *p, int status, int events)
{
    struct td_sysnotify *n = p->data;
    (void)events;
    struct pollfd pfd = {.fd = n->fd, .events = POLLIN};
    if (status < 0 || (poll(&pfd, 1, 0) == 1 && !(pfd.revents & POLLIN))) {
        /* hung up: every process under the filter is gone */
        uv_poll_stop(p);
        return;
    }
    if (!(pfd.revents & POLLIN))
        return;
    struct seccomp_notif *req = req_buf;
    memset(req, 0, sizes.seccomp_notif);
    if (ioctl(n->fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0)
        return; /* ENOENT: its thread was killed meanwhile */
    if (!n->route && n->d && n->d->learn) {
        /* learn mode: recorded, then let go on (learnsys.c) */
        td_learn_notified(n->d->learn, n->fd, req);
        struct seccomp_notif_resp *resp = resp_buf;
        memset(resp, 0, sizes.seccomp_notif_resp);
        resp->id = req->id;
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(n->fd, SECCOMP_IOCTL_NOTIF_SEND, resp);
        n->answered++;
        return;
    }
    if (!n->route) {
        answer(n, req->id);
        note(n->d, req->data.arch, req->data.nr, req->data.args[0], NULL, 0);
        return;
    }
    if (route(n, req->id, (pid_t)req->pid, req->data.arch, req->data.nr, req->data.args[0],
              n->nheld == HOLD_MAX))
        return;
    n->held[n->nheld++] = (struct held){.id = req->id,
                                        .since_ms = uv_now(td_loop),
                                        .pid = (pid_t)req->pid,
                                        .arch = req->data.arch,
                                        .nr = req->data.nr,
                                        .arg0 = req->data.args[0]};
    if (n->nheld == 1)
        hold_timer(n);
}

static struct td_sysnotify *start(int fd, struct td_denials *d, td_sysnotify_route_fn rt, void *ctx,
                                  const char *label)
{
    struct td_sysnotify *n = NULL;
    int rc = buffers();
    if (rc == 0 && !(n = calloc(1, sizeof(*n))))
        rc = -ENOMEM;
    if (rc == 0 && rt &&
        (!(n->timer = malloc(sizeof(*n->timer))) || !(n->label = strdup(label ? label : "?"))))
        rc = -ENOMEM;
    if (rc == 0 && (rc = uv_poll_init(td_loop, &n->poll, fd)) == 0) {
        n->poll.data = n;
        n->fd = fd;
        n->d = d;
        n->route = rt;
        n->ctx = ctx;
        if (n->timer) {
            uv_timer_init(td_loop, n->timer);
            n->timer->data = n;
        }
        if ((rc = uv_poll_start(&n->poll, UV_READABLE, on_ready)) < 0) {
            uv_close((uv_handle_t *)&n->poll, on_closed);
            n = NULL;
            fd = -1; /* closed with it */
        }
    }
    if (rc < 0) {
        td_log(TD_LOG_WARN, "seccomp listener: %s: %s go unreported", strerror(-rc),
               rt ? "a warm template's and its calls' denials" : "the call's denials");
        if (n) {
            free(n->timer);
            free(n->label);
        }
        free(n);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    return n;
}

struct td_sysnotify *td_sysnotify_start(int fd, struct td_denials *d)
{
    return start(fd, d, NULL, NULL, NULL);
}

struct td_sysnotify *td_sysnotify_start_routed(int fd, td_sysnotify_route_fn rt, void *ctx,
                                               const char *label)
{
    return start(fd, NULL, rt, ctx, label);
}

void td_sysnotify_stop(struct td_sysnotify *n)
{
    if (!n)
        return;
    /* held ones get the answer they would have got, not the kernel's
     * ENOSYS for a closed listener */
    for (int i = 0; i < n->nheld; i++)
        answer(n, n->held[i].id);
    n->nheld = 0;
    if (n->timer)
        uv_timer_stop(n->timer);
    /* (uv_close stops it: a uv_poll_stop first would take the fd out of
     * epoll twice, a system call each) */
    uv_close((uv_handle_t *)&n->poll, on_closed);
}
