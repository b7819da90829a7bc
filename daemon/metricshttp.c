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
 * A scraper that stalls holds one of CONN_LIMIT connections for at most
 * CONN_TIMEOUT_S; the rest of the daemon never waits for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>
#include <uv.h>

#include "config.h"
#include "log.h"
#include "metrics.h"
#include "metricshttp.h"

#define CONN_LIMIT 16
#define CONN_TIMEOUT_S 10

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

int td_metrics_http_start(const char *addr, td_metrics_render_fn render, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    if (parse_addr(addr, &ss, err, errlen) < 0)
        return -1;
    render_fn = render;
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    errno = 0;
    mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, &ss,
                           MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
                           MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
                           MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
    if (!mhd) {
        snprintf(err, errlen, "--metrics-listen %.64s: cannot listen%s%s", addr, errno ? ": " : "",
                 errno ? strerror(errno) : "");
        return -1;
    }
    const union MHD_DaemonInfo *ep = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_EPOLL_FD);
    const union MHD_DaemonInfo *port = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_BIND_PORT);
    if (!ep || uv_poll_init(td_loop, &poll_h, ep->epoll_fd) < 0) {
        MHD_stop_daemon(mhd);
        mhd = NULL;
        snprintf(err, errlen, "--metrics-listen: cannot watch the listener");
        return -1;
    }
    uv_timer_init(td_loop, &timer_h);
    handles_open = true;
    uv_poll_start(&poll_h, UV_READABLE, on_poll);
    char host[INET6_ADDRSTRLEN];
    const void *a = ss.ss_family == AF_INET
                        ? (const void *)&((struct sockaddr_in *)&ss)->sin_addr
                        : (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
    inet_ntop(ss.ss_family, a, host, sizeof(host));
    snprintf(where, sizeof(where), ss.ss_family == AF_INET ? "%s:%u" : "[%s]:%u", host,
             port ? (unsigned)port->port : 0);
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
    uv_close((uv_handle_t *)&poll_h, NULL);
    uv_close((uv_handle_t *)&timer_h, NULL);
    /* after the poll handle stopped watching its descriptor */
    MHD_stop_daemon(mhd);
    mhd = NULL;
    where[0] = '\0';
}
