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
 * (denials.c), and a bitmap of the numbers seen keeps a loop from paying
 * for a lookup and a JSON entry each time.
 *
 * A kernel hangs the listener up (POLLHUP, no POLLIN) once every process
 * under its filter is gone, and its NOTIF_RECV would then block: each
 * receive is preceded by a poll() of the descriptor alone, which never
 * blocks.
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
#include "log.h"
#include "sysnotify.h"
#include "config.h"

/* numbers below this are remembered as noted; x86-64 has ~460 */
#define SEEN_MAX 1024

struct td_sysnotify {
    uv_poll_t poll;
    int fd;
    struct td_denials *d;
    uint32_t seen_arch;
    unsigned char seen[SEEN_MAX / 8];
    unsigned long answered;
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

static void note(struct td_sysnotify *n, uint32_t arch, int nr)
{
    bool cacheable = nr >= 0 && nr < SEEN_MAX && (n->seen_arch == 0 || n->seen_arch == arch);
    if (cacheable && (n->seen[nr / 8] & (1u << (nr % 8))))
        return;
    char *name = seccomp_syscall_resolve_num_arch(arch, nr);
    char num[32];
    if (!name)
        snprintf(num, sizeof(num), "%d", nr);
    td_denials_syscall(n->d, name ? name : num);
    free(name);
    if (cacheable) {
        n->seen_arch = arch;
        n->seen[nr / 8] |= (unsigned char)(1u << (nr % 8));
    }
}

static void on_closed(uv_handle_t *h)
{
    struct td_sysnotify *n = h->data;
    close(n->fd);
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
    struct seccomp_notif_resp *resp = resp_buf;
    memset(resp, 0, sizes.seccomp_notif_resp);
    resp->id = req->id;
    resp->error = -EPERM;
    /* ENOENT: killed meanwhile; nothing waits for the answer */
    ioctl(n->fd, SECCOMP_IOCTL_NOTIF_SEND, resp);
    n->answered++;
    note(n, req->data.arch, req->data.nr);
}

struct td_sysnotify *td_sysnotify_start(int fd, struct td_denials *d)
{
    struct td_sysnotify *n = NULL;
    int rc = buffers();
    if (rc == 0 && !(n = calloc(1, sizeof(*n))))
        rc = -ENOMEM;
    if (rc == 0 && (rc = uv_poll_init(td_loop, &n->poll, fd)) == 0) {
        n->poll.data = n;
        n->fd = fd;
        n->d = d;
        if ((rc = uv_poll_start(&n->poll, UV_READABLE, on_ready)) < 0) {
            uv_close((uv_handle_t *)&n->poll, on_closed);
            n = NULL;
            fd = -1; /* closed with it */
        }
    }
    if (rc < 0) {
        td_log(TD_LOG_WARN, "seccomp listener: %s: the call's denials go unreported",
               strerror(-rc));
        free(n);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    return n;
}

void td_sysnotify_stop(struct td_sysnotify *n)
{
    if (!n)
        return;
    uv_poll_stop(&n->poll);
    uv_close((uv_handle_t *)&n->poll, on_closed);
}
