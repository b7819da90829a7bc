/*
 * metricshttp.c - GET /metrics over HTTP on the daemon's own loop.
 *
 * libmicrohttpd runs in external epoll mode: it owns one epoll descriptor,
 * which a uv_poll watches; when that is readable, or when the timeout MHD
 * asks for expires, MHD_run() does what is ready without blocking (its
 * sockets are non-blocking) and returns. No thread: the render callback
 * reads the daemon's counters on the loop's thread, so they need no lock.
 * MHD creates its descriptors close-on-exec, and workers close every
 * descriptor above their report pipe anyway (sandbox.c).
 *
 * The listening socket is ours: we accept, look up who made the other end
 * (peerowner.c) and hand MHD only what may scrape. A call with the host's
 * network reaches 127.0.0.1 as any process does, and neither seccomp nor
 * Landlock can single out one address and port cheaply, so the endpoint
 * tells calls apart by the owner of the peer's socket: a root daemon's calls
 * run as a uid of --call-uids, as the workers' default user, or as the user
 * a definition names ("user"; every such uid since the start, so a call of
 * a definition a reload dropped is still refused); an unprivileged
 * daemon's calls run as the daemon's own uid, so it refuses that uid
 * (scrape as another user). A peer the kernel cannot place (elsewhere,
 * another network namespace) is not a call of ours.
 *
 * A scraper that stalls holds a connection for at most --metrics-timeout
 * seconds; one local uid (or one remote address) holds at most
 * OWNER_LIMIT connections, so idle connections of one user cannot lock
 * the scraper of another out; the rest of the daemon never waits for any.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>
#include <uv.h>

#include "config.h"
#include "identity.h"
#include "log.h"
#include "metrics.h"
#include "metricshttp.h"
#include "peerowner.h"
#include "registry.h"

#define CONN_LIMIT 128
#define OWNER_LIMIT 8
#define ACCEPT_BURST 32 /* accepted per readiness, so a flood cannot hold the loop */
#define NAMED_MAX 256   /* named users remembered; past it, the loaded ones still count */

/* Connections of one local uid or one remote address. */
struct owner {
    bool local;
    uid_t uid;
    struct in6_addr addr;
    unsigned n;
};
static struct owner owners[CONN_LIMIT];
/* Accepted and handed to MHD, not yet started by it: fd -> owner. */
static struct {
    int fd;
    struct owner *o;
} pending[CONN_LIMIT];
static unsigned npending;

static int listen_fd = -1;
static uv_poll_t listen_h;
static uid_t worker_uid = (uid_t)-1;
/* The uids definitions named as "user", since the start. */
static uid_t named[NAMED_MAX];
static size_t nnamed;
static struct MHD_Daemon *mhd;
static uv_poll_t poll_h;
static uv_timer_t timer_h;
static bool handles_open;
static td_metrics_render_fn render_fn;
static char where[INET6_ADDRSTRLEN + 16];

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)cls, (void)version, (void)upload_data, (void)upload_data_size, (void)req_cls;
    static char not_found[] = "not found: the metrics are at /metrics\n";
    static char bad_method[] = "method not allowed: GET /metrics\n";
    static char no_memory[] = "out of memory\n";
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", bad_method,
                     sizeof(bad_method) - 1, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/metrics") != 0)
        return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", not_found, sizeof(not_found) - 1,
                     MHD_RESPMEM_PERSISTENT);
    size_t len = 0;
    char *text = render_fn(&len);
    if (!text)
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", no_memory,
                     sizeof(no_memory) - 1, MHD_RESPMEM_PERSISTENT);
    return reply(conn, MHD_HTTP_OK, TD_METRICS_CONTENT_TYPE, text, len, MHD_RESPMEM_MUST_FREE);
}

static void run(void);

static void on_timer(uv_timer_t *t)
{
    (void)t;
    run();
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    (void)p, (void)status, (void)events;
    run();
}

/* Do what is ready, then wait as long as MHD says (connection timeouts;
 * 0 when it has more ready than one round did). */
static void run(void)
{
    if (!mhd)
        return;
    MHD_run(mhd);
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(mhd, &ms) == MHD_YES)
        uv_timer_start(&timer_h, on_timer, ms, 0);
    else
        uv_timer_stop(&timer_h);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    td_log(TD_LOG_WARN, "metrics listener: %s", msg);
}

static int parse_addr(const char *s, struct sockaddr_storage *ss, char *err, size_t errlen)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon = strrchr(s, ':');
    const char *h = s;
    size_t hl = colon ? (size_t)(colon - s) : 0;
    if (hl && s[0] == '[' && s[hl - 1] == ']')
        h = s + 1, hl -= 2;
    char *end;
    unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
    if (!colon || !hl || hl >= sizeof(host) || !colon[1] || *end || port > 65535) {
        snprintf(err, errlen,
                 "--metrics-listen: expected ADDR:PORT (\"127.0.0.1:9464\", "
                 "\"[::1]:9464\"), got \"%.64s\"",
                 s);
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
    } else {
        snprintf(err, errlen, "--metrics-listen: \"%.64s\" is not an IPv4 or IPv6 address", host);
        return -1;
    }
    return 0;
}

/* Whether a definition loaded now, or one since the start, runs its calls
 * as uid (its "user"). */
static bool named_user(uid_t uid)
{
    bool found = false;
    for (size_t i = 0; td_tools && i < td_tools->n; i++) {
        const struct td_tool *t = td_tools->tools[i];
        if (!t->switch_user || !t->user)
            continue;
        size_t k = 0;
        while (k < nnamed && named[k] != t->uid)
            k++;
        if (k == nnamed && nnamed < NAMED_MAX)
            named[nnamed++] = t->uid;
        found |= t->uid == uid;
    }
    for (size_t k = 0; k < nnamed; k++)
        found |= named[k] == uid;
    return found;
}

/* A socket made by one of our calls (see the top of the file). */
static bool is_call(uid_t uid)
{
    if (geteuid() != 0)
        return uid == geteuid();
    return td_identity_in_range(uid) || uid == worker_uid || named_user(uid);
}

static struct owner *owner_of(bool local, uid_t uid, const struct sockaddr_storage *ss)
{
    struct in6_addr a = IN6ADDR_ANY_INIT;
    if (!local && ss->ss_family == AF_INET6)
        a = ((const struct sockaddr_in6 *)ss)->sin6_addr;
    else if (!local)
        memcpy(&a.s6_addr[12], &((const struct sockaddr_in *)ss)->sin_addr, 4);
    struct owner *free_slot = NULL;
    for (size_t i = 0; i < CONN_LIMIT; i++) {
        struct owner *o = &owners[i];
        if (!o->n) {
            if (!free_slot)
                free_slot = o;
        } else if (o->local == local &&
                   (local ? o->uid == uid : !memcmp(&o->addr, &a, sizeof(a)))) {
            return o;
        }
    }
    if (free_slot)
        *free_slot = (struct owner){.local = local, .uid = uid, .addr = a};
    return free_slot;
}

static void on_conn(void *cls, struct MHD_Connection *c, void **ctx,
                    enum MHD_ConnectionNotificationCode code)
{
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *ctx = NULL;
        for (unsigned i = 0; ci && i < npending; i++)
            if (pending[i].fd == ci->connect_fd) {
                struct owner *o = pending[i].o;
                o->n++;
                *ctx = o;
                pending[i] = pending[--npending];
                break;
            }
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *ctx) {
        ((struct owner *)*ctx)->n--;
        *ctx = NULL;
    }
}

/* Hand fd to MHD, or close it: a call's, or one owner's too many. */
static void admit(int fd, const struct sockaddr_storage *ss, socklen_t sl)
{
    uid_t uid = (uid_t)-1;
    int local = td_peer_owner(fd, &uid);
    const char *why = NULL;
    struct owner *o = NULL;
    if (local < 0)
        why = "cannot tell whose it is";
    else if (local && is_call(uid))
        why = "made by a call";
    else if (!(o = owner_of(local, uid, ss)) || o->n >= OWNER_LIMIT || npending >= CONN_LIMIT)
        why = "too many connections of its user or address";
    if (why) {
        /* debug: a call could otherwise fill the log */
        td_log(TD_LOG_DEBUG, "metrics listener: refused a connection of uid %ld: %s",
               local > 0 ? (long)uid : -1L, why);
        close(fd);
        return;
    }
    pending[npending].fd = fd;
    pending[npending].o = o;
    npending++;
    if (MHD_add_connection(mhd, fd, (const struct sockaddr *)ss, sl) != MHD_YES) {
        /* closed by MHD; not started, or started and closed already */
        for (unsigned i = 0; i < npending; i++)
            if (pending[i].fd == fd) {
                pending[i] = pending[--npending];
                break;
            }
    }
}

static void on_listen(uv_poll_t *p, int status, int events)
{
    (void)p, (void)status, (void)events;
    for (int i = 0; i < ACCEPT_BURST && mhd; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN)
                td_log(TD_LOG_DEBUG, "metrics listener: accept: %s", strerror(errno));
            break;
        }
        admit(fd, &ss, sl);
    }
    run();
}

static int listen_on(const struct sockaddr_storage *ss)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t sl =
        ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        (ss->ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
        bind(fd, (const struct sockaddr *)ss, sl) < 0 || listen(fd, 64) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int td_metrics_http_start(const char *addr, unsigned timeout_s, td_metrics_render_fn render,
                          char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    if (parse_addr(addr, &ss, err, errlen) < 0)
        return -1;
    render_fn = render;
    if (geteuid() == 0) {
        const char *u = td_cfg.user ? td_cfg.user : getpwnam("toolexec") ? "toolexec" : "nobody";
        struct passwd *pw = getpwnam(u);
        worker_uid = pw ? pw->pw_uid : (uid_t)-1;
    }
    listen_fd = listen_on(&ss);
    if (listen_fd < 0) {
        snprintf(err, errlen, "--metrics-listen %.64s: cannot listen: %s", addr, strerror(errno));
        return -1;
    }
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
    errno = 0;
    /* the logger first: MHD warns (through its own logger) of any option
     * given before it, at every start */
    mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER,
                           mhd_log, NULL, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
                           MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_NOTIFY_CONNECTION,
                           on_conn, NULL, MHD_OPTION_END);
    const union MHD_DaemonInfo *ep =
        mhd ? MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (!ep || uv_poll_init(td_loop, &poll_h, ep->epoll_fd) < 0 ||
        uv_poll_init(td_loop, &listen_h, listen_fd) < 0) {
        if (mhd)
            MHD_stop_daemon(mhd);
        mhd = NULL;
        close(listen_fd);
        listen_fd = -1;
        snprintf(err, errlen, "--metrics-listen: cannot watch the listener");
        return -1;
    }
    uv_timer_init(td_loop, &timer_h);
    handles_open = true;
    uv_poll_start(&poll_h, UV_READABLE, on_poll);
    uv_poll_start(&listen_h, UV_READABLE, on_listen);
    struct sockaddr_storage bound;
    socklen_t bl = sizeof(bound);
    if (getsockname(listen_fd, (struct sockaddr *)&bound, &bl) < 0)
        bound = ss;
    char host[INET6_ADDRSTRLEN];
    const void *a = ss.ss_family == AF_INET
                        ? (const void *)&((struct sockaddr_in *)&ss)->sin_addr
                        : (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
    unsigned port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                                  : ((struct sockaddr_in6 *)&bound)->sin6_port);
    inet_ntop(ss.ss_family, a, host, sizeof(host));
    snprintf(where, sizeof(where), ss.ss_family == AF_INET ? "%s:%u" : "[%s]:%u", host, port);
    run();
    return 0;
}

const char *td_metrics_http_where(void)
{
    return where;
}

void td_metrics_http_stop(void)
{
    if (!handles_open)
        return;
    handles_open = false;
    uv_poll_stop(&poll_h);
    uv_poll_stop(&listen_h);
    uv_close((uv_handle_t *)&poll_h, NULL);
    uv_close((uv_handle_t *)&listen_h, NULL);
    uv_close((uv_handle_t *)&timer_h, NULL);
    /* after the poll handles stopped watching their descriptors */
    MHD_stop_daemon(mhd);
    mhd = NULL;
    close(listen_fd);
    listen_fd = -1;
    npending = 0;
    where[0] = '\0';
}
