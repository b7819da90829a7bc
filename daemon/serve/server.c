/*
 * server.c - a client's connection (server_int.h): its writes, with
 * back-pressure on its batches' workers; --idle-timeout; a hang-up told from
 * a half-close; lost, cancelled, closed once nothing more is owed; and the
 * counts across every connection (clients, uids, batches, line buffers).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "bigres.h"
#include "cleanup.h"
#include "config.h"
#include "log.h"
#include "registry.h"
#include "server.h"
#include "server_int.h"
#include "spill.h"
#include "stats.h"
#include "tail.h"
#include "util.h"
#include "worker.h"

/* Event bytes queued for a client before we stop reading its workers'
 * output; reading resumes below half of it. A client that stops reading
 * then costs at most this plus one result per running call (a worker that
 * exits or times out still completes). */
#define CONN_BUFFER_MAX (1u << 20)
/* A request buffer bigger than this is freed once its line is handled, so
 * one huge line does not keep its memory (and its share of
 * --max-request-buffer) for the rest of the connection. */
#define LINE_KEEP_MAX 65536
/* A cork buffer up to this size is kept for the connection's next turn
 * once written (freed with the connection): a buffer of 1 KiB or more
 * malloc'd and freed twice a call made glibc consolidate its fast bins at
 * each. */
#define CORK_KEEP_MAX 65536

struct write_req {
    uv_write_t req;
    char *data;
    size_t len;
    td_written_cb cb; /* NULL: a batch event, counted for back-pressure */
    void *arg, *hold; /* hold: data as parts (td_big_split), freed with it */
};

static LIST_HEAD(, td_conn) conns;
static unsigned nconns;
static LIST_HEAD(, uid_use) uids;
static void (*conn_gone_cb)(void);
static size_t buffered; /* bytes allocated for unfinished lines, all clients */

struct uid_use *td_uid_use_get(uid_t uid, const char *subject)
{
    struct uid_use *u;
    LIST_FOREACH(u, &uids, link)
        if (u->uid == uid &&
            (subject ? u->subject && strcmp(u->subject, subject) == 0 : !u->subject))
            return u;
    if (!(u = calloc(1, sizeof(*u))))
        return NULL;
    if (subject && !(u->subject = strdup(subject))) {
        free(u);
        return NULL;
    }
    u->uid = uid;
    u->client.user = &u->sched;
    LIST_INSERT_HEAD(&uids, u, link);
    return u;
}

void td_uid_use_put(struct uid_use *u)
{
    if (!u || u->conns || u->calls)
        return;
    LIST_REMOVE(u, link);
    free(u->subject);
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
    free(c->cork);
    LIST_REMOVE(c, link);
    nconns--;
    if (c->uid) {
        c->uid->conns--;
        td_uid_use_put(c->uid);
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
    if (c->cork_len) { /* unwritten, as a queued write's cancel leaves it */
        c->pending_writes--;
        c->pending_bytes -= c->cork_len;
        c->cork_len = 0;
    }
    uv_close((uv_handle_t *)&c->flush, on_conn_closed);
    uv_close((uv_handle_t *)&c->h, on_conn_closed);
    uv_close((uv_handle_t *)&c->idle, on_conn_closed);
    uv_close((uv_handle_t *)&c->rest, on_conn_closed);
    if (c->hup_fd >= 0)
        uv_close((uv_handle_t *)&c->hup, on_conn_closed);
}

void td_conn_maybe_close(struct td_conn *c)
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
void td_conn_lost(struct td_conn *c, const char *why)
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
    td_conn_maybe_close(c);
}

/* --idle-timeout: a connection with no batch, no subscription and nothing
 * sent for that long is told so and closed, freeing its slot. One that does
 * not read even that is closed at the next expiry, its writes dropped. */
void td_conn_on_idle(uv_timer_t *t)
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
    td_conn_maybe_close(c);
    if (!c->closing)
        uv_timer_start(&c->idle, td_conn_on_idle, td_cfg.idle_timeout_s * 1000ULL, 0);
}

/* EPOLLHUP on a Unix stream socket means both directions are closed; a
 * half-close (shutdown(SHUT_WR), as socat does) only gives EOF. We ask for
 * UV_PRIORITIZED, which a Unix socket never has, so any event here is the
 * hang-up. */
static void on_hup(uv_poll_t *p, int status, int events)
{
    td_conn_lost(p->data, "disconnected");
}

void td_conn_watch_hup(struct td_conn *c)
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

/* What follows a write of events done: back-pressure eased, the connection
 * closed if that was all it owed. */
static void written(struct td_conn *c, int status)
{
    if (c->congested && c->pending_bytes < CONN_BUFFER_MAX / 2) {
        c->congested = false;
        td_batches_throttle(c, false);
    }
    if (status < 0 && status != UV_ECANCELED)
        td_conn_lost(c, uv_strerror(status));
    td_conn_maybe_close(c);
}

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
    written(c, status);
}

static void flush(struct td_conn *c, bool now);

int td_conn_write(struct td_conn *c, char *data, size_t len, td_written_cb cb, void *arg)
{
    flush(c, false);                /* the turn's events first: in order */
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

/* The turn's corked events out in one write (one syscall, one wake-up of
 * the client for a call's completed, result_encoded and batch_completed).
 * now (the turn's end): what the socket takes at once is done here, the
 * same bytes in the same order; a uv_write would cost a loop turn more and
 * an epoll_ctl each (libuv re-arms the watcher when its queue drains). The
 * rest, or an error, goes to uv_write as before. */
static void flush(struct td_conn *c, bool now)
{
    if (!c->cork_len)
        return;
    char *data = c->cork;
    size_t len = c->cork_len, cap = c->cork_cap;
    c->cork = NULL;
    c->cork_len = c->cork_cap = 0;
    if (now && !c->dead && !c->closing) {
        uv_buf_t buf = uv_buf_init(data, (unsigned)len);
        int n = uv_try_write((uv_stream_t *)&c->h, &buf, 1);
        if (n > 0) {
            c->pending_bytes -= (size_t)n;
            len -= (size_t)n;
            memmove(data, data + n, len);
        }
        if (!len) {
            c->pending_writes--;
            if (cap <= CORK_KEEP_MAX) { /* the next turn's: no malloc, no free */
                c->cork = data;
                c->cork_cap = cap;
            } else {
                free(data);
            }
            written(c, 0);
            return;
        }
    }
    c->pending_writes--; /* counted again by the write */
    c->pending_bytes -= len;
    if (td_conn_write(c, data, len, NULL, NULL) < 0)
        td_conn_maybe_close(c); /* nothing more owed: its close was waiting on this */
}

static void on_flush(uv_prepare_t *h)
{
    uv_prepare_stop(h);
    flush(h->data, true);
}

/* A line kept for the turn's one write; false: written apart (a big
 * result's, which goes out from where its text is, bigres.h). */
static bool cork(struct td_conn *c, char *s, size_t n)
{
    uv_buf_t *bufs;
    unsigned nb;
    size_t bytes;
    void *hold = td_big_split(s, n, &bufs, &nb, &bytes);
    if (hold) {
        td_big_line_free(hold);
        return false;
    }
    if (c->cork_len + n > c->cork_cap) {
        size_t cap = c->cork_cap ? c->cork_cap : 4096;
        while (cap < c->cork_len + n)
            cap *= 2;
        char *b = realloc(c->cork, cap);
        if (!b)
            return false;
        c->cork = b;
        c->cork_cap = cap;
    }
    memcpy(c->cork + c->cork_len, s, n);
    if (!c->cork_len) {
        c->pending_writes++; /* owed: the connection stays open for it */
        uv_prepare_start(&c->flush, on_flush);
    }
    c->cork_len += n;
    c->pending_bytes += n;
    free(s);
    return true;
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
    if (!cork(c, s, n) && td_conn_write(c, s, n, NULL, NULL) < 0)
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

/* Unfinished lines of all clients together hold at most
 * --max-request-buffer: a client whose line needs its buffer grown to need
 * bytes beyond that makes the client holding the most lose its line (itself
 * when it would hold the most). False when c lost its own. */
bool td_conn_make_room(struct td_conn *c, size_t need)
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
        flush(c, false); /* what is only corked is not unread */
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
        td_conn_maybe_close(c);
    }
}

void td_conn_lines_init(struct td_conn *c)
{
    te_lines_init(&c->in, td_cfg.max_request);
    c->in.keep = LINE_KEEP_MAX;
    c->in.account = &buffered;
    c->in.ask = true;
}

unsigned td_conn_add(struct td_conn *c)
{
    LIST_INSERT_HEAD(&conns, c, link);
    nconns++;
    if ((c->uid = td_uid_use_get(c->cred.uid, NULL))) {
        c->uid->conns++;
        c->sched.user = &c->uid->sched;
    }
    return nconns;
}
