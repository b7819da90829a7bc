/*
 * mcp_http_stream.c - exchanges (mcp_http_int.h): a POSTed request's
 * answer, and a session's GET stream.
 *
 * The answer's form is chosen by what the core sends first: the response
 * alone is one application/json object; anything before it (progress,
 * a question for the user) opens a text/event-stream scoped to the
 * request, which the response ends. A request that has been quiet for
 * the keep-alive interval opens its stream too, with an SSE comment, and
 * a quiet stream gets one each interval: proxies and clients drop idle
 * connections. A client whose Accept leaves out text/event-stream gets
 * the response only (initialize's answer is always one object: it
 * carries the session's id).
 *
 * While nothing is to be written the connection is suspended, so MHD
 * neither watches it nor spins on it; its socket is polled for the
 * client's close instead (mcp_http.c), which cancels the request: the core
 * hears closed() and nothing more is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "mcp_http_int.h"

/* Bytes a stream may hold that its client has not read; past them the
 * client is too slow and the stream is closed. */
#define OUT_MAX (64u << 20)
/* What MHD takes of a stream at once. */
#define SSE_BLOCK 16384

struct mcp_http_x *mcp_http_x_new(struct mcp_http *h, struct MHD_Connection *conn)
{
    struct mcp_http_x *x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    x->h = h;
    x->conn = conn;
    x->fd = ci ? ci->connect_fd : -1;
    x->next = h->xs;
    if (h->xs)
        h->xs->prev = x;
    h->xs = x;
    return x;
}

/* Freed once neither MHD nor the core holds it. */
void mcp_http_x_free(struct mcp_http_x *x)
{
    if (!x->gone || x->core_holds)
        return;
    if (x->prev)
        x->prev->next = x->next;
    else
        x->h->xs = x->next;
    if (x->next)
        x->next->prev = x->prev;
    if (x->h->x_detach)
        x->h->x_detach(x);
    mcp_http_x_unwatch(x);
    json_decref(x->answer);
    json_decref(x->id);
    free(x->body);
    free(x->out);
    free(x);
}

/* A suspended connection is not MHD's to watch: its client closing it
 * (EPOLLRDHUP) is how a call is cancelled. Watched in an epoll set of
 * its own rather than each in the poll loop's set, which at hundreds of
 * waiting calls cost a third of the front's time. */
static void watch(struct mcp_http_x *x)
{
    struct epoll_event ev = {.events = EPOLLRDHUP, .data.ptr = x};
    if (x->fd >= 0 && !x->watched && epoll_ctl(x->h->watch_fd, EPOLL_CTL_ADD, x->fd, &ev) == 0)
        x->watched = true;
}

void mcp_http_x_unwatch(struct mcp_http_x *x)
{
    if (x->watched)
        epoll_ctl(x->h->watch_fd, EPOLL_CTL_DEL, x->fd, NULL);
    x->watched = false;
}

void mcp_http_xs_closed(struct mcp_http *h)
{
    struct epoll_event evs[64];
    int n = epoll_wait(h->watch_fd, evs, 64, 0);
    for (int i = 0; i < n; i++) {
        struct mcp_http_x *x = evs[i].data.ptr;
        if (x->suspended && !x->aborted)
            mcp_http_x_abort(x);
        else
            mcp_http_x_unwatch(x);
    }
}

enum MHD_Result mcp_http_x_wait(struct mcp_http_x *x)
{
    MHD_suspend_connection(x->conn);
    x->suspended = true;
    if (!x->aborted)
        watch(x);
    return MHD_YES;
}

void mcp_http_x_wake(struct mcp_http_x *x)
{
    if (!x->suspended)
        return;
    mcp_http_x_unwatch(x);
    x->suspended = false;
    x->h->resumed = true;
    MHD_resume_connection(x->conn);
}

void mcp_http_x_abort(struct mcp_http_x *x)
{
    x->aborted = true;
    mcp_http_x_wake(x);
}

/* The end of a GET stream (its session ended). */
void mcp_http_x_end(struct mcp_http_x *x)
{
    x->out_end = true;
    x->finished = true;
    mcp_http_x_wake(x);
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct mcp_http_x *x = cls;
    if (x->aborted)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (x->out_off < x->out_len) {
        size_t n = x->out_len - x->out_off;
        if (n > max)
            n = max;
        memcpy(buf, x->out + x->out_off, n);
        x->out_off += n;
        if (x->out_off == x->out_len)
            x->out_off = x->out_len = 0;
        return (ssize_t)n;
    }
    if (x->out_end)
        return MHD_CONTENT_READER_END_OF_STREAM;
    mcp_http_x_wait(x);
    return 0;
}

enum MHD_Result mcp_http_x_open_stream(struct mcp_http_x *x)
{
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, reader, x, NULL);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    /* nginx and its like: pass each event on as it comes */
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    enum MHD_Result rc = MHD_queue_response(x->conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

/* Called by the access handler once more after the connection resumed,
 * before a response is queued. */
enum MHD_Result mcp_http_x_resumed(struct mcp_http_x *x)
{
    if (x->aborted)
        return MHD_NO; /* close the connection: nothing more is sent */
    if (x->state == X_SSE)
        return mcp_http_x_open_stream(x);
    if (x->state != X_JSON)
        return x->state == X_WAITING ? mcp_http_x_wait(x) : MHD_YES;
    json_t *a = x->answer;
    x->answer = NULL;
    x->state = X_ANSWERED;
    const char *sid = NULL;
    if (x->initialize && x->session && json_object_get(a, "result"))
        sid = x->session->id; /* a refused one's session was ended (mcp_http.c) */
    /* 2026-07-28: an unknown method is 404, so that a client can tell us
     * from a server without the endpoint (whose 404 has no JSON-RPC) */
    json_t *code = json_object_get(json_object_get(a, "error"), "code");
    unsigned status =
        x->modern && json_integer_value(code) == -32601 ? MHD_HTTP_NOT_FOUND : MHD_HTTP_OK;
    return mcp_http_reply(x->conn, status, a, sid);
}

static void put(struct mcp_http_x *x, const char *s, size_t n)
{
    if (x->out_len + n > OUT_MAX) {
        mcp_http_x_abort(x);
        return;
    }
    char *b = realloc(x->out, x->out_len + n);
    if (!b) {
        mcp_http_x_abort(x);
        return;
    }
    memcpy(b + x->out_len, s, n);
    x->out = b;
    x->out_len += n;
}

/* A message as one SSE event (its JSON has no newline). */
static void put_event(struct mcp_http_x *x, const json_t *msg)
{
    char *s = te_json_dumps(msg, JSON_COMPACT, NULL);
    if (!s) {
        mcp_http_x_abort(x);
        return;
    }
    put(x, "event: message\ndata: ", 21);
    put(x, s, strlen(s));
    put(x, "\n\n", 2);
    free(s);
}

void mcp_http_send(struct mcp_http_x *x, json_t *msg)
{
    if (!x || !msg || x->aborted || x->finished || x->gone) {
        json_decref(msg);
        return;
    }
    bool response = !json_object_get(msg, "method");
    if (x->state == X_WAITING && response) {
        x->answer = msg;
        x->state = X_JSON;
        x->finished = true;
        mcp_http_x_wake(x);
        return;
    }
    if (x->state == X_WAITING && (!x->accepts_sse || x->initialize)) {
        json_decref(msg); /* it cannot reach the client before the answer */
        return;
    }
    if (x->state == X_WAITING)
        x->state = X_SSE;
    if (x->state != X_SSE) {
        json_decref(msg);
        return;
    }
    put_event(x, msg);
    json_decref(msg);
    if (response && !x->get_stream) {
        x->out_end = true;
        x->finished = true;
    }
    x->quiet_since_ms = cli_now_ms();
    mcp_http_x_wake(x);
}

void mcp_http_release(struct mcp_http_x *x)
{
    if (!x)
        return;
    x->core_holds = false;
    if (!x->gone && !x->finished)
        mcp_http_x_abort(x); /* no answer will come (cancelled) */
    mcp_http_x_free(x);
}

struct mcp_http_session *mcp_http_x_session(const struct mcp_http_x *x)
{
    return x ? x->session : NULL;
}

bool mcp_http_x_held(const struct mcp_http *h, const struct mcp_http_x *x)
{
    for (const struct mcp_http_x *p = h->xs; p; p = p->next)
        if (p == x)
            return p->core_holds;
    return false;
}

struct mcp_http_x *mcp_http_x_find(struct mcp_http *h, const struct mcp_http_session *s,
                                   const json_t *id)
{
    for (struct mcp_http_x *x = h->xs; x; x = x->next)
        if (x->session == s && x->id && x->core_holds && json_equal(x->id, id))
            return x;
    return NULL;
}

bool mcp_http_session_send(struct mcp_http_session *s, json_t *msg)
{
    if (!s || !s->stream || s->stream->aborted || s->stream->finished) {
        json_decref(msg);
        return false;
    }
    mcp_http_send(s->stream, msg);
    return true;
}

/* An SSE comment on a stream quiet for the keep-alive interval (a request
 * still waiting opens its stream with one). Returns the ms until x's next
 * is due; -1 for none. */
int mcp_http_x_keepalive(struct mcp_http_x *x, long long now)
{
    if (x->gone || x->aborted || x->out_end)
        return -1;
    if (x->state != X_SSE && (x->state != X_WAITING || !x->accepts_sse || x->initialize))
        return -1;
    long long due = x->quiet_since_ms + x->h->o.keepalive_ms - now;
    if (due > 0)
        return (int)(due > 60000 ? 60000 : due);
    x->state = X_SSE;
    put(x, ":\n\n", 3);
    x->quiet_since_ms = now;
    mcp_http_x_wake(x);
    return (int)x->h->o.keepalive_ms;
}
