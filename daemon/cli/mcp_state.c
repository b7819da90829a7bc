/*
 * mcp_state.c - `toolexec mcp`'s session state (mcp_int.h): the tools/call
 * requests in flight and the tools/list requests waiting for their answer;
 * requests to the daemon, a call's cancel.
 */
#include <stdlib.h>
#include <string.h>

#include "mcp_int.h"

/* A copy of a request's context to keep past the message (dst's id is a
 * reference of its own). */
void mcp_reqctx_copy(struct mcp_reqctx *dst, const struct mcp_reqctx *src)
{
    *dst = *src;
    dst->id = json_incref(src->id);
    dst->subject = NULL;
}

struct mcp_call *mcp_call_by_batch(struct mcp *m, const char *batch)
{
    struct mcp_call *c = m->calls;
    while (c && (!batch || strcmp(c->batch, batch) != 0))
        c = c->next;
    return c;
}

struct mcp_call *mcp_call_by_id(struct mcp *m, void *stream, const json_t *id)
{
    struct mcp_call *c = m->calls;
    while (c && (c->req.stream != stream || !json_equal(c->req.id, id)))
        c = c->next;
    return c;
}

static void call_free(struct mcp_call *c)
{
    json_decref(c->progress_token);
    json_decref(c->elicit_id);
    json_decref(c->req.id);
    json_decref(c->result);
    json_decref(c->denied);
    json_decref(c->held);
    free(c->batch);
    free(c->bind);
    free(c->owner);
    free(c);
}

void mcp_call_remove(struct mcp *m, struct mcp_call *c)
{
    if (c->cancelled)
        mcp_route_drop(m, &c->req);
    struct mcp_call **p = &m->calls;
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    call_free(c);
}

/* The oldest tools/list waiting for its answer (removed from the queue;
 * the caller frees it), or NULL. */
struct mcp_listing *mcp_listing_pop(struct mcp *m)
{
    struct mcp_listing *l = m->listings;
    if (l) {
        m->listings = l->next;
        if (!m->listings)
            m->listings_tail = &m->listings;
    }
    return l;
}

void mcp_listing_free(struct mcp *m, struct mcp_listing *l)
{
    if (l->cancelled)
        mcp_route_drop(m, &l->req);
    json_decref(l->req.id);
    free(l);
}

/* Send a request to the daemon. A failure makes the session end with
 * CLI_EXIT_CONNECT (m->lost); the caller carries on. */
void mcp_send_daemon(struct mcp *m, json_t *req)
{
    if (m->lost)
        return;
    if (!req) {
        cli_err("mcp: out of memory");
        m->lost = CLI_EXIT_ERROR;
        return;
    }
    int rc = cli_send(m->cli, m->client, req);
    if (rc != CLI_EXIT_OK)
        m->lost = rc;
}

void mcp_cancel_call(struct mcp *m, struct mcp_call *c)
{
    if (c->cancelled)
        return;
    c->cancelled = true;
    if (c->elicit_id || c->held)
        return; /* its batch has completed, or never ran (mcp_toolinfo.c drops it) */
    json_t *req = json_pack("{s:s,s:s}", "op", "cancel", "batch", c->batch);
    mcp_send_daemon(m, req);
    json_decref(req);
}
