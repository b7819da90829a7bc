/*
 * mcp_toolinfo.c - what the daemon's listing says of each tool that a call
 * over MCP needs (mcp_int.h): whether its ok value is content blocks
 * (_meta "toolexecd/content", mcp_content.c) and its task support
 * (_meta "toolexecd/taskSupport", MCP's execution.taskSupport); and the
 * calls held until that is known.
 *
 * The listing is the core's own on its daemon connection: asked at the
 * first tools/call, watched, asked again after each reload. A call waits
 * for it (held: its run request not yet sent), once, then each call is
 * decided at once: a tool whose task support is "required" runs only as a
 * task, so a request of a client without the tasks extension is refused
 * (-32021) before anything runs, and a client with it gets a task at once;
 * "forbidden" never becomes one. A call ending between a reload and the new
 * listing is read by the old one. A daemon that never answers the listing
 * fails each held call after --tools-wait (mcp_toolinfo_expire, from
 * mcp_heartbeats), never holding it for good.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_int.h"

#define META_CONTENT "toolexecd/content"
#define META_TASKS "toolexecd/taskSupport"
#define RPC_MISSING_CAPABILITY (-32021) /* 2026-07-28: a client capability it lacks */

/* Ask the daemon for its tools (watching its reloads) without a response
 * to anyone: the tools event that answers comes to mcp_toolinfo_learn(). */
static void ask_listing(struct mcp *m)
{
    struct mcp_listing *l = calloc(1, sizeof(*l));
    json_t *req = json_pack("{s:s,s:s,s:b}", "op", "tools", "format", "mcp", "watch", 1);
    if (!l || !req) {
        free(l);
        json_decref(req);
        mcp_toolinfo_learn(m, NULL); /* the held calls fail, not hang */
        return;
    }
    l->req.log_level = MCP_LOG_NONE;
    l->silent = true;
    l->info = true;
    *m->listings_tail = l;
    m->listings_tail = &l->next;
    m->info_asked = true;
    mcp_send_daemon(m, req);
    json_decref(req);
}

void mcp_toolinfo_reloaded(struct mcp *m)
{
    if (m->info_asked)
        ask_listing(m);
}

static const char *meta_of(const struct mcp *m, const char *name, const char *key)
{
    return name ? json_string_value(json_object_get(json_object_get(m->tool_meta, name), key))
                : NULL;
}

bool mcp_tool_blocks(const struct mcp *m, const char *name)
{
    const char *how = meta_of(m, name, META_CONTENT);
    return how && strcmp(how, "blocks") == 0;
}

const char *mcp_tool_tasks(const struct mcp *m, const char *name)
{
    return meta_of(m, name, META_TASKS);
}

/* A tools/list result's tools for a 2026-07-28 request: each with its
 * task support as MCP has it (execution.taskSupport). */
void mcp_toolinfo_declare(json_t *tools)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        json_t *ts = json_object_get(json_object_get(t, "_meta"), META_TASKS);
        if (json_is_string(ts))
            json_object_set_new(t, "execution", json_pack("{s:O}", "taskSupport", ts));
    }
}

/* Call c, known now: refused, or its run request (stolen) sent. */
static void dispatch(struct mcp *m, struct mcp_call *c, json_t *run)
{
    const char *name = json_string_value(
        json_object_get(json_array_get(json_object_get(run, "calls"), 0), "name"));
    const char *support = mcp_tool_tasks(m, name);
    if (c->cancelled) {
        json_decref(run); /* cancelled while held: it never ran */
        mcp_call_remove(m, c);
        return;
    }
    if (support && strcmp(support, "required") == 0 && !c->owner) {
        char msg[400];
        snprintf(msg, sizeof(msg),
                 "Missing required client capability: the tool %.100s runs only as a task (the "
                 "tasks extension, " MCP_EXT_TASKS ")",
                 name);
        mcp_put_error(
            m, &c->req, RPC_MISSING_CAPABILITY, msg,
            json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions", MCP_EXT_TASKS));
        json_decref(run);
        mcp_call_remove(m, c);
        return;
    }
    if (mcp_run_call(m, c, run) == -ENOBUFS) { /* sent, or held for a batch slot */
        mcp_call_remove(m, c);                 /* answered */
        return;
    }
    mcp_task_started(m, c, support);
}

void mcp_call_start(struct mcp *m, struct mcp_call *c, json_t *run)
{
    bool known = m->tool_meta != NULL;
    if (!known) {
        c->held = run;
        c->awaiting_tools = true;
    }
    /* asked even when a client's tools/list told us already: this one
     * watches the reloads (failing, it answers the held calls, c too) */
    if (!m->info_asked)
        ask_listing(m);
    if (known)
        dispatch(m, c, run);
}

int mcp_toolinfo_expire(struct mcp *m)
{
    long long wait = m->tools_wait_ms > 0 ? m->tools_wait_ms : MCP_TOOLS_WAIT_MS;
    long long now = cli_now_ms(), next = -1;
    for (struct mcp_call *c = m->calls, *after; c; c = after) {
        after = c->next;
        if (!c->held || !c->awaiting_tools)
            continue;
        long long due = c->started_ms + wait;
        if (due > now) {
            if (next < 0 || due - now < next)
                next = due - now;
            continue;
        }
        json_decref(c->held);
        c->held = NULL;
        c->awaiting_tools = false;
        if (!c->cancelled) {
            char msg[200];
            snprintf(msg, sizeof(msg),
                     "toolexecd did not answer the request for its tool listing within %lld s "
                     "(--tools-wait), which a call needs: the call was not run",
                     wait / 1000);
            mcp_put_error(m, &c->req, RPC_INTERNAL_ERROR, msg,
                          json_pack("{s:s,s:I}", "reason", "daemon_tools_listing_timeout",
                                    "waited_ms", wait));
        }
        mcp_call_remove(m, c);
    }
    return next > 86400000 ? 86400000 : (int)next;
}

void mcp_toolinfo_learn(struct mcp *m, const json_t *tools)
{
    json_t *metas = json_object(), *t;
    size_t i;
    json_array_foreach(tools, i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *meta = json_object_get(t, "_meta");
        if (metas && name && json_is_object(meta))
            json_object_set(metas, name, meta);
    }
    if (metas && tools) {
        json_decref(m->tool_meta);
        m->tool_meta = metas;
    } else {
        json_decref(metas);
    }
    /* the held calls, in the order they came (the list is newest first) */
    for (;;) {
        struct mcp_call *c = NULL;
        for (struct mcp_call *x = m->calls; x; x = x->next)
            if (x->held && x->awaiting_tools)
                c = x;
        if (!c)
            break;
        json_t *run = c->held;
        c->held = NULL;
        c->awaiting_tools = false;
        if (m->tool_meta) {
            dispatch(m, c, run);
        } else {
            json_decref(run);
            if (!c->cancelled)
                mcp_put_error(m, &c->req, RPC_INTERNAL_ERROR,
                              "toolexecd did not list its tools, which a call needs", NULL);
            mcp_call_remove(m, c);
        }
    }
}
