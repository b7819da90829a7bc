/*
 * mcp_core.c - the MCP core as a transport drives it (mcp_int.h tells how):
 * its life, the daemon connection's events, the end of the client's input
 * or of one stream of it.
 */
#include <stdlib.h>

#include "mcp_int.h"

/* The host is gone: cancel what runs. Answers owed to tools/list still go
 * out, if anyone reads them. */
void mcp_end_of_input(struct mcp *m)
{
    m->eof = true;
    mcp_subs_end(m, true, NULL, false);
    for (struct mcp_call *c = m->calls; c; c = c->next)
        mcp_cancel_call(m, c);
    /* calls waiting for the host's answer to a question have no batch */
    for (struct mcp_call *c = m->calls, *next; c; c = next) {
        next = c->next;
        if (c->elicit_id)
            mcp_call_remove(m, c);
    }
}

/* The reader of a stream is gone: what runs for it is cancelled, and what
 * waits for the client's answer on it is over. */
void mcp_stream_gone(struct mcp *m, void *stream)
{
    for (struct mcp_call *c = m->calls; c; c = c->next)
        if (c->req.stream == stream)
            mcp_cancel_call(m, c);
    for (struct mcp_call *c = m->calls, *next; c; c = next) {
        next = c->next;
        if (c->req.stream == stream && c->elicit_id)
            mcp_call_remove(m, c);
    }
    for (struct mcp_listing *l = m->listings; l; l = l->next)
        if (l->req.stream == stream && !l->silent)
            l->cancelled = true;
    mcp_subs_end(m, false, stream, false);
}

/* Nothing owed: no call, no tools/list to answer (a silent listing, the
 * core's own or a listen's, is owed to no one: a daemon that never answers
 * it does not hold the end). */
bool mcp_idle(const struct mcp *m)
{
    for (const struct mcp_listing *l = m->listings; l; l = l->next)
        if (!l->silent)
            return false;
    return !m->calls;
}

int mcp_daemon_fd(const struct mcp *m)
{
    return te_client_fd(m->client);
}

/* The daemon's socket is readable: read its events, every whole one
 * buffered. Returns m->lost: 0, or an exit code once the connection failed. */
int mcp_daemon_readable(struct mcp *m)
{
    do
        m->lost = mcp_read_event(m);
    while (!m->lost && te_client_pending(m->client));
    return m->lost;
}

void mcp_core_init(struct mcp *m, struct cli *cli, te_client *client,
                   const struct mcp_sink_ops *sink, void *sink_ctx)
{
    m->cli = cli;
    m->client = client;
    m->sink = sink;
    m->sink_ctx = sink_ctx;
    m->listings_tail = &m->listings;
    mcp_state_init(m);
    mcp_tasks_defaults(m);
    m->task_capture = mcp_task_capture;
    m->log_level = MCP_LOG_NONE;
}

/* What is due now done, heartbeats, the tasks' expiry and the calls held
 * too long for the daemon's listing; ms until the
 * next (-1: none). A transport calls it before it waits. */
int mcp_heartbeats(struct mcp *m)
{
    mcp_start_held(m);
    int next = mcp_progress_heartbeats(m), tasks = mcp_tasks_tick(m);
    int held = mcp_toolinfo_expire(m);
    if (tasks >= 0 && (next < 0 || tasks < next))
        next = tasks;
    if (held >= 0 && (next < 0 || held < next))
        next = held;
    return next;
}

/* Frees what the session holds; the daemon connection stays the caller's. */
void mcp_core_free(struct mcp *m)
{
    mcp_subs_end(m, true, NULL, false);
    mcp_tasks_free(m);
    json_decref(m->tool_meta);
    m->tool_meta = NULL;
    while (m->calls)
        mcp_call_remove(m, m->calls);
    struct mcp_listing *l;
    while ((l = mcp_listing_pop(m)))
        mcp_listing_free(m, l);
    while (m->routes) {
        struct mcp_route *r = m->routes;
        m->routes = r->next;
        mcp_rb_release(m, r->rb);
        json_decref(r->id);
        free(r);
    }
}
