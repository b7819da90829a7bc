/*
 * mcp_http_conn.c - a connection's own state (mcp_http_int.h): how long
 * its request has been arriving; and its request's framing.
 *
 * libmicrohttpd's --http-timeout is an idle timeout: any byte restarts it.
 * A client trickling its request a byte at a time (slowloris) is never
 * idle, and would hold its connection, one of --connections, for as long
 * as it likes. So a request must also arrive whole (line, headers, body)
 * within twice the timeout of the connection waiting for it (opened, or
 * its last request done): at most one timeout idle, which MHD allows, then
 * at least one to send it. Past that the connection is shut down, and MHD
 * closes it. A request being answered (a call waiting, a stream) is not
 * arriving: only the timeouts of mcp_http_stream.c apply to it.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "mcp_http_int.h"

struct mcp_http_conn {
    struct mcp_http *h;
    int fd;
    bool whole;         /* its request has arrived: being answered */
    bool cut;           /* shut down, MHD to close it */
    long long since_ms; /* waiting for its request since */
    struct mcp_http_conn *prev, *next;
};

/* The scan is due no later than k's deadline: a loop round looks at no
 * connection before the earliest may be due (deadlines only move later). */
static void due_by(struct mcp_http *h, const struct mcp_http_conn *k)
{
    long long at = k->since_ms + 2000LL * h->o.timeout_s;
    if (!h->conns_due_ms || at < h->conns_due_ms)
        h->conns_due_ms = at;
}

void mcp_http_conn_opened(struct mcp_http *h, struct MHD_Connection *c, void **ctx)
{
    struct mcp_http_conn *k = calloc(1, sizeof(*k));
    *ctx = k;
    if (!k)
        return; /* then only MHD's idle timeout holds for it */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    k->fd = ci ? ci->connect_fd : -1;
    k->h = h;
    k->since_ms = cli_now_ms();
    due_by(h, k);
    k->next = h->conns;
    if (h->conns)
        h->conns->prev = k;
    h->conns = k;
}

void mcp_http_conn_closed(struct mcp_http *h, void **ctx)
{
    struct mcp_http_conn *k = *ctx;
    *ctx = NULL;
    if (!k)
        return;
    if (k->prev)
        k->prev->next = k->next;
    else
        h->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    free(k);
}

static struct mcp_http_conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void mcp_http_conn_whole(struct MHD_Connection *c)
{
    struct mcp_http_conn *k = conn_of(c);
    if (k)
        k->whole = true;
}

void mcp_http_conn_waiting(struct MHD_Connection *c)
{
    struct mcp_http_conn *k = conn_of(c);
    if (k) {
        k->whole = false;
        k->since_ms = cli_now_ms();
        due_by(k->h, k);
    }
}

int mcp_http_conns_cut(struct mcp_http *h, long long now)
{
    if (!h->conns_due_ms)
        return -1;
    if (now < h->conns_due_ms)
        return h->conns_due_ms - now > 0x7fffffff ? 0x7fffffff : (int)(h->conns_due_ms - now);
    long long allowed = 2000LL * h->o.timeout_s, due = -1;
    for (struct mcp_http_conn *k = h->conns; k; k = k->next) {
        if (k->whole || k->cut || k->fd < 0)
            continue;
        long long left = k->since_ms + allowed - now;
        if (left <= 0) {
            shutdown(k->fd, SHUT_RDWR); /* MHD sees the end, and closes it */
            k->cut = true;
        } else if (due < 0 || left < due) {
            due = left;
        }
    }
    h->conns_due_ms = due < 0 ? 0 : now + due;
    return due > 0x7fffffff ? 0x7fffffff : (int)due;
}
/* One Content-Length, and not beside Transfer-Encoding: else two readers
 * of the stream (a proxy in front, and MHD, which takes the first length)
 * may see two different bodies. */
static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind, (void)value;
    unsigned *n = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        n[0]++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
        n[1]++;
    return MHD_YES;
}

bool mcp_http_conn_framing_ok(struct MHD_Connection *c)
{
    unsigned n[2] = {0, 0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_length, n);
    return n[0] + n[1] <= 1;
}
