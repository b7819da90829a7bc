/*
 * proxy_request.c - one call's egress proxy (proxy.h): its listener, and
 * each connection's request: the head read (http-parser) and decided
 * against the allow-list, refused (an answer, and the call's denials) or
 * resolved and connected out. How it works as a whole: proxy.c, which
 * holds a connection's end and the relay that follows a connect.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "config.h"
#include "credentials.h"
#include "denials.h"
#include "egress.h"
#include "learn.h"
#include "log.h"
#include "proxy.h"
#include "proxy_dns.h"
#include "proxy_int.h"
#include "proxy_tls.h"

#define LOG_REFUSALS 8 /* per call; the rest are in its denials and counts */
#define DRAIN_MS 1000  /* reading what a refused client still sends, then closing */

static void on_drain_timeout(uv_timer_t *t)
{
    proxy_conn_close(t->data);
}

static void drain_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char sink[4096];
    (void)h, (void)suggested;
    *buf = uv_buf_init(sink, sizeof(sink));
}

static void on_drain_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    if (n < 0)
        proxy_conn_close(s->data);
}

/* Answer the client with status and a one-line body, then close (after
 * reading what it still sends for a moment: closing a socket with unread
 * data resets it, which can lose the answer). */
static void respond(struct conn *k, const char *status, const char *body)
{
    char msg[1024];
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\nProxy-Agent: toolexecd\r\n\r\n%s",
                     status, strlen(body), body);
    if (n >= (int)sizeof(msg))
        n = (int)sizeof(msg) - 1;
    /* small, and nothing else is queued on the client: it fits the socket */
    uv_try_write((uv_stream_t *)&k->client, &(uv_buf_t){.base = msg, .len = (size_t)n}, 1);
    if (k->upstream_init && !uv_is_closing((uv_handle_t *)&k->upstream))
        uv_close((uv_handle_t *)&k->upstream, proxy_on_conn_closed);
    k->state = DRAINING;
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&k->client, &fd) == 0)
        shutdown(fd, SHUT_WR);
    uv_read_stop((uv_stream_t *)&k->client);
    uv_read_start((uv_stream_t *)&k->client, drain_alloc, on_drain_read);
    uv_timer_start(&k->timer, on_drain_timeout, DRAIN_MS, 0);
}

static void deny(struct conn *k, const char *reason, const char *why)
{
    struct td_proxy *c = k->call;
    c->denials++;
    if (c->denied) {
        json_t *d =
            json_pack("{s:s,s:s,s:i}", "kind", "network", "host", k->host, "port", (int)k->port);
        if (d && reason)
            json_object_set_new(d, "reason", json_string(reason));
        td_denials_add(c->denied, d);
    }
    if (c->denials <= LOG_REFUSALS)
        td_logc(TD_LOG_INFO, c->batch_id, c->call_id, "egress: refused %s port %u: %s%s", k->host,
                k->port, why,
                c->denials == LOG_REFUSALS ? " (further refusals are not logged)" : "");
    char body[600];
    snprintf(body, sizeof(body), "toolexecd: egress to %s port %u refused: %s\n", k->host, k->port,
             why);
    respond(k, "403 Forbidden", body);
}

/* The way out failed, not by a refusal (the name does not resolve, the
 * connection was refused or timed out): 502 (or 504) with body, and the
 * call's denied list says it too, as kind "egress_failure" with the cause,
 * since a tool often reports only "502" and the model could not tell a
 * refusal from a host that is down. */
static void upstream_failed(struct conn *k, const char *status, const char *cause, const char *body)
{
    struct td_proxy *c = k->call;
    if (c->denied)
        td_denials_add(c->denied, json_pack("{s:s,s:s,s:i,s:s}", "kind", "egress_failure", "host",
                                            k->host, "port", (int)k->port, "cause", cause));
    respond(k, status, body);
}

/* ---- connecting out ------------------------------------------------------- */

/* The credential headers a plain request to k's target gets (credentials.h):
 * in clear text, to an address no certificate vouches for, only where the
 * definition said so: a header host with its port, not 443 (a host without
 * one gets its credentials over TLS alone, proxy_tls.c). NULL: none. */
static const struct td_cred_host *plain_creds(const struct conn *k)
{
    const struct td_cred_host *cred = td_creds_find(td_egress_creds(k->call->e), k->host, k->port);
    return cred && cred->port != 0 && k->port != 443 ? cred : NULL;
}

/* A CONNECT to a host with credential headers: its TLS is ended here
 * (proxy_tls.c, a thread of its own from here on); the loop's handles
 * are closed, the sockets live on in the thread. */
static void tls_handover(struct conn *k, const struct td_cred_host *cred)
{
    struct td_proxy *c = k->call;
    uv_os_fd_t cfd, ufd;
    int cd = -1, ud = -1;
    if (!td_tls_bundle()) {
        respond(k, "502 Bad Gateway",
                "toolexecd: this host's credentials need TLS at the proxy, which did not start\n");
        return;
    }
    if (uv_fileno((uv_handle_t *)&k->client, &cfd) == 0 &&
        uv_fileno((uv_handle_t *)&k->upstream, &ufd) == 0) {
        cd = fcntl(cfd, F_DUPFD_CLOEXEC, 3);
        ud = fcntl(ufd, F_DUPFD_CLOEXEC, 3);
    }
    static char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    uint64_t used = c->bytes_up + c->bytes_down; /* the TLS connections' own: td_tls_start */
    bool started = false;
    if (cd >= 0 && ud >= 0 &&
        uv_try_write((uv_stream_t *)&k->client, &(uv_buf_t){.base = ok, .len = sizeof(ok) - 1},
                     1) == (int)sizeof(ok) - 1) {
        started = td_tls_start(c, cd, ud, k->host, k->port, cred, k->h.buf + k->h.end,
                               k->h.len - k->h.end, used < c->max_bytes ? c->max_bytes - used : 0,
                               c->max_connections) == 0;
        cd = ud = -1; /* td_tls_start's now */
    }
    if (cd >= 0)
        close(cd);
    if (ud >= 0)
        close(ud);
    if (!started)
        td_logc(TD_LOG_INFO, c->batch_id, c->call_id, "egress: no TLS connection to %s port %u",
                k->host, k->port);
    proxy_conn_close(k);
}

static void on_request_sent(uv_write_t *req, int status)
{
    struct conn *k = req->data;
    if (k->req_len)
        explicit_bzero(k->up.buf, k->req_len);
    k->req_len = 0;
    free(k->up.buf);
    k->up.buf = NULL;
    if (k->state != RELAY)
        return;
    if (status < 0)
        proxy_conn_close(k);
    else
        proxy_flow_read(&k->up);
}

static void on_connected(uv_connect_t *req, int status)
{
    struct conn *k = req->data;
    if (k->state != CONNECTING)
        return;
    uv_timer_stop(&k->timer);
    if (status < 0) {
        char body[600], cause[128];
        snprintf(body, sizeof(body), "toolexecd: could not connect to %s port %u: %s\n", k->host,
                 k->port, uv_strerror(status));
        snprintf(cause, sizeof(cause), "could not connect: %s", uv_strerror(status));
        upstream_failed(k, "502 Bad Gateway", cause, body);
        return;
    }
    struct td_proxy *c = k->call;
    size_t rest = k->h.len - k->h.end;
    const struct td_cred_host *cred = td_creds_find(td_egress_creds(c->e), k->host, k->port);
    if (k->h.parser.method == HTTP_CONNECT && cred) {
        tls_handover(k, cred);
    } else if (k->h.parser.method == HTTP_CONNECT) {
        static char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        uv_try_write((uv_stream_t *)&k->client, &(uv_buf_t){.base = ok, .len = sizeof(ok) - 1}, 1);
        proxy_relay(k);
        if (rest) { /* the tunnel's first bytes came with the head */
            uv_read_stop((uv_stream_t *)&k->client);
            k->up.buf = malloc(rest);
            if (!k->up.buf) {
                proxy_conn_close(k);
                return;
            }
            memcpy(k->up.buf, k->h.buf + k->h.end, rest);
            c->bytes_up += rest;
            k->up.wreq.data = k;
            if (uv_write(&k->up.wreq, (uv_stream_t *)&k->upstream,
                         &(uv_buf_t){.base = k->up.buf, .len = rest}, 1, on_request_sent) < 0)
                proxy_conn_close(k);
        }
    } else {
        size_t len;
        char *req_bytes = td_proxy_head_origin(&k->h, k->host, k->port, plain_creds(k), &len);
        if (!req_bytes) {
            respond(k, "500 Internal Server Error", "toolexecd: out of memory\n");
            return;
        }
        proxy_relay(k);
        uv_read_stop((uv_stream_t *)&k->client);
        free(k->up.buf);
        k->up.buf = req_bytes;
        k->req_len = len; /* wiped once written */
        c->bytes_up += len;
        k->up.wreq.data = k;
        if (uv_write(&k->up.wreq, (uv_stream_t *)&k->upstream,
                     &(uv_buf_t){.base = req_bytes, .len = len}, 1, on_request_sent) < 0)
            proxy_conn_close(k);
    }
    free(k->h.buf);
    k->h.buf = NULL;
}

static void on_connect_timeout(uv_timer_t *t)
{
    struct conn *k = t->data;
    char body[600];
    snprintf(body, sizeof(body), "toolexecd: no connection to %s port %u within %d ms\n", k->host,
             k->port, TD_PROXY_CONNECT_TIMEOUT_MS);
    bool resolving = k->gai != NULL;
    td_resolve_cancel(k->gai); /* a name that did not resolve in time */
    k->gai = NULL;
    upstream_failed(k, "504 Gateway Timeout",
                    resolving ? "the name did not resolve in time" : "no connection in time", body);
}

static void connect_to(struct conn *k, const struct sockaddr *sa)
{
    k->state = CONNECTING;
    if (uv_tcp_init(td_loop, &k->upstream) < 0) {
        respond(k, "502 Bad Gateway", "toolexecd: no socket\n");
        return;
    }
    k->upstream.data = k;
    k->upstream_init = true;
    k->handles++;
    k->creq.data = k;
    int rc = uv_tcp_connect(&k->creq, &k->upstream, sa, on_connected);
    if (rc < 0) {
        char body[600], cause[128];
        snprintf(body, sizeof(body), "toolexecd: could not connect to %s port %u: %s\n", k->host,
                 k->port, uv_strerror(rc));
        snprintf(cause, sizeof(cause), "could not connect: %s", uv_strerror(rc));
        upstream_failed(k, "502 Bad Gateway", cause, body);
    }
}

/* (a cancelled lookup's callback never comes: k is alive and RESOLVING) */
static void on_resolved(void *arg, int rc, const struct addrinfo *res)
{
    struct conn *k = arg;
    k->gai = NULL;
    if (rc != 0) {
        char body[600], cause[128];
        snprintf(body, sizeof(body), "toolexecd: could not resolve %s: %s\n", k->host,
                 gai_strerror(rc));
        snprintf(cause, sizeof(cause), "the name does not resolve: %s", gai_strerror(rc));
        uv_timer_stop(&k->timer);
        upstream_failed(k, "502 Bad Gateway", cause, body);
        return;
    }
    const struct addrinfo *ok = NULL;
    for (const struct addrinfo *a = res; a && !ok; a = a->ai_next)
        if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) && !td_egress_private(a->ai_addr))
            ok = a;
    if (!ok) {
        uv_timer_stop(&k->timer);
        deny(k, "private_address",
             "the name resolves to a loopback, private or link-local address");
    } else {
        struct sockaddr_storage ss;
        memcpy(&ss, ok->ai_addr, ok->ai_addrlen);
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)k->port); /* same offset in v6 */
        connect_to(k, (struct sockaddr *)&ss);
    }
}

/* ---- the request head ----------------------------------------------------- */

/* The head is complete: where to, and may it? */
static void decide(struct conn *k)
{
    struct td_proxy *c = k->call;
    uv_read_stop((uv_stream_t *)&k->client);
    uv_timer_stop(&k->timer);
    const char *bad;
    if (td_proxy_head_target(&k->h, k->host, sizeof(k->host), &k->port, &bad) < 0) {
        respond(k, "400 Bad Request", bad);
        return;
    }
    if (c->exhausted || proxy_relayed(c) >= c->max_bytes) {
        char why[100];
        snprintf(why, sizeof(why), "this call's max_bytes (%llu) are used up",
                 (unsigned long long)c->max_bytes);
        deny(k, "max_bytes", why);
        return;
    }
    if (c->denied && c->denied->learn) /* learn mode: where it went */
        td_learn_host(c->denied->learn, k->host, k->port);
    if (!td_egress_allows(c->e, k->host, k->port)) {
        deny(k, NULL, "not in this tool's network allow-list");
        return;
    }
    /* a shared front end routes by Host: the credentials go only to the
     * host the target names (an absent Host is that one's, added) */
    if (k->h.parser.method != HTTP_CONNECT && plain_creds(k) &&
        !td_proxy_head_host_ok(&k->h, k->host, k->port)) {
        td_logc(TD_LOG_INFO, c->batch_id, c->call_id,
                "egress: a request to %s port %u with another Host header refused", k->host,
                k->port);
        respond(k, "421 Misdirected Request",
                "toolexecd: the Host header names another host than the request's target\n");
        return;
    }
    /* Connect at once to an address asked for; resolve a name first. */
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    uv_timer_start(&k->timer, on_connect_timeout, TD_PROXY_CONNECT_TIMEOUT_MS, 0);
    if (inet_pton(AF_INET, k->host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)k->port);
        connect_to(k, (struct sockaddr *)&ss);
        return;
    }
    if (inet_pton(AF_INET6, k->host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)k->port);
        connect_to(k, (struct sockaddr *)&ss);
        return;
    }
    k->state = RESOLVING;
    /* on the proxy's own threads, never libuv's pool (proxy_dns.c) */
    k->gai = td_resolve_start(k->host, k->call->serial, on_resolved, k);
    if (!k->gai) {
        uv_timer_stop(&k->timer);
        respond(k, "502 Bad Gateway", "toolexecd: could not resolve the name\n");
    }
}

static void head_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *k = h->data;
    (void)suggested;
    *buf = uv_buf_init(k->h.buf + k->h.len, TD_PROXY_HEAD_MAX - (unsigned)k->h.len);
}

static void on_head_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct conn *k = s->data;
    (void)buf;
    if (n == 0)
        return;
    if (n < 0) {
        proxy_conn_close(k);
        return;
    }
    enum td_head_state st = td_proxy_head_feed(&k->h, (size_t)n);
    if (st == TD_HEAD_DONE)
        decide(k);
    else if (st == TD_HEAD_TOO_MANY)
        respond(k, "431 Request Header Fields Too Large", "toolexecd: too many headers\n");
    else if (st == TD_HEAD_BAD)
        respond(k, "400 Bad Request", "toolexecd: not an HTTP request\n");
    else if (k->h.len == TD_PROXY_HEAD_MAX)
        respond(k, "431 Request Header Fields Too Large",
                "toolexecd: the request head is larger than 16384 bytes\n");
}

static void on_head_timeout(uv_timer_t *t)
{
    respond(t->data, "408 Request Timeout",
            "toolexecd: the request head did not arrive within 10 s\n");
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static void on_accept(uv_stream_t *server, int status)
{
    struct td_proxy *c = server->data;
    if (status < 0 || !c->denied)
        return;
    struct conn *k = calloc(1, sizeof(*k));
    char *buf = k ? malloc(TD_PROXY_HEAD_MAX) : NULL;
    if (!buf) {
        /* take it off the queue all the same, or libuv stops accepting */
        free(k);
        uv_tcp_t *t = malloc(sizeof(*t));
        if (t && uv_tcp_init(td_loop, t) == 0) {
            uv_accept(server, (uv_stream_t *)t);
            uv_close((uv_handle_t *)t, free_handle);
        } else {
            free(t);
        }
        return;
    }
    k->call = c;
    td_proxy_head_init(&k->h, buf);
    uv_tcp_init(td_loop, &k->client);
    uv_timer_init(td_loop, &k->timer);
    k->client.data = k->timer.data = k;
    k->handles = 2;
    LIST_INSERT_HEAD(&c->conns, k, link);
    c->open++;
    if (uv_accept(server, (uv_stream_t *)&k->client) < 0) {
        proxy_conn_close(k);
        return;
    }
    c->accepted++;
    if (c->accepted == TD_PROXY_MAX_TOTAL) {
        /* from here the kernel refuses them: a tool that opens and closes
         * connections in a loop costs the daemon nothing more */
        td_logc(TD_LOG_INFO, c->batch_id, c->call_id,
                "egress: %u connections in this call; the proxy takes no more", c->accepted);
        if (c->denied)
            td_denials_add(c->denied, json_pack("{s:s,s:s}", "kind", "network", "reason",
                                                "connections_total"));
        uv_close((uv_handle_t *)&c->listen, proxy_on_listen_closed);
    }
    if (c->open > c->max_connections) {
        /* the count of connections is the one thing a client may spend
         * without sending anything: refused before any buffer is kept */
        c->refused++;
        if (c->refused == 1)
            td_logc(TD_LOG_INFO, c->batch_id, c->call_id,
                    "egress: max_connections (%u) open; further connections closed",
                    c->max_connections);
        if (c->denied)
            td_denials_add(c->denied,
                           json_pack("{s:s,s:s}", "kind", "network", "reason", "max_connections"));
        proxy_conn_close(k);
        return;
    }
    uv_timer_start(&k->timer, on_head_timeout, TD_PROXY_HEAD_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&k->client, head_alloc, on_head_read);
}

struct td_proxy *td_proxy_start(const struct td_egress *e, int fd, struct td_denials *denied,
                                const char *batch_id, const char *call_id)
{
    struct td_proxy *c = calloc(1, sizeof(*c));
    if (fd < 0 || !c || !(c->batch_id = strdup(batch_id)) || !(c->call_id = strdup(call_id))) {
        if (c) {
            free(c->batch_id);
            free(c);
        }
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    static uint64_t serials;
    c->serial = ++serials;
    c->e = e;
    c->max_bytes = td_egress_max_bytes(e);
    c->max_connections = td_egress_max_connections(e);
    c->denied = denied;
    LIST_INIT(&c->conns);
    uv_tcp_init(td_loop, &c->listen);
    c->listen.data = c;
    int rc = uv_tcp_open(&c->listen, fd);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&c->listen, 128, on_accept);
    if (rc < 0) {
        td_logc(TD_LOG_WARN, batch_id, call_id, "egress: cannot serve the proxy: %s",
                uv_strerror(rc));
        if (uv_fileno((uv_handle_t *)&c->listen, &(uv_os_fd_t){0}) != 0)
            close(fd); /* not taken by the handle */
        c->denied = NULL;
        uv_close((uv_handle_t *)&c->listen, proxy_on_listen_closed);
        return NULL;
    }
    return c;
}
