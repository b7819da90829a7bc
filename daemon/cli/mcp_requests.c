/*
 * mcp_requests.c - what the client sends to `toolexec mcp` (mcp_int.h),
 * whatever the transport: a JSON-RPC request, notification or response, or
 * a batch of them; the requests initialize, ping, logging/setLevel,
 * tools/list and tools/call, and notifications/cancelled.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp_int.h"

#ifndef TE_CLI_VERSION
#define TE_CLI_VERSION "unknown"
#endif

/* Characters of a request id kept in a batch id, for people reading tail. */
#define MCP_BATCH_ID_CHARS 40

static bool is_id(const json_t *id)
{
    return json_is_string(id) || json_is_number(id);
}

/* "mcp-N-ID": N counts the session's calls, so the id is unique whatever
 * the client's ids; ID (cut, odd characters as '_') lets a person reading
 * `toolexec tail` match the batch to the host's request. */
static char *batch_id_for(struct mcp *m, const json_t *id)
{
    char *text = json_is_string(id) ? strdup(json_string_value(id))
                                    : te_json_dumps(id, JSON_ENCODE_ANY, NULL);
    if (!text)
        return NULL;
    size_t n = 0;
    for (; text[n] && n < MCP_BATCH_ID_CHARS; n++) {
        char ch = text[n];
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == ':';
        if (!plain)
            text[n] = '_';
    }
    text[n] = '\0';
    char *batch = NULL;
    if (asprintf(&batch, "mcp-%llu-%s", ++m->seq, text) < 0)
        batch = NULL;
    free(text);
    return batch;
}

static void on_initialize(struct mcp *m, const struct mcp_reqctx *q, const json_t *params)
{
    /* initialize is the legacy revisions' handshake: a client asking for
     * one this server does not know (2026-07-28 included) is offered the
     * newest of them */
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    const char *version = mcp_versions[1];
    for (const char *const *v = mcp_versions + 1; asked && *v; v++)
        if (strcmp(asked, *v) == 0)
            version = *v;
    m->version = version;
    m->elicitation =
        json_is_object(json_object_get(json_object_get(params, "capabilities"), "elicitation"));
    mcp_put_result(m, q,
                   json_pack("{s:s,s:{s:{s:b},s:{}},s:{s:s,s:s}}", "protocolVersion", version,
                             "capabilities", "tools", "listChanged", 1, "logging", "serverInfo",
                             "name", "toolexec", "version", TE_CLI_VERSION));
}

/* 2025's logging/setLevel: the session's calls log from that level on
 * (the front's own notes, and what a tool says with its progress). */
static void on_set_level(struct mcp *m, const struct mcp_reqctx *q, const json_t *params)
{
    int level = mcp_log_level_of(json_string_value(json_object_get(params, "level")));
    if (level == MCP_LOG_NONE) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS, "Invalid params: level: " MCP_LOG_LEVELS_TEXT,
                      NULL);
        return;
    }
    m->log_level = level;
    mcp_put_result(m, q, json_object());
}

static void on_tools_list(struct mcp *m, const struct mcp_reqctx *q)
{
    /* A cursor is accepted and ignored: the whole list comes in one page. */
    struct mcp_listing *l = calloc(1, sizeof(*l));
    /* watch: the daemon says when a reload changed its tools, which a 2025
     * session is told (a modern client asks with subscriptions/listen) */
    json_t *req = q->modern
                      ? json_pack("{s:s,s:s}", "op", "tools", "format", "mcp")
                      : json_pack("{s:s,s:s,s:b}", "op", "tools", "format", "mcp", "watch", 1);
    if (!q->modern)
        m->legacy_watch = true;
    if (!l || !req) {
        free(l);
        json_decref(req);
        mcp_put_error(m, q, RPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    mcp_reqctx_copy(&l->req, q);
    if (!mcp_listing_send(m, l, req)) {
        mcp_listing_free(m, l);
        mcp_put_error(m, q, RPC_INTERNAL_ERROR, MCP_SEND_FULL,
                      json_pack("{s:s}", "reason", "daemon_send_queue_full"));
    }
    json_decref(req);
}

/* Who the call runs for: the HTTP front's authenticated subject, the run
 * request's "subject" (which the daemon honours from the front it trusts,
 * --subject-from, and refuses from any other). The one place it is sent. */
static void mcp_run_subject(json_t *req, const char *subject)
{
    if (subject)
        json_object_set_new(req, "subject", json_string(subject));
}

static void on_tools_call(struct mcp *m, const struct mcp_reqctx *q, const json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments");
    if (!name) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS, "params.name: expected the name of a tool", NULL);
        return;
    }
    if (args && !json_is_object(args) && !json_is_null(args)) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS, "params.arguments: expected an object", NULL);
        return;
    }
    if (mcp_call_by_id(m, q->stream, q->id)) {
        mcp_put_error(m, q, RPC_INVALID_REQUEST, "the request id is in use by a call in progress",
                      NULL);
        return;
    }
    char *bind = q->modern ? mcp_call_bind(q->subject, name, args) : NULL;
    if (q->modern && mcp_on_retry(m, q, params, bind)) {
        free(bind);
        return;
    }
    struct mcp_call *c = calloc(1, sizeof(*c));
    char *batch = batch_id_for(m, q->id);
    json_t *req = NULL;
    if (c && batch)
        req = json_pack("{s:s,s:s,s:[{s:s,s:s,s:o}]}", "op", "run", "batch", batch, "calls", "id",
                        "c0", "name", name, "arguments",
                        json_is_object(args) ? json_incref(args) : json_object());
    if (!req) {
        free(c);
        free(batch);
        free(bind);
        mcp_put_error(m, q, RPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    if (m->tool_timeout)
        json_object_set_new(req, "tool_timeout", json_integer(m->tool_timeout));
    mcp_run_subject(req, q->subject);
    /* the client's narrowing of the tool's confinement, checked
     * (and a widening refused) by the daemon */
    json_t *pol = json_object_get(json_object_get(params, "_meta"), "toolexecd/policy");
    if (pol)
        json_object_set(req, "policy", pol);
    c->policy = json_incref(pol); /* for the sentences of its denials (why.h) */
    mcp_reqctx_copy(&c->req, q);
    c->batch = batch;
    c->bind = bind;
    json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    if (is_id(token))
        c->progress_token = json_incref(token);
    c->started_ms = cli_now_ms();
    if (q->modern && q->tasks) /* it may become a task of this subject */
        c->owner = strdup(q->subject ? q->subject : "");
    c->next = m->calls;
    m->calls = c;
    mcp_call_start(m, c, req);
}

static void on_cancelled(struct mcp *m, void *stream, const json_t *params)
{
    json_t *id = json_object_get(params, "requestId");
    if (!is_id(id) || mcp_listen_cancel(m, stream, id))
        return;
    struct mcp_call *c = mcp_call_by_id(m, stream, id);
    if (c && c->elicit_id) {
        mcp_call_remove(m, c); /* its batch is over; the host's answer is ignored */
        return;
    }
    if (c) {
        mcp_cancel_call(m, c);
        return;
    }
    /* A tools/list cannot be stopped, but its answer can be kept back. */
    for (struct mcp_listing *l = m->listings; l; l = l->next)
        if (!l->silent && l->req.stream == stream && json_equal(l->req.id, id))
            l->cancelled = true;
    /* Otherwise it has been answered already: nothing to do. */
}

static void on_notification(struct mcp *m, void *stream, const char *method, const json_t *params)
{
    if (strcmp(method, "notifications/cancelled") == 0)
        on_cancelled(m, stream, params);
    /* notifications/initialized and any other notification: nothing to do,
     * and a notification never gets a response. */
}

static void on_request(struct mcp *m, const struct mcp_reqctx *q, const char *method,
                       const json_t *params)
{
    /* Requests before initialize are answered all the same. */
    if (strcmp(method, "initialize") == 0) {
        on_initialize(m, q, params);
    } else if (strcmp(method, "server/discover") == 0) {
        mcp_on_discover(m, q);
    } else if (q->modern && strcmp(method, "subscriptions/listen") == 0) {
        mcp_on_listen(m, q, params);
    } else if (!q->modern && strcmp(method, "ping") == 0) {
        mcp_put_result(m, q, json_object());
    } else if (!q->modern && strcmp(method, "logging/setLevel") == 0) {
        on_set_level(m, q, params);
    } else if (strcmp(method, "tools/list") == 0) {
        on_tools_list(m, q);
    } else if (strcmp(method, "tools/call") == 0) {
        on_tools_call(m, q, params);
    } else if (mcp_on_tasks(m, q, method, params)) {
        /* answered */
    } else {
        char msg[256];
        snprintf(msg, sizeof(msg), "Method not found: %.200s", method);
        mcp_put_error(m, q, RPC_METHOD_NOT_FOUND, msg, NULL);
    }
}

static void on_message(struct mcp *m, json_t *msg, const struct mcp_origin *o);

/* A JSON-RPC batch: MCP 2025-03-26 requires them to be accepted; 2025-06-18
 * removed them. The responses go out as one array. */
static void on_rpc_batch(struct mcp *m, json_t *msgs, const struct mcp_origin *o)
{
    struct mcp_reqctx none = {.stream = o->stream};
    if (!m->version || strcmp(m->version, "2025-03-26") != 0 || !json_array_size(msgs)) {
        mcp_put_error(m, &none, RPC_INVALID_REQUEST,
                      json_array_size(msgs) ? "Invalid Request: batches are not supported after "
                                              "protocol revision 2025-03-26"
                                            : "Invalid Request: an empty batch",
                      NULL);
        return;
    }
    struct mcp_rpcbatch *rb = calloc(1, sizeof(*rb));
    if (!rb || !(rb->out = json_array())) {
        free(rb);
        mcp_put_error(m, &none, RPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    rb->stream = o->stream;
    rb->pending = 1; /* until every element has been read */
    size_t i;
    json_t *el;
    json_array_foreach(msgs, i, el)
    {
        json_t *id = json_object_get(el, "id");
        struct mcp_route *r = NULL;
        if (json_object_get(el, "method") && is_id(id) && (r = calloc(1, sizeof(*r)))) {
            r->id = json_incref(id);
            r->stream = o->stream;
            r->rb = rb;
            r->next = m->routes;
            m->routes = r;
            rb->pending++;
        }
        m->cur_rb = rb;
        on_message(m, json_incref(el), o);
        m->cur_rb = NULL;
    }
    mcp_rb_release(m, rb);
}

/* One message (stolen), a batch's element or alone. */
static void on_message(struct mcp *m, json_t *msg, const struct mcp_origin *o)
{
    json_t *id = json_object_get(msg, "id");
    const char *version = json_string_value(json_object_get(msg, "jsonrpc"));
    json_t *method_v = json_object_get(msg, "method");
    const char *method = json_string_value(method_v);
    json_t *params = json_object_get(msg, "params");
    const char *bad = NULL;
    if (!json_is_object(msg))
        bad = "Invalid Request: expected a JSON object";
    else if (id && !is_id(id))
        bad = "Invalid Request: id: expected a string or a number";
    else if (!version || strcmp(version, "2.0") != 0)
        bad = "Invalid Request: jsonrpc: expected \"2.0\"";
    else if (!method_v && id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
        bad = ""; /* a response: to our elicitation/create, or stray */
    else if (!method)
        bad = "Invalid Request: method: expected a string";
    struct mcp_reqctx q = {.id = is_id(id) ? id : NULL,
                           .stream = o->stream,
                           .version = o->version && mcp_version_known(o->version)
                                          ? mcp_version_known(o->version)
                                          : m->version,
                           .elicitation = m->elicitation,
                           .log_level = m->log_level, /* a modern request's: its _meta */
                           .subject = o->subject};
    if (bad && !*bad) {
        for (struct mcp_call *c = m->calls; c; c = c->next)
            if (c->elicit_id && json_equal(c->elicit_id, id)) {
                mcp_on_elicit_response(m, c, msg);
                break;
            }
    }
    if (bad) {
        if (*bad)
            mcp_put_error(m, &q, RPC_INVALID_REQUEST, bad, NULL);
        json_decref(msg);
        return;
    }
    if (!id) {
        on_notification(m, o->stream, method, json_is_object(params) ? params : NULL);
    } else if (params && !json_is_object(params) && !json_is_null(params)) {
        mcp_put_error(m, &q, RPC_INVALID_PARAMS, "Invalid params: expected an object", NULL);
    } else if (strcmp(method, "initialize") == 0 && q.version &&
               strcmp(q.version, MCP_MODERN_VERSION) == 0) {
        /* the transport says 2026-07-28, which has no initialize: not found
         * (404 over HTTP), so that a client knows to use server/discover */
        mcp_put_error(m, &q, RPC_METHOD_NOT_FOUND,
                      "Method not found: initialize (2026-07-28 has none: server/discover)", NULL);
    } else if (strcmp(method, "initialize") != 0 &&
               !mcp_read_meta(m, &q, json_is_object(params) ? params : NULL, method)) {
        /* answered: its _meta is wrong */
    } else {
        on_request(m, &q, method, json_is_object(params) ? params : NULL);
    }
    json_decref(msg);
}

/* The core's entry: one message the client sent, parsed (stolen): a
 * request, a notification, a response, or a JSON-RPC batch of them. */
void mcp_feed(struct mcp *m, json_t *msg, const struct mcp_origin *o)
{
    static const struct mcp_origin none;
    if (!o)
        o = &none;
    if (json_is_array(msg)) {
        on_rpc_batch(m, msg, o);
        json_decref(msg);
        return;
    }
    on_message(m, msg, o);
}
