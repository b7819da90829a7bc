/*
 * mcp_state.c - `toolexec mcp`'s session state (mcp_int.h): the tools/call
 * requests in flight and the tools/list requests waiting for their answer;
 * requests to the daemon, a call's cancel.
 *
 * The daemon runs at most --max-client-batches batches for one connection
 * and refuses the next; a core runs its calls on one connection (its
 * session's state, tasks and questions stay in one place), so a call past
 * max_batches is held here, in order, and its run request sent when a
 * batch ends.
 */
#include <errno.h>
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
    json_decref(c->policy);
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
    if (c->running)
        m->nbatches--;
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

/* Send a request to the daemon. -ENOBUFS: a non-blocking connection's
 * queue is full (the daemon does not read it), that request alone fails.
 * Any other failure makes the session end with CLI_EXIT_CONNECT (m->lost);
 * the caller carries on. */
int mcp_send_daemon(struct mcp *m, json_t *req)
{
    if (m->lost)
        return -EPIPE;
    if (!req) {
        cli_err("mcp: out of memory");
        m->lost = CLI_EXIT_ERROR;
        return -ENOMEM;
    }
    int rc = te_client_send(m->client, req);
    if (rc < 0 && rc != -ENOBUFS)
        m->lost = cli_send_failed(m->cli, rc);
    return rc;
}

/* c's run request (stolen): sent while a batch slot is free, else held. */
int mcp_run_call(struct mcp *m, struct mcp_call *c, json_t *req)
{
    if (m->max_batches && m->nbatches >= m->max_batches) {
        c->held = req;
        return 0;
    }
    int rc = mcp_send_daemon(m, req);
    json_decref(req);
    if (rc == 0) {
        c->running = true;
        m->nbatches++;
    }
    if (rc == -ENOBUFS)
        mcp_put_error(m, &c->req, RPC_INTERNAL_ERROR, MCP_SEND_FULL,
                      json_pack("{s:s}", "reason", "daemon_send_queue_full"));
    return rc;
}

/* Send l's tools request (req, not stolen); l then waits for its answer,
 * which comes in order. false: the queue was full (-ENOBUFS), l is not
 * queued (the caller answers and frees it): queued, it would take the next
 * listing's answer. */
bool mcp_listing_send(struct mcp *m, struct mcp_listing *l, json_t *req)
{
    if (mcp_send_daemon(m, req) == -ENOBUFS)
        return false;
    *m->listings_tail = l; /* sent, or the session is lost: mcp_fail_all() answers it */
    m->listings_tail = &l->next;
    return true;
}

/* The oldest held call, or NULL (calls are kept newest first). */
static struct mcp_call *oldest_held(struct mcp *m)
{
    struct mcp_call *held = NULL;
    for (struct mcp_call *c = m->calls; c; c = c->next)
        if (c->held && !c->awaiting_tools)
            held = c;
    return held;
}

/* Free batch slots to the held calls, oldest first; held calls cancelled
 * meanwhile go without a word to the daemon. */
void mcp_start_held(struct mcp *m)
{
    for (struct mcp_call *c = m->calls; c; c = c->next)
        if (c->running && c->elicit_id) { /* its batch is over: it waits for the host */
            c->running = false;
            m->nbatches--;
        }
    for (struct mcp_call *c = m->calls, *next; c; c = next) {
        next = c->next;
        if (c->held && c->cancelled)
            mcp_call_remove(m, c);
    }
    struct mcp_call *c;
    while (!m->lost && (!m->max_batches || m->nbatches < m->max_batches) && (c = oldest_held(m))) {
        json_t *req = c->held;
        c->held = NULL;
        if (mcp_run_call(m, c, req) == -ENOBUFS)
            mcp_call_remove(m, c);
    }
}

void mcp_cancel_call(struct mcp *m, struct mcp_call *c)
{
    if (c->cancelled)
        return;
    c->cancelled = true;
    if (c->elicit_id || c->held)
        return; /* its batch has completed, or never started (held) */
    /* a cancel that finds the queue full is lost: the call runs to its end
     * (its timeout), and its answer is dropped */
    json_t *req = json_pack("{s:s,s:s}", "op", "cancel", "batch", c->batch);
    mcp_send_daemon(m, req);
    json_decref(req);
}
