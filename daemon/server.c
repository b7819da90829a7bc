/*
 * server.c - the Unix socket: accepting clients, reading JSON-line requests,
 * writing JSON-line events. A connection carries any number of requests;
 * its batches run concurrently. A client that half-closes still gets every
 * event it is owed; the connection closes once its batches are done and
 * every event is written.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "batch.h"
#include "bigres.h"
#include "cleanup.h"
#include "config.h"
#include "log.h"
#include "registry.h"
#include "request.h"
#include "server.h"
#include "stats.h"
#include "metrics.h"
#include "tail.h"
#include "template.h"
#include "toolexec.h"
#include "util.h"
#include "worker.h"

/* Event bytes queued for a client before we stop reading its workers'
 * output; reading resumes below half of it. A client that stops reading
 * then costs at most this plus one result per running call (a worker that
 * exits or times out still completes). */
#define CONN_BUFFER_MAX (1u << 20)
#define READ_CHUNK 65536
/* A request buffer bigger than this is freed once its line is handled, so
 * one huge line does not keep its memory (and its share of
 * --max-request-buffer) for the rest of the connection. */
#define LINE_KEEP_MAX 65536
/* Request bytes taken from one connection before it rests for a loop turn:
 * libuv reads up to 32 x 64 KiB per turn, and a flood of 1,024-call run
 * requests parsed that much in ~75 ms while every other client waited;
 * 256 KiB is a few ms of parsing. */
#define TURN_BYTES_MAX (256u << 10)

/* What one uid holds across its connections (--max-clients-per-uid,
 * --max-queued-calls, its share of the worker slots). */
struct uid_use {
    uid_t uid;
    unsigned conns;
    size_t calls; /* calls of its unfinished batches */
    struct td_uid_sched sched;
    LIST_ENTRY(uid_use) link;
};

struct batch_entry {
    struct td_batch *b;
    char *id;
    bool cancelled;
    LIST_ENTRY(batch_entry) link;
};

struct td_conn {
    uv_pipe_t h;
    te_lines in; /* the request line being read */
    bool eof, dead, closing;
    unsigned pending_writes;
    size_t pending_bytes; /* queued, not yet written */
    bool congested;       /* workers' output paused for this client */
    LIST_HEAD(, batch_entry) batches;
    unsigned nbatches;
    struct ucred cred;
    uv_poll_t hup;        /* after EOF: tells a full close from a half-close */
    int hup_fd;           /* a dup of the socket, -1 when not watching */
    int handles;          /* open libuv handles */
    struct td_tail *tail; /* a subscriber to the event stream */
    bool events_only;     /* accepted on the events socket: requests ignored */
    struct uid_use *uid;  /* NULL only for a connection refused at accept */
    uv_timer_t idle;      /* --idle-timeout */
    uv_idle_t rest;       /* resumes reading after a turn's worth of requests */
    size_t turn_bytes;    /* read since it last rested */
    struct td_conn_sched sched;
    struct td_spill_owner spills; /* removed when it closes */
    bool idle_closing;            /* told it was idle; closed at the next expiry at the latest */
    LIST_ENTRY(td_conn) link;
    bool watch_tools; /* {"op": "tools", "watch": true}: told of each reload */
};

struct write_req {
    uv_write_t req;
    char *data;
    size_t len;
    td_written_cb cb; /* NULL: a batch event, counted for back-pressure */
    void *arg, *hold; /* hold: data as parts (td_big_split), freed with it */
};

static LIST_HEAD(, td_conn) conns;
static unsigned nconns;
static char read_buf[READ_CHUNK];
static LIST_HEAD(, uid_use) uids;
static void (*conn_gone_cb)(void);
static size_t buffered; /* bytes allocated for unfinished lines, all clients */

static struct uid_use *uid_use_get(uid_t uid)
{
    struct uid_use *u;
    LIST_FOREACH(u, &uids, link)
        if (u->uid == uid)
            return u;
    if ((u = calloc(1, sizeof(*u)))) {
        u->uid = uid;
        LIST_INSERT_HEAD(&uids, u, link);
    }
    return u;
}

static void uid_use_put(struct uid_use *u)
{
    if (!u || u->conns || u->calls)
        return;
    LIST_REMOVE(u, link);
    free(u);
}

unsigned td_server_conns(void)
{
    return nconns;
}

static void on_conn_closed(uv_handle_t *h)
{
    struct td_conn *c = h->data;
    if (--c->handles > 0)
        return;
    if (c->hup_fd >= 0)
        close(c->hup_fd);
    LIST_REMOVE(c, link);
    nconns--;
    if (c->uid) {
        c->uid->conns--;
        uid_use_put(c->uid);
    }
    /* its batches are done, their spills written: nobody else reads them */
    td_spill_release(&c->spills);
    td_log(TD_LOG_DEBUG, "client pid %d: closed", (int)c->cred.pid);
    td_tail_free(c->tail);
    te_lines_free(&c->in);
    free(c);
    if (conn_gone_cb)
        conn_gone_cb();
}

/* Writes still queued are cancelled (their callbacks run first). */
static void close_now(struct td_conn *c)
{
    c->closing = true;
    uv_close((uv_handle_t *)&c->h, on_conn_closed);
    uv_close((uv_handle_t *)&c->idle, on_conn_closed);
    uv_close((uv_handle_t *)&c->rest, on_conn_closed);
    if (c->hup_fd >= 0)
        uv_close((uv_handle_t *)&c->hup, on_conn_closed);
}

static void maybe_close(struct td_conn *c)
{
    if (c->closing || c->nbatches || c->pending_writes)
        return;
    /* A subscriber stays until it hangs up (socat -u half-closes at once),
     * or until the daemon has nothing more to tell (td_server_stop). */
    bool done = c->tail ? c->dead || (td_shutting_down && td_server_finished())
                        : c->eof || c->dead || td_shutting_down;
    if (!done)
        return;
    close_now(c);
}

/* Cancel every batch of c not cancelled yet. Cancelling may complete and
 * remove batches, so the walk restarts from the head each time. */
static void cancel_batches(struct td_conn *c)
{
    td_batch_hold(true);
    for (struct batch_entry *e = LIST_FIRST(&c->batches); e;) {
        if (!e->cancelled) {
            e->cancelled = true;
            td_batch_cancel(e->b);
            e = LIST_FIRST(&c->batches);
        } else {
            e = LIST_NEXT(e, link);
        }
    }
    td_batch_hold(false);
}

/* The client is gone for good: its batches are cancelled (their workers
 * killed at once); the connection closes when they have completed. */
static void conn_lost(struct td_conn *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = true;
    td_log(TD_LOG_INFO, "client pid %d: %s; cancelling its %u batches", (int)c->cred.pid, why,
           c->nbatches);
    if (!uv_is_closing((uv_handle_t *)&c->h))
        uv_read_stop((uv_stream_t *)&c->h);
    if (c->hup_fd >= 0)
        uv_poll_stop(&c->hup);
    cancel_batches(c);
    maybe_close(c);
}

/* --idle-timeout: a connection with no batch, no subscription and nothing
 * sent for that long is told so and closed, freeing its slot. One that does
 * not read even that is closed at the next expiry, its writes dropped. */
static void on_idle(uv_timer_t *t)
{
    struct td_conn *c = t->data;
    /* watch_tools: an MCP session waits for its host as long as it likes */
    if (c->closing || c->nbatches || c->tail || c->events_only || c->watch_tools)
        return; /* restarted when its last batch completes */
    if (c->idle_closing) {
        td_log(TD_LOG_INFO, "client pid %d uid %d: idle and not reading; closing", (int)c->cred.pid,
               (int)c->cred.uid);
        close_now(c);
        return;
    }
    td_log(TD_LOG_INFO, "client pid %d uid %d: idle for %u s (--idle-timeout); closing",
           (int)c->cred.pid, (int)c->cred.uid, td_cfg.idle_timeout_s);
    char msg[160];
    snprintf(msg, sizeof(msg),
             "connection idle for %u s with no batch running (--idle-timeout); closing it",
             td_cfg.idle_timeout_s);
    td_conn_error(c, NULL, "request_error", "idle_timeout", msg, NULL);
    c->idle_closing = true;
    c->eof = true;
    if (!uv_is_closing((uv_handle_t *)&c->h))
        uv_read_stop((uv_stream_t *)&c->h);
    maybe_close(c);
    if (!c->closing)
        uv_timer_start(&c->idle, on_idle, td_cfg.idle_timeout_s * 1000ULL, 0);
}

/* EPOLLHUP on a Unix stream socket means both directions are closed; a
 * half-close (shutdown(SHUT_WR), as socat does) only gives EOF. We ask for
 * UV_PRIORITIZED, which a Unix socket never has, so any event here is the
 * hang-up. */
static void on_hup(uv_poll_t *p, int status, int events)
{
    conn_lost(p->data, "disconnected");
}

static void watch_hup(struct td_conn *c)
{
    uv_os_fd_t fd;
    if (c->hup_fd >= 0 || c->closing || uv_fileno((uv_handle_t *)&c->h, &fd) < 0)
        return;
    /* a second descriptor, so epoll watches it apart from the stream's */
    c->hup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (c->hup_fd < 0)
        return;
    if (uv_poll_init(td_loop, &c->hup, c->hup_fd) < 0) {
        close(c->hup_fd);
        c->hup_fd = -1;
        return;
    }
    c->hup.data = c;
    c->handles++;
    uv_poll_start(&c->hup, UV_PRIORITIZED, on_hup);
}

static void conn_lost(struct td_conn *c, const char *why);

static void on_written(uv_write_t *req, int status)
{
    struct write_req *w = (struct write_req *)req;
    struct td_conn *c = req->handle->data;
    c->pending_writes--;
    c->pending_bytes -= w->cb ? 0 : w->len;
    if (w->cb)
        w->cb(c, w->arg, status);
    td_big_line_free(w->hold);
    free(w->data);
    free(w);
    if (c->congested && c->pending_bytes < CONN_BUFFER_MAX / 2) {
        c->congested = false;
        td_batches_throttle(c, false);
    }
    if (status < 0 && status != UV_ECANCELED)
        conn_lost(c, uv_strerror(status));
    maybe_close(c);
}

int td_conn_write(struct td_conn *c, char *data, size_t len, td_written_cb cb, void *arg)
{
    te_autofree char *owned = data; /* both freed on a failure */
    te_autofree struct write_req *w = c->dead || c->closing ? NULL : malloc(sizeof(*w));
    if (!w)
        return -1;
    *w = (struct write_req){.data = data, .len = len, .cb = cb, .arg = arg};
    uv_buf_t buf = uv_buf_init(data, (unsigned)len), *bufs = &buf;
    unsigned n = 1; /* a big result's text goes out from where it is (bigres.h) */
    w->hold = td_big_split(data, len, &bufs, &n, &w->len);
    if (uv_write(&w->req, (uv_stream_t *)&c->h, bufs, n, on_written) < 0) {
        td_big_line_free(w->hold);
        c->dead = true;
        return -1;
    }
    c->pending_writes++;
    c->pending_bytes += cb ? 0 : w->len;
    (void)te_steal(&owned); /* on_written frees them */
    (void)te_steal(&w);
    return 0;
}

void td_conn_send(struct td_conn *c, json_t *event)
{
    te_autojson json_t *ev = event;
    if (!ev || c->dead || c->closing)
        return;
    size_t n;
    char *s = te_lines_dump(ev, &n);
    if (!s) {
        td_log(TD_LOG_ERR, "client pid %d: out of memory; closing", (int)c->cred.pid);
        c->dead = true;
        return;
    }
    if (td_conn_write(c, s, n, NULL, NULL) < 0)
        return;
    if (!c->congested && c->pending_bytes > CONN_BUFFER_MAX) {
        c->congested = true;
        td_log(TD_LOG_INFO, "client pid %d: not reading (%zu bytes queued); pausing its workers",
               (int)c->cred.pid, c->pending_bytes);
        td_batches_throttle(c, true);
    }
}

void td_conn_error(struct td_conn *c, const char *batch, const char *type, const char *reason,
                   const char *message, json_t *metadata)
{
    json_t *ev = json_pack("{s:s,s:s*,s:s,s:s,s:o}", "event", "error", "batch", batch, "type", type,
                           "reason", reason, "message", td_json_text(message, strlen(message)));
    if (ev && !batch)
        json_object_del(ev, "batch");
    if (ev && metadata)
        json_object_set(ev, "metadata", metadata);
    json_decref(metadata);
    td_conn_send(c, ev);
}

void td_batches_throttle(struct td_conn *c, bool pause)
{
    struct batch_entry *e;
    LIST_FOREACH(e, &c->batches, link)
        td_batch_throttle(e->b, pause);
}

/* The batch ops (td_batch_ops) of a connection: how its batches report
 * back and are admitted. */
static bool batch_add(void *data, struct td_batch *b, const char *id)
{
    struct td_conn *c = data;
    struct batch_entry *e;
    LIST_FOREACH(e, &c->batches, link)
        if (strcmp(e->id, id) == 0)
            return false;
    e = malloc(sizeof(*e));
    if (!e || !(e->id = strdup(id))) {
        free(e);
        return false;
    }
    e->b = b;
    e->cancelled = false;
    if (c->congested)
        td_batch_throttle(b, true);
    LIST_INSERT_HEAD(&c->batches, e, link);
    c->nbatches++;
    return true;
}

static void batch_done(void *data, struct td_batch *b)
{
    struct td_conn *c = data;
    struct batch_entry *e;
    LIST_FOREACH(e, &c->batches, link) {
        if (e->b == b) {
            LIST_REMOVE(e, link);
            free(e->id);
            free(e);
            c->nbatches--;
            if (!c->nbatches && td_cfg.idle_timeout_s && !c->closing)
                uv_timer_start(&c->idle, on_idle, td_cfg.idle_timeout_s * 1000ULL, 0);
            break;
        }
    }
    maybe_close(c);
}

static int batch_admit(void *data, size_t ncalls, char *err, size_t errlen)
{
    struct td_conn *c = data;
    if (c->nbatches >= td_cfg.max_client_batches) {
        snprintf(err, errlen,
                 "batch: %u batches are already running on this connection, the limit "
                 "(--max-client-batches); wait for one to complete",
                 c->nbatches);
        return -1;
    }
    if (!c->uid || ncalls > td_cfg.max_queued_calls - c->uid->calls) {
        snprintf(err, errlen,
                 "calls: %zu more calls would exceed the limit of %zu calls in unfinished "
                 "batches of uid %d (--max-queued-calls; %zu now); wait for a batch to complete",
                 ncalls, td_cfg.max_queued_calls, (int)c->cred.uid, c->uid ? c->uid->calls : 0);
        return -1;
    }
    c->uid->calls += ncalls;
    return 0;
}

static void batch_release(void *data, size_t ncalls)
{
    struct td_conn *c = data;
    c->uid->calls -= ncalls;
}

/* Assigned batch ids ("b-N") count across the daemon's life, not per
 * connection: two clients' batches never share an assigned id, on the
 * events socket nor in a tail's --batches filter (issue 14). */
static unsigned batch_next_seq(void *data)
{
    static unsigned seq;
    (void)data;
    return ++seq;
}

static void batch_event(void *data, json_t *ev)
{
    td_conn_send(data, ev);
}

static void batch_error(void *data, const char *batch, const char *type, const char *reason,
                        const char *message, json_t *metadata)
{
    td_conn_error(data, batch, type, reason, message, metadata);
}

static struct td_spill_owner *batch_spills(void *data)
{
    return &((struct td_conn *)data)->spills;
}

static const struct td_batch_ops batch_ops = {
    .event = batch_event,
    .done = batch_done,
    .error = batch_error,
    .next_seq = batch_next_seq,
    .admit = batch_admit,
    .release = batch_release,
    .add = batch_add,
    .spills = batch_spills,
};

/* Make c a subscriber to the event stream; again: the new filters replace
 * the old in place (a write of the subscriber may be in flight). */
static void subscribe(struct td_conn *c, json_t *tools, json_t *batches)
{
    char err[160];
    te_autojson json_t *tools_set = NULL, *batches_set = NULL;
    if (td_tail_filters(tools, batches, &tools_set, &batches_set, err, sizeof(err)) < 0) {
        td_conn_error(c, NULL, "request_error", "invalid_request", err, NULL);
        return;
    }
    uv_os_fd_t fd = -1;
    uv_fileno((uv_handle_t *)&c->h, &fd);
    if (!c->tail && !(c->tail = td_tail_new(td_conn_write, c, &c->cred, fd))) {
        td_conn_error(c, NULL, "request_error", "invalid_request",
                      "out of memory subscribing to the event stream", NULL);
        return;
    }
    td_tail_set_filters(c->tail, te_steal(&tools_set), te_steal(&batches_set));
    td_conn_send(c, json_pack("{s:s,s:O?,s:O?}", "event", "tailing", "tools",
                              json_is_null(tools) ? NULL : tools, "batches",
                              json_is_null(batches) ? NULL : batches));
}

void td_server_gauges(struct td_stats_gauges *g)
{
    *g = (struct td_stats_gauges){
        .running = td_batch_running(),
        .processes = td_workers_alive(),
        .queued = td_batch_queued(),
        .max_workers = td_cfg.max_workers,
        .clients = td_server_conns(),
        .subscribers = td_tail_count(),
        .batches = td_server_batches(),
    };
}

/* The ops. Each answers on c; req is a JSON object it borrows
 * (td_request_handle frees it, the one place that does), so a handler may
 * return anywhere. */

static void op_run(struct td_conn *c, json_t *req)
{
    td_batch_run(
        &(struct td_batch_owner){.ops = &batch_ops, .data = c, .cred = c->cred, .sched = &c->sched},
        req);
}

static struct batch_entry *find_batch(struct td_conn *c, const char *id)
{
    struct batch_entry *e;
    LIST_FOREACH(e, &c->batches, link)
        if (strcmp(e->id, id) == 0)
            return e;
    return NULL;
}

static void op_cancel(struct td_conn *c, json_t *req)
{
    const char *id = td_req_text(req, "batch");
    if (!id) {
        td_conn_error(c, NULL, "request_error", "invalid_request",
                      "batch: expected the id of a running batch", NULL);
        return;
    }
    struct batch_entry *e = find_batch(c, id);
    if (!e || e->cancelled) {
        char msg[128];
        snprintf(msg, sizeof(msg), "batch: no running batch \"%.64s\" on this connection", id);
        td_conn_error(c, id, "request_error", "unknown_batch", msg, NULL);
        return;
    }
    e->cancelled = true;
    td_batch_cancel(e->b);
}

static void op_decide(struct td_conn *c, json_t *req)
{
    const char *id = td_req_text(req, "batch");
    const char *call = td_req_text(req, "id");
    json_t *decision = json_object_get(req, "decision");
    char msg[256];
    if (!id || !call || !decision) {
        td_conn_error(c, NULL, "request_error", "invalid_request",
                      "decide: expected \"batch\", \"id\" and \"decision\"", NULL);
        return;
    }
    struct batch_entry *e = find_batch(c, id);
    if (!e) {
        snprintf(msg, sizeof(msg), "batch: no running batch \"%.64s\" on this connection", id);
        td_conn_error(c, NULL, "request_error", "unknown_batch", msg, NULL);
        return;
    }
    if (td_batch_decide(e->b, call, decision, msg, sizeof(msg)) < 0)
        td_conn_error(c, NULL, "request_error", "no_pending_decision", msg, NULL);
}

static void op_tools(struct td_conn *c, json_t *req)
{
    json_t *f = json_object_get(req, "format");
    json_t *watch = json_object_get(req, "watch");
    if (watch && !json_is_boolean(watch)) {
        td_conn_error(c, NULL, "request_error", "invalid_request", "watch: expected true or false",
                      NULL);
        return;
    }
    if (watch)
        c->watch_tools = json_is_true(watch);
    json_t *list = !f || json_is_null(f) ? td_registry_list(td_tools)
                   : te_json_is_text(f)  ? td_registry_list_as(td_tools, json_string_value(f))
                                         : NULL;
    if (!list) {
        td_conn_error(c, NULL, "request_error", "invalid_request",
                      "format: expected \"openai\", \"openai_responses\", \"anthropic\" or \"mcp\"",
                      NULL);
        return;
    }
    td_conn_send(c, json_pack("{s:s,s:o}", "event", "tools", "tools", list));
}

static void op_tail(struct td_conn *c, json_t *req)
{
    subscribe(c, json_object_get(req, "tools"), json_object_get(req, "batches"));
}

static void op_stats(struct td_conn *c, json_t *req)
{
    struct td_stats_gauges g;
    td_server_gauges(&g);
    json_t *ev = td_stats_event(&g);
    te_autojson json_t *warm = td_template_stats(); /* warm tools' templates, when any */
    if (ev && json_object_size(warm))
        json_object_set_new(ev, "templates", te_steal(&warm));
    td_conn_send(c, ev);
}

/* {"event": "metrics", "content_type": ..., "text": ...}: what /metrics serves. */
static void op_metrics(struct td_conn *c, json_t *req)
{
    struct td_stats_gauges g;
    size_t len;
    td_server_gauges(&g);
    te_autofree char *text = td_metrics_text(&g, &len);
    if (!text) {
        td_conn_error(c, NULL, "engine_error", "internal", "metrics: out of memory", NULL);
        return;
    }
    td_conn_send(c, json_pack("{s:s,s:s,s:s%}", "event", "metrics", "content_type",
                              TD_METRICS_CONTENT_TYPE, "text", text, len));
}

/* Every op, written once (the unknown-op message lists them from here).
 * Who may call it: any client of the main socket, every op (the events
 * socket only talks: its lines are ignored before this table); new_work:
 * refused once the daemon is shutting down, the others still answered. */
static const struct td_op ops[] = {
    {"run", op_run, true},          {"cancel", op_cancel, false}, {"decide", op_decide, false},
    {"tools", op_tools, false},     {"tail", op_tail, false},     {"stats", op_stats, false},
    {"metrics", op_metrics, false},
};

static void request_error(struct td_conn *c, const char *batch, const char *reason,
                          const char *message)
{
    td_conn_error(c, batch, "request_error", reason, message, NULL);
}

static void handle_line(struct td_conn *c, char *line, size_t len)
{
    if (!c->events_only) /* the events socket only talks */
        td_request_handle(ops, sizeof(ops) / sizeof(ops[0]), c, line, len, request_error);
}

static void too_long(struct td_conn *c)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "request line exceeds the limit of %zu bytes", td_cfg.max_request);
    td_conn_error(c, NULL, "request_error", "request_too_long", msg, NULL);
}

/* Unfinished lines of all clients together hold at most
 * --max-request-buffer: a client whose line needs its buffer grown to need
 * bytes beyond that makes the client holding the most lose its line (itself
 * when it would hold the most). False when c lost its own. */
static bool make_room(struct td_conn *c, size_t need)
{
    while (buffered - c->in.cap + need > td_cfg.max_request_buffer) {
        struct td_conn *big = c;
        size_t most = need;
        struct td_conn *x;
        LIST_FOREACH(x, &conns, link) {
            if (x != c && x->in.cap > most) {
                big = x;
                most = x->in.cap;
            }
        }
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "request line dropped: unfinished request lines of all clients would exceed "
                 "%zu bytes (--max-request-buffer), and this one held the most (%zu bytes)",
                 td_cfg.max_request_buffer, most);
        td_log(TD_LOG_WARN, "client pid %d uid %d: %s", (int)big->cred.pid, (int)big->cred.uid,
               msg);
        td_conn_error(big, NULL, "request_error", "request_too_long", msg, NULL);
        te_lines_drop(&big->in);
        if (big == c)
            return false;
    }
    return true;
}

/* Append bytes and handle every complete line. */
static void take_input(struct td_conn *c, const char *p, size_t n)
{
    while (n) {
        size_t used;
        int rc = te_lines_feed(&c->in, p, n, &used);
        p += used;
        n -= used;
        if (rc == TE_LINES_GROW) {
            /* the line's buffer grows only within --max-request-buffer */
            if (make_room(c, c->in.want) && te_lines_grow(&c->in) < 0) {
                td_conn_error(c, NULL, "request_error", "request_too_long",
                              "out of memory buffering the request", NULL);
                te_lines_drop(&c->in);
            }
        } else if (rc == -EMSGSIZE) {
            too_long(c);
        } else if (rc == TE_LINES_LINE) {
            size_t len;
            char *line = te_lines_line(&c->in, &len);
            handle_line(c, line, len);
            te_lines_next(&c->in);
            if (c->closing || c->dead)
                return;
        }
    }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(read_buf, sizeof(read_buf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_rest(uv_idle_t *h)
{
    struct td_conn *c = h->data;
    uv_idle_stop(h);
    c->turn_bytes = 0;
    if (!c->closing && !c->dead && !c->eof)
        uv_read_start((uv_stream_t *)&c->h, alloc_cb, on_read);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct td_conn *c = s->data;
    if (n > 0) {
        if (td_cfg.idle_timeout_s && !c->idle_closing)
            uv_timer_start(&c->idle, on_idle, td_cfg.idle_timeout_s * 1000ULL, 0);
        take_input(c, buf->base, (size_t)n);
        c->turn_bytes += (size_t)n;
        if (c->turn_bytes >= TURN_BYTES_MAX && !c->closing && !c->dead && !c->eof) {
            /* let the other clients in before reading more of this one */
            uv_read_stop(s);
            uv_idle_start(&c->rest, on_rest);
        }
        return;
    }
    if (n == 0)
        return;
    uv_read_stop(s);
    if (n == UV_EOF) {
        /* half-close: a final unterminated line still counts */
        size_t len;
        char *line = te_lines_finish(&c->in, &len);
        if (line) {
            handle_line(c, line, len);
            te_lines_next(&c->in);
        }
        c->eof = true;
        if (c->nbatches || c->tail)
            watch_hup(c);
    } else {
        conn_lost(c, uv_strerror((int)n));
    }
    maybe_close(c);
}

static void free_on_close(uv_handle_t *h)
{
    free(h->data);
}

/* A new client on fd (non-blocking, close-on-exec); on the events socket it
 * is a subscriber from the start. */
void td_conn_accept(int fd, bool events)
{
    struct td_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        td_log(TD_LOG_ERR, "accept: out of memory");
        close(fd);
        return;
    }
    uv_pipe_init(td_loop, &c->h, 0);
    c->h.data = c;
    c->hup_fd = -1;
    te_lines_init(&c->in, td_cfg.max_request);
    c->in.keep = LINE_KEEP_MAX;
    c->in.account = &buffered;
    c->in.ask = true;
    int rc = uv_pipe_open(&c->h, fd);
    if (rc < 0) {
        td_log(TD_LOG_WARN, "accept: %s", uv_strerror(rc));
        close(fd);
        uv_close((uv_handle_t *)&c->h, free_on_close);
        return;
    }
    /* Unknown credentials must not read as root's (uid 0 sees every
     * subscriber's events and passes allow_uids [0]). */
    c->cred = (struct ucred){.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    uv_timer_init(td_loop, &c->idle);
    c->idle.data = c;
    uv_idle_init(td_loop, &c->rest);
    c->rest.data = c;
    c->handles = 3;
    socklen_t len = sizeof(c->cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) < 0)
        td_log(TD_LOG_WARN, "SO_PEERCRED: %s; the client counts as uid -1", strerror(errno));
    LIST_INSERT_HEAD(&conns, c, link);
    nconns++;
    if ((c->uid = uid_use_get(c->cred.uid))) {
        c->uid->conns++;
        c->sched.user = &c->uid->sched;
    }
    char msg[160];
    if (nconns > td_cfg.max_clients || !c->uid) {
        td_log(TD_LOG_WARN, "client pid %d uid %d: refused: %u clients connected (--max-clients)",
               (int)c->cred.pid, (int)c->cred.uid, nconns - 1);
        snprintf(msg, sizeof(msg), "too many clients connected; try again later");
    } else if (c->uid->conns > td_cfg.max_clients_per_uid) {
        td_log(TD_LOG_WARN,
               "client pid %d uid %d: refused: uid %d has %u connections (--max-clients-per-uid)",
               (int)c->cred.pid, (int)c->cred.uid, (int)c->cred.uid, c->uid->conns - 1);
        snprintf(msg, sizeof(msg),
                 "too many connections of uid %d: %u, the limit per uid (--max-clients-per-uid); "
                 "try again later",
                 (int)c->cred.uid, c->uid->conns - 1);
    } else {
        msg[0] = '\0';
    }
    if (msg[0]) {
        td_conn_error(c, NULL, "request_error", "too_many_clients", msg, NULL);
        c->eof = true;
        maybe_close(c);
        return;
    }
    if (td_cfg.idle_timeout_s && !events)
        uv_timer_start(&c->idle, on_idle, td_cfg.idle_timeout_s * 1000ULL, 0);
    td_log(TD_LOG_DEBUG, "client pid %d uid %d gid %d: connected%s", (int)c->cred.pid,
           (int)c->cred.uid, (int)c->cred.gid, events ? " to the events socket" : "");
    if (events) {
        c->events_only = true;
        subscribe(c, NULL, NULL);
    }
    uv_read_start((uv_stream_t *)&c->h, alloc_cb, on_read);
}

static unsigned total_batches(void)
{
    unsigned n = 0;
    struct td_conn *c;
    LIST_FOREACH(c, &conns, link)
        n += c->nbatches;
    return n;
}

bool td_server_finished(void)
{
    return total_batches() == 0 && td_workers_alive() == 0;
}

void td_server_tools_changed(void)
{
    struct td_conn *c;
    LIST_FOREACH(c, &conns, link)
        if (c->watch_tools && !c->dead)
            td_conn_send(c, json_pack("{s:s,s:I}", "event", "tools_changed", "count",
                                      (json_int_t)td_tools->n));
}

void td_server_cancel_all(void)
{
    struct td_conn *c;
    LIST_FOREACH(c, &conns, link)
        cancel_batches(c);
}

unsigned td_server_batches(void)
{
    return total_batches();
}

void td_server_drop_unread(void)
{
    for (struct td_conn *c = LIST_FIRST(&conns), *next; c; c = next) {
        next = LIST_NEXT(c, link);
        if (c->closing || c->nbatches || !c->pending_writes)
            continue;
        td_log(TD_LOG_WARN,
               "client pid %d uid %d: %u writes (%zu bytes of events) unread at shutdown; closing",
               (int)c->cred.pid, (int)c->cred.uid, c->pending_writes, c->pending_bytes);
        close_now(c);
    }
}

void td_server_on_conn_gone(void (*cb)(void))
{
    conn_gone_cb = cb;
}

void td_server_stop(void)
{
    for (struct td_conn *c = LIST_FIRST(&conns), *next; c; c = next) {
        next = LIST_NEXT(c, link);
        maybe_close(c);
    }
}
