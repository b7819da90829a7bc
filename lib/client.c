/*
 * client.c - a small blocking client for toolexecd's Unix socket: one JSON
 * object per line in each direction.
 */
#include <errno.h>
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

int te_client_connect(const char *path, te_client **out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    *out = NULL;
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
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
    te_lines_init(&c->in, TE_CLIENT_LINE_MAX);
    *out = c;
    return 0;
}

int te_client_send(te_client *c, const json_t *req)
{
    size_t left;
    char *s = te_lines_dump(req, &left);
    if (!s)
        return -ENOMEM;
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
