/*
 * mcp_http.c - `toolexec mcp --listen`: MCP's Streamable HTTP transport
 * (mcp_http.h); the listener and a request's routing.
 *
 * libmicrohttpd runs in external epoll mode, as the daemon's /metrics
 * does (daemon/observe/metricshttp.c): it owns one epoll descriptor, which
 * the MCP front's poll loop watches beside the daemon's socket, and
 * MHD_run() then does what is ready without blocking. No thread: the MCP
 * core is single-threaded, and every callback here runs on its thread.
 *
 * One endpoint, /mcp, beside a load balancer's /ready and /healthz
 * (mcp_http_ready.c). A POST carries one JSON-RPC message: a request is
 * given to the core and its connection suspended until the core answers
 * (mcp_http_stream.c); a notification or a response is answered 202. GET
 * opens a session's stream and DELETE ends a session (2025-11-25 and
 * before, mcp_http_session.c); without a session both are 405, as
 * 2026-07-28 asks.
 *
 * The checks, before anything reaches the core: the Origin header (a
 * browser's page elsewhere must not reach a local server through DNS
 * rebinding: present and not allowed, 403), the body's size (413) and
 * the headers' (431, libmicrohttpd's own answer once they overflow the
 * connection's memory), the Content-Type, the JSON, the headers against
 * the body (mcp_http_check.c). With --resource, a bearer token before
 * any of them reaches the core (mcp_http_auth.c). Without it the listener
 * stays on loopback unless --listen-remote says otherwise: nothing
 * authenticates a client then.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "mcp_http_int.h"

#define ACCEPT_BURST 32 /* accepted a round, so that a flood cannot hold the loop */

/* The answer's exchange resumed: an initialize the core refused begins no
 * session (here, above both sessions and streams). */
static enum MHD_Result resumed(struct mcp_http_x *x)
{
    if (x->state == X_JSON && x->initialize && x->session && !json_object_get(x->answer, "result"))
        mcp_http_session_end(x->session);
    return mcp_http_x_resumed(x);
}

static enum MHD_Result reply_error(struct MHD_Connection *conn, unsigned status, int code,
                                   const char *message)
{
    return mcp_http_reply(conn, status, mcp_http_rpc_error(NULL, code, message, NULL), NULL);
}

static enum MHD_Result reply_405(struct MHD_Connection *conn, const char *why)
{
    return mcp_http_queue(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                          mcp_http_rpc_error(NULL, -32600, why, NULL), MHD_HTTP_HEADER_ALLOW,
                          "POST, GET, DELETE");
}

/* An origin of this machine's: http(s)://localhost, 127.0.0.1 or [::1],
 * on any port. */
static bool loopback_origin(const char *o)
{
    const char *p = strncmp(o, "http://", 7) == 0    ? o + 7
                    : strncmp(o, "https://", 8) == 0 ? o + 8
                                                     : NULL;
    if (!p)
        return false;
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]", NULL};
    for (const char *const *hst = hosts; *hst; hst++) {
        size_t n = strlen(*hst);
        if (strncasecmp(p, *hst, n) != 0)
            continue;
        const char *rest = p + n;
        if (!*rest)
            return true;
        if (*rest != ':' || !rest[1])
            return false;
        while (*++rest)
            if (*rest < '0' || *rest > '9')
                return false;
        return true;
    }
    return false;
}

static bool origin_allowed(const struct mcp_http *h, const char *origin)
{
    if (loopback_origin(origin))
        return true;
    for (const char *const *a = h->origins; a && *a; a++)
        if (strcmp(*a, origin) == 0)
            return true;
    return false;
}

static bool accepts(struct MHD_Connection *conn, const char *type)
{
    const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    return !a || strstr(a, type) || strstr(a, "*/*");
}

/* A POST's whole body is there: check it and give it to the core. */
static enum MHD_Result on_post(struct mcp_http *h, struct mcp_http_x *x)
{
    struct MHD_Connection *conn = x->conn;
    if (x->too_big) {
        char msg[96];
        snprintf(msg, sizeof(msg), "the body is longer than %zu bytes", h->o.body_max);
        return reply_error(conn, MHD_HTTP_CONTENT_TOO_LARGE, -32600, msg);
    }
    const char *type =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!type || strncasecmp(type, "application/json", 16) != 0)
        return reply_error(conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, -32600,
                           "Content-Type: expected application/json");
    json_error_t jerr;
    json_t *msg = te_json_loadb(x->body ? x->body : "", x->body_len, JSON_DECODE_ANY, &jerr);
    free(x->body);
    x->body = NULL;
    if (!msg) {
        char text[256];
        snprintf(text, sizeof(text), "Parse error: %s (column %d)", jerr.text, jerr.column);
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32700, text);
    }
    if (!json_is_object(msg)) {
        json_decref(msg);
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32600,
                           "Invalid Request: one JSON-RPC message, an object, a POST");
    }
    enum MHD_Result denied;
    if (x->auth && !mcp_http_auth_scopes(x, msg, &denied)) {
        json_decref(msg);
        return denied; /* 403 queued: nothing of it reaches the core */
    }
    bool modern = false;
    unsigned status = 0;
    const char *version = NULL;
    json_t *bad = mcp_http_check(conn, msg, &version, &modern, &status);
    if (bad) {
        json_decref(msg);
        return mcp_http_reply(conn, status, bad, NULL);
    }
    json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method");
    bool response =
        !method && id && (json_object_get(msg, "result") || json_object_get(msg, "error"));
    bool request = id && !response;
    if (!request && !response && !json_is_string(method)) {
        json_decref(msg);
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32600,
                           "Invalid Request: a request, a notification or a response");
    }
    enum MHD_Result refused;
    if (request && mcp_http_drain_refuses(h, conn, msg, &refused)) {
        json_decref(msg);
        return refused;
    }
    /* server/discover is how a client finds which era it talks to: it
     * needs no session, whatever its headers say */
    if (!modern && json_is_string(method) &&
        strcmp(json_string_value(method), "server/discover") == 0 &&
        !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Session-Id"))
        modern = true;
    struct mcp_http_session *s = NULL;
    if (!modern && request && json_is_string(method) &&
        strcmp(json_string_value(method), "initialize") == 0) {
        s = mcp_http_session_new(h);
        if (!s) {
            json_decref(msg);
            return reply_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, -32603,
                               "too many sessions: end one (DELETE) or wait for one to expire");
        }
        x->initialize = true;
    } else if (!modern) {
        enum MHD_Result rc = mcp_http_session_find(h, conn, &s);
        if (!s) {
            json_decref(msg);
            return rc;
        }
    }
    if (s && x->auth) {
        /* a session is its minter's: another's token does not find it */
        if (!s->subject && x->initialize)
            s->subject = strdup(x->auth->principal.subject);
        if (!s->subject || strcmp(s->subject, x->auth->principal.subject) != 0) {
            json_decref(msg);
            if (x->initialize)
                mcp_http_session_end(s);
            return reply_error(conn, MHD_HTTP_NOT_FOUND, -32001, "Session not found");
        }
    }
    if (s) {
        x->session = s;
        s->busy++;
        s->used_ms = cli_now_ms();
    }
    const char *subject = x->auth ? x->auth->principal.subject : NULL;
    if (!request) {
        h->core->message(h->ctx, s, NULL, msg, version, subject);
        x->state = X_ANSWERED;
        return mcp_http_reply(conn, MHD_HTTP_ACCEPTED, NULL, NULL);
    }
    x->modern = modern;
    x->id = json_incref(id);
    x->accepts_sse = !x->initialize && accepts(conn, "text/event-stream");
    x->state = X_WAITING;
    x->core_holds = true;
    x->quiet_since_ms = cli_now_ms();
    h->core->message(h->ctx, s, x, msg, version, subject);
    if (x->state == X_JSON)
        return resumed(x);
    if (x->state == X_SSE)
        return mcp_http_x_open_stream(x);
    return mcp_http_x_wait(x);
}

/* The session a GET or DELETE names: none is 405 (2026-07-28 has no
 * session, and nothing for them to do without one). *s NULL: answered. */
static enum MHD_Result session_of(struct mcp_http *h, struct MHD_Connection *conn,
                                  const char *subject, struct mcp_http_session **s)
{
    *s = NULL;
    if (!MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Session-Id"))
        return reply_405(conn, "GET and DELETE need a session (Mcp-Session-Id); POST a request");
    enum MHD_Result rc = mcp_http_session_find(h, conn, s);
    if (*s && subject && (!(*s)->subject || strcmp((*s)->subject, subject) != 0)) {
        *s = NULL; /* a session is its minter's */
        return reply_error(conn, MHD_HTTP_NOT_FOUND, -32001, "Session not found");
    }
    return rc;
}

/* x: the exchange made for the request while its token was judged; NULL:
 * none yet */
static enum MHD_Result on_get(struct mcp_http *h, struct MHD_Connection *conn, void **req_cls,
                              struct mcp_http_x *x)
{
    struct mcp_http_session *s;
    enum MHD_Result rc = session_of(h, conn, x ? x->auth->principal.subject : NULL, &s);
    if (!s)
        return rc;
    if (s->stream)
        return reply_error(conn, MHD_HTTP_CONFLICT, -32600,
                           "the session's stream is open on another connection");
    if (!x)
        x = mcp_http_x_new(h, conn);
    if (!x)
        return MHD_NO;
    *req_cls = x;
    x->get_stream = true;
    x->session = s;
    x->quiet_since_ms = cli_now_ms();
    s->stream = x;
    s->used_ms = x->quiet_since_ms;
    x->state = X_SSE;
    return mcp_http_x_open_stream(x);
}

static enum MHD_Result on_delete(struct mcp_http *h, struct MHD_Connection *conn,
                                 const char *subject)
{
    struct mcp_http_session *s;
    enum MHD_Result rc = session_of(h, conn, subject, &s);
    if (!s)
        return rc;
    mcp_http_session_end(s);
    return mcp_http_reply(conn, MHD_HTTP_OK, NULL, NULL);
}

/* A request's first call: its headers. */
static enum MHD_Result on_headers(struct mcp_http *h, struct MHD_Connection *conn, const char *url,
                                  const char *method, void **req_cls)
{
    enum MHD_Result rc;
    /* a load balancer's probes carry no token */
    if (mcp_http_ready_route(h, conn, url, method, &rc))
        return rc;
    if (h->o.auth) {
        bool answered;
        rc = mcp_http_auth_early(h, conn, url, method, &answered);
        if (answered)
            return rc;
    }
    if (strcmp(url, "/mcp") != 0)
        return reply_error(conn, MHD_HTTP_NOT_FOUND, -32600, "not found: MCP is served at /mcp");
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    if (origin && !origin_allowed(h, origin))
        return reply_error(conn, MHD_HTTP_FORBIDDEN, -32600,
                           "Forbidden: this Origin may not reach the server (--allow-origin)");
    bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
    bool del = strcmp(method, MHD_HTTP_METHOD_DELETE) == 0;
    if (!get && !del && strcmp(method, MHD_HTTP_METHOD_POST) != 0)
        return reply_405(conn, "MCP takes POST (and GET, DELETE of a session)");
    if (h->o.auth && (get || del)) {
        /* judged once the (empty) body is in: on_request's last call */
        struct mcp_http_x *x = mcp_http_x_new(h, conn);
        if (!x)
            return MHD_NO;
        x->verb = get ? VERB_GET : VERB_DELETE;
        *req_cls = x;
        return MHD_YES;
    }
    if (get)
        return on_get(h, conn, req_cls, NULL);
    if (del)
        return on_delete(h, conn, NULL);
    if (!mcp_http_conn_framing_ok(conn))
        return mcp_http_queue(conn, MHD_HTTP_BAD_REQUEST,
                              mcp_http_rpc_error(NULL, -32600,
                                                 "Content-Length twice, or beside "
                                                 "Transfer-Encoding: the body is ambiguous",
                                                 NULL),
                              MHD_HTTP_HEADER_CONNECTION, "close");
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > h->o.body_max) {
        char msg[96];
        snprintf(msg, sizeof(msg), "the body is longer than %zu bytes", h->o.body_max);
        return reply_error(conn, MHD_HTTP_CONTENT_TOO_LARGE, -32600, msg);
    }
    struct mcp_http_x *x = mcp_http_x_new(h, conn);
    if (!x)
        return MHD_NO;
    *req_cls = x;
    return MHD_YES;
}

/* x's token judged (at once, or by the thread, which resumed it). */
static enum MHD_Result authed(struct mcp_http *h, struct mcp_http_x *x, void **req_cls)
{
    if (x->aborted)
        return MHD_NO;
    x->state = X_RECEIVING;
    static const char *const verbs[] = {"POST", "GET", "DELETE"};
    enum MHD_Result denied;
    if (!mcp_http_auth_verdict(x, verbs[x->verb], &denied))
        return denied;
    if (x->verb == VERB_GET) {
        cli_err("mcp: GET /mcp: subject %s", x->auth->principal.subject);
        return on_get(h, x->conn, req_cls, x);
    }
    if (x->verb == VERB_DELETE) {
        cli_err("mcp: DELETE /mcp: subject %s", x->auth->principal.subject);
        return on_delete(h, x->conn, x->auth->principal.subject);
    }
    return on_post(h, x);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
    (void)version;
    struct mcp_http *h = cls;
    struct mcp_http_x *x = *req_cls;
    if (!x) {
        enum MHD_Result rc = on_headers(h, conn, url, method, req_cls);
        x = *req_cls;
        if (!x || x->state != X_RECEIVING) /* answered on its headers */
            mcp_http_conn_whole(conn);
        return rc;
    }
    if (x->state == X_AUTH)
        return authed(h, x, req_cls);
    if (x->state != X_RECEIVING)
        return resumed(x);
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (x->too_big || x->body_len + n > h->o.body_max) {
            x->too_big = true; /* read on, so that the answer can be read */
            free(x->body);
            x->body = NULL;
            return MHD_YES;
        }
        char *b = realloc(x->body, x->body_len + n);
        if (!b)
            return MHD_NO;
        memcpy(b + x->body_len, upload, n);
        x->body = b;
        x->body_len += n;
        return MHD_YES;
    }
    mcp_http_conn_whole(conn);
    if (h->o.auth && !mcp_http_auth_begin(x))
        return MHD_YES; /* suspended until the thread has judged the token */
    return h->o.auth ? authed(h, x, req_cls) : on_post(h, x);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)toe;
    mcp_http_conn_waiting(conn); /* for its next request */
    struct mcp_http_x *x = *req_cls;
    *req_cls = NULL;
    if (!x)
        return;
    mcp_http_x_unwatch(x);
    x->suspended = false;
    if (x->get_stream && x->session && x->session->stream == x)
        x->session->stream = NULL;
    if (x->session) {
        if (!x->get_stream)
            x->session->busy--;
        x->session->used_ms = cli_now_ms();
    }
    if (x->core_holds && !x->finished) {
        x->aborted = true;
        /* the core may release x in there: it stays until it is gone */
        x->h->core->closed(x->h->ctx, x);
    }
    x->gone = true;
    mcp_http_x_free(x);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    cli_err("mcp: http: %s", msg);
}

/* HOST:PORT ([V6]:PORT) to a listening socket; -1 with a message in err. */
static int listen_on(struct mcp_http *h, char *err, size_t errlen)
{
    const char *s = h->o.listen;
    const char *colon = strrchr(s, ':');
    char host[256];
    size_t hl = colon ? (size_t)(colon - s) : 0;
    const char *hp = s;
    if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']')
        hp = s + 1, hl -= 2;
    if (!colon || !hl || hl >= sizeof(host) || !colon[1]) {
        snprintf(err, errlen, "--listen: expected HOST:PORT (127.0.0.1:8080, [::1]:8080), not '%s'",
                 s);
        return -1;
    }
    memcpy(host, hp, hl);
    host[hl] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
    int rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc) {
        snprintf(err, errlen, "--listen %s: %s", s, gai_strerror(rc));
        return -1;
    }
    if (!cli_loopback_addr(ai->ai_addr) && !h->o.allow_remote && !h->o.auth) {
        snprintf(err, errlen,
                 "--listen %s: not a loopback address, and nothing authenticates a client "
                 "(--resource with --oauth-issuer or --bearer-tokens does); --listen-remote "
                 "serves it anyway, to anyone who can reach it",
                 s);
        freeaddrinfo(ai);
        return -1;
    }
    /* The kernel's largest backlog: a burst of connections waits there to
     * be accepted, and answered 503 past --connections; one that overflows
     * it looks connected to its client yet is nobody's, for a long while. */
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
        snprintf(err, errlen, "--listen %s: %s", s, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char a[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        bool v4 = ss.ss_family == AF_INET;
        inet_ntop(ss.ss_family,
                  v4 ? (void *)&((struct sockaddr_in *)&ss)->sin_addr
                     : (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr,
                  a, sizeof(a));
        port = ntohs(v4 ? ((struct sockaddr_in *)&ss)->sin_port
                        : ((struct sockaddr_in6 *)&ss)->sin6_port);
        snprintf(h->where, sizeof(h->where), v4 ? "%s:%u" : "[%s]:%u", a, port);
    }
    return fd;
}

static void on_conn(void *cls, struct MHD_Connection *c, void **ctx,
                    enum MHD_ConnectionNotificationCode code)
{
    struct mcp_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        h->nconns++;
        mcp_http_conn_opened(h, c, ctx);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (h->nconns)
            h->nconns--;
        mcp_http_conn_closed(h, ctx);
    }
}

/* Connections waiting to be accepted, handed to MHD; past --connections
 * each is told 503 and closed, rather than left waiting in the backlog
 * (where MHD at its limit would leave it) until its client gives up. */
static void accept_all(struct mcp_http *h)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                               "Connection: close\r\nRetry-After: 1\r\n\r\n";
    for (int i = 0; i < ACCEPT_BURST; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(h->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;
        }
        if (h->nconns >= h->o.conn_max) {
            /* best effort: a fresh socket's buffer takes it whole */
            (void)send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            close(fd);
            continue;
        }
        MHD_add_connection(h->mhd, fd, (struct sockaddr *)&ss, sl); /* closes it on failure */
    }
}

struct mcp_http *mcp_http_start(const struct mcp_http_opts *o, const struct mcp_http_core *core,
                                void *ctx, char *err, size_t errlen)
{
    struct mcp_http *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->o = *o;
    h->core = core;
    h->ctx = ctx;
    h->origins = o->origins;
    int fd = listen_on(h, err, errlen);
    if (fd < 0) {
        free(h);
        return NULL;
    }
    h->listen_fd = fd;
    /* The logger first: MHD warns through its own of any option before it.
     * The listening socket is ours (accept_all()); MHD's limit is a floor
     * under our own count. */
    h->mhd = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET, 0,
        NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_CONNECTION_LIMIT, o->conn_max + 1, MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->header_max, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_conn, h, MHD_OPTION_END);
    const union MHD_DaemonInfo *ep =
        h->mhd ? MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (!ep) {
        snprintf(err, errlen, "--listen %s: libmicrohttpd did not start", o->listen);
        if (h->mhd)
            MHD_stop_daemon(h->mhd);
        close(fd);
        free(h);
        return NULL;
    }
    h->epoll_fd = ep->epoll_fd;
    h->watch_fd = epoll_create1(EPOLL_CLOEXEC);
    if (h->watch_fd < 0) {
        snprintf(err, errlen, "--listen %s: epoll: %s", o->listen, strerror(errno));
        MHD_stop_daemon(h->mhd);
        close(fd);
        free(h);
        return NULL;
    }
    if (mcp_http_auth_start(h, err, errlen) < 0) {
        close(h->watch_fd);
        MHD_stop_daemon(h->mhd);
        close(fd);
        free(h);
        return NULL;
    }
    return h;
}

const char *mcp_http_where(const struct mcp_http *h)
{
    return h->where;
}

size_t mcp_http_nfds(const struct mcp_http *h)
{
    (void)h; /* MHD's epoll, the listener, the token checks', the waiting */
    return 4;
}

static void lower(int *timeout_ms, long long ms)
{
    if (ms < 0)
        ms = 0;
    if (ms > 60000)
        ms = 60000;
    if (*timeout_ms < 0 || ms < *timeout_ms)
        *timeout_ms = (int)ms;
}

size_t mcp_http_fds(struct mcp_http *h, struct pollfd *fds, int *timeout_ms)
{
    size_t n = 0;
    fds[n++] = (struct pollfd){.fd = h->epoll_fd, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = h->listen_fd, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = mcp_http_auth_fd(h), .events = POLLIN}; /* -1: ignored */
    fds[n++] = (struct pollfd){.fd = h->watch_fd, .events = POLLIN};
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(h->mhd, &ms) == MHD_YES)
        lower(timeout_ms, (long long)ms);
    long long now = cli_now_ms();
    for (struct mcp_http_x *x = h->xs; x; x = x->next) {
        int due = mcp_http_x_keepalive(x, now);
        if (due >= 0)
            lower(timeout_ms, due);
    }
    int due = mcp_http_sessions_expire(h, now);
    if (due >= 0)
        lower(timeout_ms, due);
    due = mcp_http_conns_cut(h, now);
    if (due >= 0)
        lower(timeout_ms, due);
    if (h->resumed)
        lower(timeout_ms, 0);
    return n;
}

void mcp_http_run(struct mcp_http *h, const struct pollfd *fds, size_t n)
{
    if (n > 1 && fds[1].revents)
        accept_all(h);
    if (n > 2 && fds[2].revents)
        mcp_http_auth_collect(h);
    if (n > 3 && fds[3].revents)
        mcp_http_xs_closed(h);
    /* A connection resumed during a run (by another's request: DELETE
     * ending a session's stream) waits for the next. */
    for (int i = 0; i < 4; i++) {
        h->resumed = false;
        MHD_run(h->mhd);
        if (!h->resumed)
            break;
    }
}

void mcp_http_stop(struct mcp_http *h)
{
    if (!h)
        return;
    while (h->sessions)
        mcp_http_session_end(h->sessions);
    for (struct mcp_http_x *x = h->xs; x; x = x->next)
        if (x->suspended)
            mcp_http_x_abort(x);
    mcp_http_auth_stop(h);   /* the exchanges it waits on are gone below */
    MHD_stop_daemon(h->mhd); /* completes every request: on_completed */
    close(h->listen_fd);
    while (h->xs) {
        struct mcp_http_x *x = h->xs;
        x->gone = true;
        x->core_holds = false;
        mcp_http_x_free(x);
    }
    close(h->watch_fd);
    free(h);
}
