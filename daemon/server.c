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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "toolexecd.h"

/* Event bytes queued for a client before we stop reading its workers'
 * output; reading resumes below half of it. A client that stops reading
 * then costs at most this plus one result per running call (a worker that
 * exits or times out still completes). */
#define CONN_BUFFER_MAX (1u << 20)
/* Pending connections the kernel queues for us. */
#define LISTEN_BACKLOG 128
#define READ_CHUNK 65536

struct batch_entry {
    struct td_batch *b;
    char *id;
    bool cancelled;
    struct batch_entry *next;
};

struct td_conn {
    uv_pipe_t h;
    char *buf; /* unparsed request bytes */
    size_t len, cap;
    bool discarding; /* skipping the rest of an over-long line */
    bool eof, dead, closing;
    unsigned pending_writes;
    size_t pending_bytes; /* queued, not yet written */
    bool congested;       /* workers' output paused for this client */
    struct batch_entry *batches;
    unsigned nbatches, batch_seq;
    struct ucred cred;
    uv_poll_t hup; /* after EOF: tells a full close from a half-close */
    int hup_fd;    /* a dup of the socket, -1 when not watching */
    int handles;   /* open libuv handles */
    struct td_conn *prev, *next;
};

struct write_req {
    uv_write_t req;
    char *data;
    size_t len;
};

/* Out of descriptors, accepting pauses this long before it is retried. */
#define ACCEPT_RETRY_MS 100

static int listen_fd = -1;
static uv_poll_t listen_poll;
static uv_timer_t accept_retry;
static bool listening;
static struct td_conn *conns;
static unsigned nconns;
static char read_buf[READ_CHUNK];

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
    if (c->prev)
        c->prev->next = c->next;
    else
        conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    nconns--;
    td_log(TD_LOG_DEBUG, "client pid %d: closed", (int)c->cred.pid);
    free(c->buf);
    free(c);
    td_maybe_exit();
}

static void maybe_close(struct td_conn *c)
{
    if (c->closing || c->nbatches || c->pending_writes)
        return;
    if (!(c->eof || c->dead || td_shutting_down))
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->h, on_conn_closed);
    if (c->hup_fd >= 0)
        uv_close((uv_handle_t *)&c->hup, on_conn_closed);
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
    /* cancelling may complete and remove batches: restart from the head */
    for (struct batch_entry *e = c->batches; e;) {
        if (!e->cancelled) {
            e->cancelled = true;
            td_batch_cancel(e->b);
            e = c->batches;
        } else {
            e = e->next;
        }
    }
    maybe_close(c);
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
    c->pending_bytes -= w->len;
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

void td_conn_send(struct td_conn *c, json_t *event)
{
    if (!event)
        return;
    if (c->dead || c->closing) {
        json_decref(event);
        return;
    }
    char *s = json_dumps(event, JSON_COMPACT);
    json_decref(event);
    struct write_req *w = s ? malloc(sizeof(*w)) : NULL;
    if (!w) {
        free(s);
        td_log(TD_LOG_ERR, "client pid %d: out of memory; closing", (int)c->cred.pid);
        c->dead = true;
        return;
    }
    size_t n = strlen(s);
    s[n] = '\n'; /* the NUL's byte becomes the line end */
    w->data = s;
    uv_buf_t buf = uv_buf_init(s, (unsigned)n + 1);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->h, &buf, 1, on_written);
    if (rc < 0) {
        free(s);
        free(w);
        c->dead = true;
        return;
    }
    c->pending_writes++;
    w->len = n + 1;
    c->pending_bytes += w->len;
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
    for (struct batch_entry *e = c->batches; e; e = e->next)
        td_batch_throttle(e->b, pause);
}

bool td_conn_batch_add(struct td_conn *c, struct td_batch *b, const char *id)
{
    for (struct batch_entry *e = c->batches; e; e = e->next)
        if (strcmp(e->id, id) == 0)
            return false;
    struct batch_entry *e = malloc(sizeof(*e));
    if (!e || !(e->id = strdup(id))) {
        free(e);
        return false;
    }
    e->b = b;
    e->cancelled = false;
    if (c->congested)
        td_batch_throttle(b, true);
    e->next = c->batches;
    c->batches = e;
    c->nbatches++;
    return true;
}

void td_conn_batch_remove(struct td_conn *c, struct td_batch *b)
{
    for (struct batch_entry **pp = &c->batches; *pp; pp = &(*pp)->next) {
        if ((*pp)->b == b) {
            struct batch_entry *e = *pp;
            *pp = e->next;
            free(e->id);
            free(e);
            c->nbatches--;
            break;
        }
    }
    maybe_close(c);
}

const struct ucred *td_conn_cred(const struct td_conn *c)
{
    return &c->cred;
}

unsigned td_conn_next_batch_seq(struct td_conn *c)
{
    return ++c->batch_seq;
}

static void handle_line(struct td_conn *c, char *line, size_t len)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        i++;
    if (i == len)
        return; /* blank lines are harmless; socat users type them */
    json_error_t jerr;
    json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    char msg[256];
    if (!req) {
        snprintf(msg, sizeof(msg), "request is not valid JSON (column %d): %s", jerr.column,
                 jerr.text);
        td_conn_error(c, NULL, "request_error", "invalid_json", msg, NULL);
        return;
    }
    if (!json_is_object(req)) {
        td_conn_error(c, NULL, "request_error", "not_an_object", "request is not a JSON object",
                      NULL);
        json_decref(req);
        return;
    }
    const char *op = json_string_value(json_object_get(req, "op"));
    if (!op) {
        td_conn_error(c, NULL, "request_error", "unknown_op",
                      "op: missing or not a string (expected \"run\", \"cancel\" or \"tools\")",
                      NULL);
    } else if (strcmp(op, "run") == 0) {
        td_batch_run(c, req);
    } else if (strcmp(op, "cancel") == 0) {
        const char *id = json_string_value(json_object_get(req, "batch"));
        struct batch_entry *e = c->batches;
        while (e && id && strcmp(e->id, id) != 0)
            e = e->next;
        if (!id) {
            td_conn_error(c, NULL, "request_error", "invalid_request",
                          "batch: expected the id of a running batch", NULL);
        } else if (!e || e->cancelled) {
            snprintf(msg, sizeof(msg), "batch: no running batch \"%.64s\" on this connection", id);
            td_conn_error(c, id, "request_error", "unknown_batch", msg, NULL);
        } else {
            e->cancelled = true;
            td_batch_cancel(e->b);
        }
    } else if (strcmp(op, "tools") == 0) {
        td_conn_send(c,
                     json_pack("{s:s,s:o}", "event", "tools", "tools", td_registry_list(td_tools)));
    } else {
        snprintf(msg, sizeof(msg),
                 "op: unknown op \"%.64s\" (expected \"run\", \"cancel\" or \"tools\")", op);
        td_conn_error(c, NULL, "request_error", "unknown_op", msg, NULL);
    }
    json_decref(req);
}

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
        const char *nl = memchr(p, '\n', n);
        size_t seg = nl ? (size_t)(nl - p) : n;
        if (c->discarding) {
            /* drop the rest of an over-long line */
        } else if (c->len + seg > td_cfg.max_request) {
            too_long(c);
            c->discarding = true;
            c->len = 0;
        } else {
            if (c->len + seg > c->cap) {
                size_t ncap = c->cap ? c->cap : 4096;
                while (ncap < c->len + seg)
                    ncap *= 2;
                char *nb = realloc(c->buf, ncap);
                if (!nb) {
                    td_conn_error(c, NULL, "request_error", "request_too_long",
                                  "out of memory buffering the request", NULL);
                    c->discarding = true;
                    c->len = 0;
                    goto next;
                }
                c->buf = nb;
                c->cap = ncap;
            }
            memcpy(c->buf + c->len, p, seg);
            c->len += seg;
        }
    next:
        if (!nl)
            return;
        if (!c->discarding)
            handle_line(c, c->buf, c->len);
        c->discarding = false;
        c->len = 0;
        p = nl + 1;
        n -= seg + 1;
        if (c->closing || c->dead)
            return;
    }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(read_buf, sizeof(read_buf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct td_conn *c = s->data;
    if (n > 0) {
        take_input(c, buf->base, (size_t)n);
        return;
    }
    if (n == 0)
        return;
    uv_read_stop(s);
    if (n == UV_EOF) {
        /* half-close: a final unterminated line still counts */
        if (c->len && !c->discarding)
            handle_line(c, c->buf, c->len);
        c->len = 0;
        c->eof = true;
        if (c->nbatches)
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

/* A new client on fd (non-blocking, close-on-exec). */
static void conn_new(int fd)
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
    c->handles = 1;
    int rc = uv_pipe_open(&c->h, fd);
    if (rc < 0) {
        td_log(TD_LOG_WARN, "accept: %s", uv_strerror(rc));
        close(fd);
        uv_close((uv_handle_t *)&c->h, free_on_close);
        return;
    }
    socklen_t len = sizeof(c->cred);
    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len);
    c->next = conns;
    if (conns)
        conns->prev = c;
    conns = c;
    nconns++;
    if (nconns > td_cfg.max_clients) {
        td_log(TD_LOG_WARN, "client pid %d uid %d: refused: %u clients connected (--max-clients)",
               (int)c->cred.pid, (int)c->cred.uid, nconns - 1);
        td_conn_error(c, NULL, "request_error", "too_many_clients",
                      "too many clients connected; try again later", NULL);
        c->eof = true;
        maybe_close(c);
        return;
    }
    td_log(TD_LOG_DEBUG, "client pid %d uid %d gid %d: connected", (int)c->cred.pid,
           (int)c->cred.uid, (int)c->cred.gid);
    uv_read_start((uv_stream_t *)&c->h, alloc_cb, on_read);
}

static void on_listen_ready(uv_poll_t *p, int status, int events);

static void resume_accepting(uv_timer_t *t)
{
    if (listening)
        uv_poll_start(&listen_poll, UV_READABLE, on_listen_ready);
}

/* Accept every pending client. Out of descriptors (or memory), we stop
 * accepting for a moment rather than spin on a socket that stays readable;
 * the clients wait in the backlog meanwhile. */
static void on_listen_ready(uv_poll_t *p, int status, int events)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            conn_new(fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN)
            return;
        td_log(TD_LOG_WARN, "accept: %s; not accepting for %d ms", strerror(errno),
               ACCEPT_RETRY_MS);
        uv_poll_stop(&listen_poll);
        uv_timer_start(&accept_retry, resume_accepting, ACCEPT_RETRY_MS, 0);
        return;
    }
}

/* Refuse to replace a socket someone is listening on; remove a stale one. */
static int check_existing(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) {
        td_log(TD_LOG_ERR, "%s exists and is not a socket", path);
        return -EEXIST;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    close(fd);
    if (rc == 0) {
        td_log(TD_LOG_ERR, "another toolexecd is listening on %s", path);
        return -EADDRINUSE;
    }
    if (e != ECONNREFUSED) {
        td_log(TD_LOG_ERR, "%s: %s", path, strerror(e));
        return -e;
    }
    td_log(TD_LOG_INFO, "removing stale socket %s", path);
    return unlink(path) < 0 ? -errno : 0;
}

static void close_listen_fd(uv_handle_t *h)
{
    close(listen_fd);
    listen_fd = -1;
}

int td_server_start(void)
{
    const char *path = td_cfg.socket_path;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        td_log(TD_LOG_ERR, "socket path too long (%zu bytes, at most %zu): %s", strlen(path),
               sizeof(sa.sun_path) - 1, path);
        return -ENAMETOOLONG;
    }
    int rc = check_existing(path);
    if (rc < 0)
        return rc;
    strcpy(sa.sun_path, path);
    listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const char *step = "socket";
    if (listen_fd < 0)
        goto fail;
    step = "bind";
    if (bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        goto fail;
    step = "chmod";
    if (chmod(path, td_cfg.socket_mode) < 0)
        goto fail;
    if (td_cfg.socket_group) {
        struct group *gr = getgrnam(td_cfg.socket_group);
        step = "--socket-group";
        if (!gr)
            errno = ENOENT;
        if (!gr || chown(path, (uid_t)-1, gr->gr_gid) < 0)
            goto fail;
    }
    step = "listen";
    if (listen(listen_fd, LISTEN_BACKLOG) < 0)
        goto fail;
    uv_poll_init(td_loop, &listen_poll, listen_fd);
    uv_timer_init(td_loop, &accept_retry);
    uv_poll_start(&listen_poll, UV_READABLE, on_listen_ready);
    listening = true;
    return 0;
fail:
    rc = -errno;
    td_log(TD_LOG_ERR, "cannot listen on %s: %s: %s", path, step, strerror(errno));
    if (listen_fd >= 0) {
        close(listen_fd);
        listen_fd = -1;
        if (strcmp(step, "socket") && strcmp(step, "bind"))
            unlink(path);
    }
    return rc;
}

void td_server_stop(void)
{
    if (listening) {
        listening = false;
        uv_close((uv_handle_t *)&accept_retry, NULL);
        uv_close((uv_handle_t *)&listen_poll, close_listen_fd);
        if (unlink(td_cfg.socket_path) < 0 && errno != ENOENT)
            td_log(TD_LOG_WARN, "cannot remove %s: %s", td_cfg.socket_path, strerror(errno));
    }
    for (struct td_conn *c = conns, *next; c; c = next) {
        next = c->next;
        maybe_close(c);
    }
}
