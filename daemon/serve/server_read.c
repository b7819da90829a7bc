/*
 * server_read.c - the Unix socket: accepting clients, reading JSON-line requests,
 * writing JSON-line events. A connection carries any number of requests;
 * its batches run concurrently. A client that half-closes still gets every
 * event it is owed; the connection closes once its batches are done and
 * every event is written.
 *
 * Its parts are listed in server_int.h: this file accepts and reads; a
 * connection's writes and life are in server.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "server.h"
#include "server_int.h"

#define READ_CHUNK 65536
/* Request bytes taken from one connection before it rests for a loop turn:
 * libuv reads up to 32 x 64 KiB per turn, and a flood of 1,024-call run
 * requests parsed that much in ~75 ms while every other client waited;
 * 256 KiB is a few ms of parsing. */
#define TURN_BYTES_MAX (256u << 10)

static char read_buf[READ_CHUNK];

static void too_long(struct td_conn *c)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "request line exceeds the limit of %zu bytes", td_cfg.max_request);
    td_conn_error(c, NULL, "request_error", "request_too_long", msg, NULL);
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
            if (td_conn_make_room(c, c->in.want) && te_lines_grow(&c->in) < 0) {
                td_conn_error(c, NULL, "request_error", "request_too_long",
                              "out of memory buffering the request", NULL);
                te_lines_drop(&c->in);
            }
        } else if (rc == -EMSGSIZE) {
            too_long(c);
        } else if (rc == TE_LINES_LINE) {
            size_t len;
            char *line = te_lines_line(&c->in, &len);
            td_conn_handle_line(c, line, len);
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
            uv_timer_start(&c->idle, td_conn_on_idle, td_cfg.idle_timeout_s * 1000ULL, 0);
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
            td_conn_handle_line(c, line, len);
            te_lines_next(&c->in);
        }
        c->eof = true;
        if (c->nbatches || c->tail)
            td_conn_watch_hup(c);
    } else {
        td_conn_lost(c, uv_strerror((int)n));
    }
    td_conn_maybe_close(c);
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
    td_conn_lines_init(c);
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
    uv_prepare_init(td_loop, &c->flush);
    c->flush.data = c;
    c->handles = 4;
    socklen_t len = sizeof(c->cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) < 0)
        td_log(TD_LOG_WARN, "SO_PEERCRED: %s; the client counts as uid -1", strerror(errno));
    unsigned nconns = td_conn_add(c);
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
        td_conn_maybe_close(c);
        return;
    }
    if (td_cfg.idle_timeout_s && !events)
        uv_timer_start(&c->idle, td_conn_on_idle, td_cfg.idle_timeout_s * 1000ULL, 0);
    td_log(TD_LOG_DEBUG, "client pid %d uid %d gid %d: connected%s", (int)c->cred.pid,
           (int)c->cred.uid, (int)c->cred.gid, events ? " to the events socket" : "");
    if (events) {
        c->events_only = true;
        td_conn_subscribe(c, NULL, NULL);
    }
    uv_read_start((uv_stream_t *)&c->h, alloc_cb, on_read);
}
