/*
 * mcp_http_session.c - the sessions of Streamable HTTP as revisions
 * 2025-03-26 to 2025-11-25 have them (mcp_http_int.h): an initialize
 * request mints one, its answer carries the id in Mcp-Session-Id, every
 * later request of the client carries it back; an unknown or ended id is
 * 404, so the client starts again. DELETE ends one; so does being idle
 * (no request in flight, no GET stream open) for --session-idle seconds.
 * At most --sessions exist at once: an initialize past them is refused
 * with 503 until one ends. 2026-07-28 has no sessions.
 *
 * The id is 128 bits from the kernel's random source: it is all that
 * tells one client's session from another's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_http_int.h"
#include "randhex.h"

struct mcp_http_session *mcp_http_session_new(struct mcp_http *h)
{
    mcp_http_sessions_expire(h, cli_now_ms());
    if (h->nsessions >= h->o.sessions_max)
        return NULL;
    struct mcp_http_session *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (te_random_hex(s->id, MCP_HTTP_SESSION_ID_LEN / 2) < 0) {
        free(s);
        return NULL;
    }
    s->h = h;
    s->used_ms = cli_now_ms();
    s->next = h->sessions;
    h->sessions = s;
    h->nsessions++;
    return s;
}

/* The session a request names; when none, *s is NULL and the answer (400
 * or 404) is queued. */
enum MHD_Result mcp_http_session_find(struct mcp_http *h, struct MHD_Connection *conn,
                                      struct mcp_http_session **s)
{
    const char *id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Session-Id");
    *s = NULL;
    if (!id)
        return mcp_http_reply(conn, MHD_HTTP_BAD_REQUEST,
                              mcp_http_rpc_error(NULL, -32600,
                                                 "Bad Request: no Mcp-Session-Id; initialize "
                                                 "first, or say MCP-Protocol-Version 2026-07-28",
                                                 NULL),
                              NULL);
    for (struct mcp_http_session *p = h->sessions; p; p = p->next)
        if (strcmp(p->id, id) == 0) {
            *s = p;
            return MHD_YES;
        }
    return mcp_http_reply(conn, MHD_HTTP_NOT_FOUND,
                          mcp_http_rpc_error(NULL, -32001, "Session not found", NULL), NULL);
}

void *mcp_http_session_data(const struct mcp_http_session *s)
{
    return s->data;
}

void mcp_http_session_set_data(struct mcp_http_session *s, void *data)
{
    s->data = data;
}

void mcp_http_session_end(struct mcp_http_session *s)
{
    struct mcp_http *h = s->h;
    for (struct mcp_http_session **p = &h->sessions; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    h->nsessions--;
    /* The core cancels what runs in it first: it may still ask which
     * session an exchange is of. */
    h->core->session_end(h->ctx, s);
    for (struct mcp_http_x *x = h->xs; x; x = x->next)
        if (x->session == s) {
            if (x->get_stream)
                mcp_http_x_end(x);
            x->session = NULL;
        }
    free(s->subject);
    free(s);
}

/* End the sessions idle too long; returns the ms until the next may be
 * (-1: none can). */
int mcp_http_sessions_expire(struct mcp_http *h, long long now)
{
    long long idle = (long long)h->o.session_idle_s * 1000, next = -1;
    for (struct mcp_http_session *s = h->sessions, *n; s; s = n) {
        n = s->next;
        if (s->busy || s->stream)
            continue;
        long long due = s->used_ms + idle - now;
        if (due <= 0) {
            mcp_http_session_end(s);
            continue;
        }
        if (next < 0 || due < next)
            next = due;
    }
    return next < 0 ? -1 : (int)(next > 60000 ? 60000 : next);
}
