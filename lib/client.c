/*
 * client.c - a small client for toolexecd's Unix socket: one JSON object per
 * line in each direction. Blocking by default (the CLI, tests); a
 * non-blocking one (te_client_connect_nb) is for a poll loop that must
 * never wait on the daemon: a partial line, a full socket buffer and a full
 * listen backlog each give an error code at once instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "toolexec.h"

/* Longest event line accepted; the daemon's own content limit plus room for
 * the JSON around it. */
#define TE_CLIENT_LINE_MAX (64u * 1024u * 1024u)

/* Bytes read from the socket at once. */
#define TE_CLIENT_READ 65536

struct te_client {
    int fd;
    te_lines in;         /* the event line being read */
    char *rbuf;          /* TE_CLIENT_READ bytes read, ... */
    size_t rstart, rlen; /* ... of which rbuf[rstart, rlen) are not fed yet */
    bool nb;             /* non-blocking: the rest below is used */
    char *out;           /* what a send left unsent, ... */
    size_t ostart, olen; /* ... out[ostart, olen), sent by te_client_flush() */
    size_t omax;         /* queued bytes past which a send is refused */
};

int te_default_socket_path(char *buf, size_t len)
{
    int n;
    if (geteuid() == 0) {
        n = snprintf(buf, len, "/run/toolexecd/toolexecd.sock");
    } else {
        const char *rt = getenv("XDG_RUNTIME_DIR");
        if (!rt || !*rt)
            return -ENOENT;
        n = snprintf(buf, len, "%s/toolexecd.sock", rt);
    }
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int connect_fd(const char *path, bool nb, te_client **out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    *out = NULL;
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nb ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -errno;
    /* Non-blocking, a Unix socket's connect never is in progress: it is
     * made, or fails (EAGAIN: the listener's backlog is full). */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    te_client *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    c->rbuf = malloc(TE_CLIENT_READ);
    if (!c->rbuf) {
        close(fd);
        free(c);
        return -ENOMEM;
    }
    c->fd = fd;
    c->nb = nb;
    te_lines_init(&c->in, TE_CLIENT_LINE_MAX);
    *out = c;
    return 0;
}

int te_client_connect(const char *path, te_client **out)
{
    return connect_fd(path, false, out);
}

int te_client_connect_nb(const char *path, size_t queue_max, te_client **out)
{
    int rc = connect_fd(path, true, out);
    if (rc == 0)
        (*out)->omax = queue_max;
    return rc;
}

/* Write out[ostart, olen) while the socket takes it. */
int te_client_flush(te_client *c)
{
    while (c->ostart < c->olen) {
        ssize_t w = send(c->fd, c->out + c->ostart, c->olen - c->ostart, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w < 0)
            return -errno;
        c->ostart += (size_t)w;
    }
    free(c->out);
    c->out = NULL;
    c->ostart = c->olen = 0;
    return 0;
}

bool te_client_want_write(const te_client *c)
{
    return c->olen > c->ostart;
}

/* Non-blocking: the line after what is queued, written as far as the
 * socket takes it; -ENOBUFS (nothing of it queued) past omax. A line alone
 * longer than omax is taken when nothing waits before it. */
static int send_nb(te_client *c, char *s, size_t len)
{
    size_t queued = c->olen - c->ostart;
    if (queued && queued + len > c->omax)
        return -ENOBUFS;
    if (c->ostart) { /* the sent part goes: the queue starts at 0 */
        memmove(c->out, c->out + c->ostart, queued);
        c->ostart = 0;
        c->olen = queued;
    }
    char *grown = realloc(c->out, queued + len);
    if (!grown)
        return -ENOMEM;
    memcpy(grown + queued, s, len);
    c->out = grown;
    c->olen = queued + len;
    return te_client_flush(c);
}

int te_client_send(te_client *c, const json_t *req)
{
    size_t left;
    char *s = te_lines_dump(req, &left);
    if (!s)
        return -ENOMEM;
    if (c->nb) {
        int rc = send_nb(c, s, left);
        free(s);
        return rc;
    }
    const char *p = s;
    int rc = 0;
    while (left) {
        ssize_t w = send(c->fd, p, left, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = -errno;
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    free(s);
    return rc;
}

int te_client_shutdown(te_client *c)
{
    return shutdown(c->fd, SHUT_WR) < 0 ? -errno : 0;
}

int te_client_recv(te_client *c, json_t **event)
{
    *event = NULL;
    for (;;) {
        size_t used;
        int rc = te_lines_feed(&c->in, c->rbuf + c->rstart, c->rlen - c->rstart, &used);
        c->rstart += used;
        if (rc == TE_LINES_LINE) {
            size_t len;
            const char *line = te_lines_line(&c->in, &len);
            json_error_t jerr;
            json_t *ev = te_json_loadb(line, len, 0, &jerr);
            te_lines_next(&c->in);
            if (!json_is_object(ev)) {
                json_decref(ev);
                return -EBADMSG;
            }
            *event = ev;
            return 0;
        }
        if (rc < 0)
            return rc; /* -EMSGSIZE: the line is skipped; -ENOMEM */
        ssize_t n = read(c->fd, c->rbuf, TE_CLIENT_READ);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && c->nb && (errno == EAGAIN || errno == EWOULDBLOCK))
            return -EAGAIN; /* what was read stays in c->in */
        if (n < 0)
            return -errno;
        if (n == 0)
            return -ENODATA;
        c->rstart = 0;
        c->rlen = (size_t)n;
    }
}

void te_client_close(te_client *c)
{
    if (!c)
        return;
    close(c->fd);
    te_lines_free(&c->in);
    free(c->rbuf);
    free(c->out);
    free(c);
}

int te_client_fd(const te_client *c)
{
    return c->fd;
}

bool te_client_pending(const te_client *c)
{
    return c->rlen > c->rstart && memchr(c->rbuf + c->rstart, '\n', c->rlen - c->rstart) != NULL;
}
