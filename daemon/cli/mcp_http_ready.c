/*
 * mcp_http_ready.c - what a load balancer asks of the HTTP front, and its
 * drain (mcp_http.h): GET /healthz, GET /ready, and the refusal of new
 * work once SIGTERM began a drain.
 *
 * /healthz is liveness: the front's loop answered, nothing more (a front
 * whose daemon is down is alive, and restarting it would not help).
 *
 * /ready is 200 when the daemon answered {"op": "capacity"} within the
 * last READY_STALE_MS, is not shutting down, has room, and the front is
 * not draining; 503 otherwise, with the reason in the JSON body. Room:
 * a free worker slot, or fewer calls queued than there are slots (a call
 * sent now waits less than one round of them). Past that the replica is
 * full: the balancer sends new calls elsewhere, and the calls it has
 * still finish.
 *
 * Cheap and never blocking: the answer comes from the last capacity event
 * on a daemon connection of its own. A probe finding it older than
 * READY_FRESH_MS sends a new request, whose event the poll loop reads
 * (mcp_http_ready_fd()); the probe is answered from what is there, so a
 * change shows at the probe after next. The connection is non-blocking: a
 * daemon whose listen backlog is full refuses the connect at once (not
 * ready: it takes no connection), the request waits in its queue until
 * the socket takes it, and a capacity event that comes in pieces is kept
 * until its line is whole. The same answer tells the daemon's
 * --max-client-batches, the front's bound on a connection's calls at once
 * (mcp_http_ready_batches()).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_http_int.h"

#define READY_FRESH_MS 1000 /* a capacity answer this young is used as is */
#define READY_STALE_MS 3000 /* one older says nothing: not ready */
#define READY_ASK_MS 2000   /* a request unanswered this long: reconnect */

struct mcp_http_ready {
    struct mcp_http *h;
    const char *socket;
    te_client *c;
    long long asked_ms;    /* 0: no request outstanding */
    long long answered_ms; /* 0: no answer yet */
    json_t *capacity;      /* the last capacity event */
    char why[160];         /* why the daemon is out of reach, "" when it is not */
    bool draining;
};

static void disconnect(struct mcp_http_ready *r, const char *why)
{
    if (r->c)
        te_client_close(r->c);
    r->c = NULL;
    r->asked_ms = 0;
    r->answered_ms = 0;
    json_decref(r->capacity);
    r->capacity = NULL;
    snprintf(r->why, sizeof(r->why), "%s", why);
}

static void ask(struct mcp_http_ready *r, long long now)
{
    if (r->asked_ms && now - r->asked_ms < READY_ASK_MS)
        return;
    if (r->asked_ms)
        disconnect(r, "the daemon did not answer a capacity request");
    if (!r->c) {
        int rc = te_client_connect_nb(r->socket, MCP_HTTP_DAEMON_QUEUE, &r->c);
        if (rc < 0) {
            r->c = NULL;
            snprintf(r->why, sizeof(r->why), "cannot reach the daemon at %s: %s", r->socket,
                     rc == -EAGAIN ? "it accepts no connection now (its listen backlog is full)"
                                   : strerror(-rc));
            return;
        }
    }
    json_t *req = json_pack("{s:s}", "op", "capacity");
    int rc = req ? te_client_send(r->c, req) : -ENOMEM;
    json_decref(req);
    if (rc < 0) {
        disconnect(r, "the daemon connection failed");
        return;
    }
    r->asked_ms = now;
}

struct mcp_http_ready *mcp_http_ready_new(struct mcp_http *h, const char *socket)
{
    struct mcp_http_ready *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->h = h;
    r->socket = socket;
    h->ready = r;
    ask(r, cli_now_ms()); /* the first probe finds an answer */
    return r;
}

void mcp_http_ready_free(struct mcp_http_ready *r)
{
    if (!r)
        return;
    disconnect(r, "");
    r->h->ready = NULL;
    free(r);
}

int mcp_http_ready_fd(const struct mcp_http_ready *r, short *events)
{
    if (!r || !r->c)
        return -1;
    *events = POLLIN | (te_client_want_write(r->c) ? POLLOUT : 0);
    return te_client_fd(r->c);
}

void mcp_http_ready_readable(struct mcp_http_ready *r, short revents)
{
    if ((revents & POLLOUT) && te_client_flush(r->c) < 0) {
        disconnect(r, "the daemon connection failed");
        return;
    }
    if (!(revents & ~POLLOUT))
        return;
    do {
        json_t *ev = NULL;
        int rc = te_client_recv(r->c, &ev);
        if (rc == -EAGAIN)
            return; /* a partial line, kept */
        if (rc < 0) {
            disconnect(r, rc == -ENODATA ? "the daemon closed the connection"
                                         : "the daemon connection failed");
            return;
        }
        if (json_is_string(json_object_get(ev, "event")) &&
            strcmp(json_string_value(json_object_get(ev, "event")), "capacity") == 0) {
            json_decref(r->capacity);
            r->capacity = ev;
            r->answered_ms = cli_now_ms();
            r->asked_ms = 0;
            r->why[0] = '\0';
        } else {
            json_decref(ev);
        }
    } while (r->c && te_client_pending(r->c));
}

unsigned mcp_http_ready_batches(const struct mcp_http_ready *r)
{
    json_int_t v = r ? json_integer_value(json_object_get(r->capacity, "max_client_batches")) : 0;
    return v > 0 && v <= 1000000 ? (unsigned)v : 0;
}

/* Whether the replica should get new calls; the reason when not. */
static bool is_ready(struct mcp_http_ready *r, long long now, const char **why)
{
    if (!r->answered_ms || now - r->answered_ms >= READY_FRESH_MS)
        ask(r, now);
    json_t *cap = r->capacity;
    if (r->draining)
        *why = "draining: the front is shutting down";
    else if (!cap || now - r->answered_ms >= READY_STALE_MS)
        *why = r->why[0] ? r->why : "no answer from the daemon yet";
    else if (json_is_true(json_object_get(cap, "shutting_down")))
        *why = "the daemon is shutting down";
    else if (json_integer_value(json_object_get(cap, "free_workers")) <= 0 &&
             json_integer_value(json_object_get(cap, "queued_calls")) >=
                 json_integer_value(json_object_get(cap, "max_workers")))
        *why = "full: no free worker slot, and as many calls queued as there are slots";
    else
        return true;
    return false;
}

static enum MHD_Result answer_ready(struct mcp_http_ready *r, struct MHD_Connection *conn)
{
    long long now = cli_now_ms();
    const char *why = NULL;
    bool ok = is_ready(r, now, &why);
    json_t *body = json_pack("{s:b,s:b}", "ready", ok, "draining", r->draining);
    if (why)
        json_object_set_new(body, "reason", json_string(why));
    if (r->capacity) {
        static const char *const keys[] = {"max_workers", "free_workers", "queued_calls", NULL};
        for (const char *const *k = keys; *k; k++)
            json_object_set(body, *k, json_object_get(r->capacity, *k));
        json_object_set_new(body, "age_ms", json_integer(now - r->answered_ms));
    }
    return mcp_http_queue(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, body,
                          MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
}

bool mcp_http_ready_route(struct mcp_http *h, struct MHD_Connection *conn, const char *url,
                          const char *method, enum MHD_Result *rc)
{
    bool healthz = strcmp(url, "/healthz") == 0;
    if (!h->ready || (!healthz && strcmp(url, "/ready") != 0))
        return false;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        *rc = mcp_http_queue(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                             mcp_http_rpc_error(NULL, -32600, "GET only", NULL),
                             MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    else if (healthz)
        *rc = mcp_http_queue(conn, MHD_HTTP_OK, json_pack("{s:b}", "alive", true),
                             MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    else
        *rc = answer_ready(h->ready, conn);
    return true;
}

/* Work a draining front refuses: a call, and a session that would hold
 * calls. What serves calls already running (their elicitation answers,
 * cancellations, tools/list) goes on. */
bool mcp_http_drain_refuses(struct mcp_http *h, struct MHD_Connection *conn, const json_t *msg,
                            enum MHD_Result *rc)
{
    const char *m = json_string_value(json_object_get(msg, "method"));
    if (!h->ready || !h->ready->draining || !m ||
        (strcmp(m, "tools/call") != 0 && strcmp(m, "initialize") != 0))
        return false;
    json_t *data = json_pack("{s:s}", "reason", "draining");
    json_t *err = mcp_http_rpc_error(json_object_get(msg, "id"), MCP_HTTP_DRAINING,
                                     "this replica is draining (shutting down) and takes no new "
                                     "call: send it again, to another replica",
                                     data);
    *rc = mcp_http_queue(conn, MHD_HTTP_SERVICE_UNAVAILABLE, err, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    return true;
}

void mcp_http_drain(struct mcp_http *h)
{
    if (h->ready)
        h->ready->draining = true;
}

size_t mcp_http_drain_pending(struct mcp_http *h, bool fail)
{
    size_t n = 0;
    for (struct mcp_http_x *x = h->xs, *next; x; x = next) {
        next = x->next;
        if (x->get_stream || x->gone)
            continue;
        n++;
        if (!fail || !x->core_holds || x->finished || x->aborted)
            continue;
        /* The answer first, then the core lets go of the call: the daemon
         * kills its worker, and what the core sends x from now on is
         * dropped (x is finished). */
        json_t *data = json_pack("{s:s,s:b}", "reason", "draining", "cancelled", true);
        mcp_http_send(x, mcp_http_rpc_error(x->id, MCP_HTTP_DRAINING,
                                            "this replica shut down before the call finished "
                                            "(--drain-timeout): the call was cancelled, and "
                                            "may have done part of its work",
                                            data));
        h->core->closed(h->ctx, x);
    }
    return n;
}
