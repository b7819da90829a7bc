/*
 * mcp_modern.c - MCP 2026-07-28, the stateless revision (mcp_int.h): a
 * request's _meta (its version, the client's capabilities, its log level),
 * the methods server/discover and subscriptions/listen, logs bound to a
 * request. mcp_write.c shapes its results (resultType, serverInfo).
 *
 * A request is modern when its _meta names 2026-07-28, and server/discover
 * is modern whatever it carries; anything else is served as the session's
 * initialize chose (2024-11-05 to 2025-11-25), unchanged. Both can come on
 * one connection: each request is answered by its own.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_int.h"

/* How long a client may keep an answer: discover's changes with the binary
 * only; the tools list with a reload, which subscriptions/listen tells. */
#define MCP_DISCOVER_TTL_MS 3600000
#define MCP_TOOLS_TTL_MS 60000

/* Newest first; the legacy ones need initialize. */
const char *const mcp_versions[] = {MCP_MODERN_VERSION, "2025-11-25", "2025-06-18",
                                    "2025-03-26",       "2024-11-05", NULL};

/* v's entry in mcp_versions (static: it outlives the message), or NULL. */
const char *mcp_version_known(const char *v)
{
    for (const char *const *s = mcp_versions; v && *s; s++)
        if (strcmp(v, *s) == 0)
            return *s;
    return NULL;
}

static const char *const log_levels[] = {"debug",    "info",  "notice",    "warning", "error",
                                         "critical", "alert", "emergency", NULL};

static json_t *versions_json(void)
{
    json_t *a = json_array();
    for (const char *const *v = mcp_versions; a && *v; v++)
        json_array_append_new(a, json_string(*v));
    return a;
}

/* Form-mode elicitation: an elicitation object naming form, or naming
 * neither mode (2025-11-25: an empty object means form). */
static bool can_elicit_form(const json_t *caps)
{
    json_t *el = json_object_get(caps, "elicitation");
    return json_is_object(el) && (json_object_get(el, "form") || !json_object_get(el, "url"));
}

/* Reads the request's _meta into q. False when the request was answered
 * with an error for it. */
bool mcp_read_meta(struct mcp *m, struct mcp_reqctx *q, const json_t *params, const char *method)
{
    json_t *meta = json_object_get(params, "_meta");
    json_t *ver = json_object_get(meta, MCP_META_VERSION);
    bool discover = strcmp(method, "server/discover") == 0;
    if (!ver && !discover && q->version && strcmp(q->version, MCP_MODERN_VERSION) == 0) {
        /* the transport says 2026-07-28, the request does not */
        mcp_put_error(m, q, RPC_INVALID_PARAMS,
                      "Invalid params: _meta." MCP_META_VERSION " is required", NULL);
        return false;
    }
    if (!ver && !discover)
        return true; /* legacy: the session's revision */
    const char *v = ver ? json_string_value(ver) : MCP_MODERN_VERSION;
    if (!v) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS,
                      "Invalid params: _meta." MCP_META_VERSION ": expected a string", NULL);
        return false;
    }
    if (strcmp(v, MCP_MODERN_VERSION) != 0) {
        if (mcp_version_known(v) && !discover) {
            q->version = mcp_version_known(v); /* a legacy revision named: served as such */
            return true;
        }
        mcp_put_error(m, q, RPC_UNSUPPORTED_VERSION, "Unsupported protocol version",
                      json_pack("{s:o,s:s}", "supported", versions_json(), "requested", v));
        return false;
    }
    json_t *caps = json_object_get(meta, MCP_META_CAPS);
    if (ver && !json_is_object(caps)) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS,
                      "Invalid params: _meta." MCP_META_CAPS " is required (an object)", NULL);
        return false;
    }
    q->modern = true;
    q->version = MCP_MODERN_VERSION;
    q->elicitation = can_elicit_form(caps);
    q->tasks = json_is_object(json_object_get(json_object_get(caps, "extensions"), MCP_EXT_TASKS));
    q->log_level = MCP_LOG_NONE;
    json_t *lv = json_object_get(meta, MCP_META_LOGLEVEL);
    if (lv) {
        q->log_level = mcp_log_level_of(json_string_value(lv));
        if (q->log_level == MCP_LOG_NONE) {
            mcp_put_error(m, q, RPC_INVALID_PARAMS,
                          "Invalid params: _meta." MCP_META_LOGLEVEL ": " MCP_LOG_LEVELS_TEXT,
                          NULL);
            return false;
        }
    }
    return true;
}

int mcp_log_level_of(const char *name)
{
    int i = 0;
    while (name && log_levels[i] && strcmp(log_levels[i], name) != 0)
        i++;
    if (!name || !log_levels[i])
        return MCP_LOG_NONE;
    /* none of ours is above error: a level above it gets none */
    return i > MCP_LOG_ERROR ? MCP_LOG_ERROR + 1 : i;
}

void mcp_on_discover(struct mcp *m, const struct mcp_reqctx *q)
{
    mcp_put_result(m, q,
                   json_pack("{s:o,s:{s:{s:b},s:{},s:{s:{}}},s:i,s:s}", "supportedVersions",
                             versions_json(), "capabilities", "tools", "listChanged", 1, "logging",
                             "extensions", MCP_EXT_TASKS, "ttlMs", MCP_DISCOVER_TTL_MS,
                             "cacheScope", "public"));
}

/* A tools/list's result: modern, cacheable; private, as which tools a
 * client may call depends on who it is. */
json_t *mcp_list_result(const struct mcp_reqctx *req, const json_t *tools)
{
    json_t *r = req->modern ? json_pack("{s:o}", "tools", json_deep_copy(tools))
                            : json_pack("{s:O}", "tools", tools ? tools : json_null());
    if (r && req->modern) {
        mcp_toolinfo_declare(json_object_get(r, "tools"));
        json_object_set_new(r, "ttlMs", json_integer(MCP_TOOLS_TTL_MS));
        json_object_set_new(r, "cacheScope", json_string("private"));
    }
    return r;
}

/* ------------------------------------------------------------------------ */
/* subscriptions/listen */

static void sub_note(struct mcp *m, struct mcp_sub *sub, const char *method, json_t *params)
{
    if (params)
        json_object_set_new(params, "_meta",
                            json_pack("{s:O}", MCP_META_SUBSCRIPTION, sub->req.id));
    mcp_put_message(
        m, json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", method, "params", params),
        &sub->req);
}

static void sub_unlink(struct mcp *m, struct mcp_sub *sub)
{
    struct mcp_sub **p = &m->subs;
    while (*p != sub)
        p = &(*p)->next;
    *p = sub->next;
    for (struct mcp_listing *l = m->listings; l; l = l->next)
        if (l->sub == sub)
            l->sub = NULL;
    json_decref(sub->req.id);
    free(sub);
}

void mcp_listen_acked(struct mcp *m, struct mcp_sub *sub)
{
    sub->acked = true;
    json_t *kinds = json_object();
    if (kinds && sub->tools)
        json_object_set_new(kinds, "toolsListChanged", json_true());
    sub_note(m, sub, "notifications/subscriptions/acknowledged",
             json_pack("{s:o}", "notifications", kinds));
}

void mcp_listen_failed(struct mcp *m, struct mcp_sub *sub, const char *message)
{
    mcp_put_error(m, &sub->req, RPC_INTERNAL_ERROR, message, NULL);
    sub_unlink(m, sub);
}

void mcp_on_listen(struct mcp *m, const struct mcp_reqctx *q, const json_t *params)
{
    json_t *want = json_object_get(params, "notifications");
    if (!json_is_object(want)) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS,
                      "Invalid params: notifications: expected an object (the filter)", NULL);
        return;
    }
    for (struct mcp_sub *s = m->subs; s; s = s->next)
        if (s->req.stream == q->stream && json_equal(s->req.id, q->id)) {
            mcp_put_error(m, q, RPC_INVALID_REQUEST,
                          "the request id is in use by a subscription in progress", NULL);
            return;
        }
    struct mcp_sub *sub = calloc(1, sizeof(*sub));
    if (!sub) {
        mcp_put_error(m, q, RPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    mcp_reqctx_copy(&sub->req, q);
    sub->tools = json_is_true(json_object_get(want, "toolsListChanged"));
    sub->next = m->subs;
    m->subs = sub;
    if (!sub->tools) {
        mcp_listen_acked(m, sub); /* nothing it asked for can come */
        return;
    }
    /* The daemon tells of reloads once it watches: acknowledged when it has
     * answered, so no reload after the acknowledgement goes unseen. */
    struct mcp_listing *l = calloc(1, sizeof(*l));
    json_t *req = json_pack("{s:s,s:s,s:b}", "op", "tools", "format", "mcp", "watch", 1);
    if (!l || !req) {
        free(l);
        json_decref(req);
        mcp_listen_failed(m, sub, "out of memory");
        return;
    }
    mcp_reqctx_copy(&l->req, q);
    l->silent = true;
    l->sub = sub;
    if (!mcp_listing_send(m, l, req)) {
        mcp_listing_free(m, l);
        mcp_listen_failed(m, sub, MCP_SEND_FULL);
    }
    json_decref(req);
}

/* notifications/cancelled for a listen: it ends, with no response. */
bool mcp_listen_cancel(struct mcp *m, void *stream, const json_t *id)
{
    for (struct mcp_sub *s = m->subs; s; s = s->next)
        if (s->req.stream == stream && json_equal(s->req.id, id)) {
            if (m->sink->dropped)
                m->sink->dropped(m->sink_ctx, &s->req);
            sub_unlink(m, s);
            return true;
        }
    return false;
}

/* The daemon reloaded its tools: to the session that listed them under
 * 2025, and to each listen that asked. */
void mcp_tools_changed(struct mcp *m, const json_t *ev)
{
    (void)ev;
    if (m->legacy_watch)
        mcp_put_message(
            m,
            json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", "notifications/tools/list_changed"),
            NULL);
    for (struct mcp_sub *s = m->subs; s; s = s->next)
        if (s->acked && s->tools)
            sub_note(m, s, "notifications/tools/list_changed", json_object());
}

/* Subscriptions end (all, or those of stream): graceful, each gets its
 * response (the server ends them); else none (the client is gone). */
void mcp_subs_end(struct mcp *m, bool all, void *stream, bool graceful)
{
    for (struct mcp_sub *s = m->subs, *next; s; s = next) {
        next = s->next;
        if (!all && s->req.stream != stream)
            continue;
        if (graceful)
            mcp_put_result(m, &s->req,
                           json_pack("{s:{s:O}}", "_meta", MCP_META_SUBSCRIPTION, s->req.id));
        else if (m->sink->dropped)
            m->sink->dropped(m->sink_ctx, &s->req);
        sub_unlink(m, s);
    }
}

/* ------------------------------------------------------------------------ */
/* Logs: notifications/message bound to a request, for a request that asked
 * for them (a modern one's logLevel, a 2025 session's logging/setLevel),
 * from that level on. */

void mcp_log(struct mcp *m, const struct mcp_reqctx *req, int level, const char *fmt, ...)
{
    if (req->log_level == MCP_LOG_NONE || level < req->log_level)
        return;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    mcp_log_as(m, req, level, "toolexec", text);
}

void mcp_log_as(struct mcp *m, const struct mcp_reqctx *req, int level, const char *logger,
                const char *text)
{
    if (req->log_level == MCP_LOG_NONE || level < req->log_level)
        return;
    json_t *data = json_string(text);
    if (!data)
        data = json_string("(a message not valid UTF-8)");
    mcp_put_message(m,
                    json_pack("{s:s,s:s,s:{s:s,s:s,s:o}}", "jsonrpc", "2.0", "method",
                              "notifications/message", "params", "level", log_levels[level],
                              "logger", logger ? logger : "toolexec", "data", data),
                    req);
}
