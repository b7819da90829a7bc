/*
 * mcp_write.c - `toolexec mcp`'s messages to the client (mcp_int.h): each
 * handed to the transport's sink, alone or gathered into the array
 * answering a JSON-RPC batch; results shaped for the request's revision;
 * the text of a tool's question and its answer; and the progress
 * notifications of running calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp_int.h"
#include "why.h"

#ifndef TE_CLI_VERSION
#define TE_CLI_VERSION "unknown"
#endif

static void put_out(struct mcp *m, json_t *msg, const struct mcp_reqctx *req, bool final)
{
    if (msg)
        m->sink->send(m->sink_ctx, msg, req, final);
    else
        cli_err("mcp: out of memory; a message is lost");
}

void mcp_rb_release(struct mcp *m, struct mcp_rpcbatch *rb)
{
    if (--rb->pending)
        return;
    struct mcp_reqctx whole = {.stream = rb->stream};
    if (json_array_size(rb->out)) {
        put_out(m, rb->out, &whole, true);
    } else {
        json_decref(rb->out);
        if (m->sink->dropped)
            m->sink->dropped(m->sink_ctx, &whole);
    }
    free(rb);
}

/* The route of a response to id on stream, unlinked; NULL when none. */
static struct mcp_route *route_take(struct mcp *m, void *stream, const json_t *id)
{
    for (struct mcp_route **p = &m->routes; *p; p = &(*p)->next)
        if ((*p)->stream == stream && json_equal((*p)->id, id)) {
            struct mcp_route *r = *p;
            *p = r->next;
            return r;
        }
    return NULL;
}

/* A request that gets no response (cancelled): its batch no longer waits
 * for it; alone, its stream can end. */
void mcp_route_drop(struct mcp *m, const struct mcp_reqctx *req)
{
    struct mcp_route *r = m->routes && req->id ? route_take(m, req->stream, req->id) : NULL;
    if (r) {
        mcp_rb_release(m, r->rb);
        json_decref(r->id);
        free(r);
    } else if (m->sink->dropped) {
        m->sink->dropped(m->sink_ctx, req);
    }
}

/* Send one message (stolen) bound to req (NULL: the session's): a response
 * to a request of a JSON-RPC batch goes into that batch's array. */
void mcp_put_message(struct mcp *m, json_t *msg, const struct mcp_reqctx *req)
{
    if (req && req->task) { /* a task's: kept for tasks/get (mcp_tasks.c, above) */
        m->task_capture(m, req->task, msg);
        return;
    }
    bool response = msg && (json_object_get(msg, "result") || json_object_get(msg, "error"));
    json_t *id = response ? json_object_get(msg, "id") : NULL;
    void *stream = req ? req->stream : NULL;
    struct mcp_route *r = id && m->routes ? route_take(m, stream, id) : NULL;
    if (r) {
        json_array_append_new(r->rb->out, msg);
        mcp_rb_release(m, r->rb);
        json_decref(r->id);
        free(r);
        return;
    }
    if (response && !id && m->cur_rb) {
        /* an element of the batch being read that had no usable id */
        json_array_append_new(m->cur_rb->out, msg);
        return;
    }
    put_out(m, msg, req, response);
}

/* A modern result: resultType ("complete" unless set) and the server's
 * identity in _meta. */
static void modern_result(const struct mcp_reqctx *req, json_t *result)
{
    if (!req || !req->modern || !json_is_object(result))
        return;
    if (!json_object_get(result, "resultType"))
        json_object_set_new(result, "resultType", json_string("complete"));
    json_t *meta = json_object_get(result, "_meta");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(result, "_meta", meta);
    }
    json_object_set_new(meta, MCP_META_SERVERINFO,
                        json_pack("{s:s,s:s}", "name", "toolexec", "version", TE_CLI_VERSION));
}

/* A response with result (stolen). */
void mcp_put_result(struct mcp *m, const struct mcp_reqctx *req, json_t *result)
{
    modern_result(req, result);
    mcp_put_message(
        m, json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", req->id, "result", result), req);
}

/* An error response; no req->id (a message whose id could not be read)
 * leaves "id" out: the schema of 2025-06-18 and later has no null id. data
 * (stolen) may be NULL. */
void mcp_put_error(struct mcp *m, const struct mcp_reqctx *req, int code, const char *message,
                   json_t *data)
{
    json_t *err = json_pack("{s:i,s:s}", "code", code, "message", message);
    if (!err)
        err = json_pack("{s:i,s:s}", "code", code, "message", "(message not valid UTF-8)");
    if (err && data)
        json_object_set(err, "data", data);
    json_decref(data);
    json_t *msg = json_pack("{s:s,s:o}", "jsonrpc", "2.0", "error", err);
    if (msg && req && req->id)
        json_object_set(msg, "id", req->id);
    mcp_put_message(m, msg, req);
}

/* A tools/call result: one text content, whether the call failed, and
 * the structured result (an object; NULL: none). */
void mcp_put_call_result(struct mcp *m, const struct mcp_reqctx *req, const char *text,
                         bool is_error, const json_t *structured)
{
    mcp_put_call_result_denied(m, req, text, is_error, structured, NULL);
}

/* The text a model reads: the content, then a line per denial (why.h). NULL:
 * no memory. */
char *mcp_denials_text(const char *text, const json_t *denied)
{
    size_t len;
    return te_why_text(text, strlen(text), denied, &len);
}

void mcp_put_call_result_denied(struct mcp *m, const struct mcp_reqctx *req, const char *text,
                                bool is_error, const json_t *structured, const json_t *denied)
{
    char *shown = NULL;
    if (json_array_size(denied) && !(shown = mcp_denials_text(text ? text : "", denied))) {
        mcp_put_error(m, req, RPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    json_t *content = json_pack("[{s:s,s:s}]", "type", "text", "text",
                                shown  ? shown
                                : text ? text
                                       : "");
    free(shown);
    if (!content) {
        mcp_put_error(m, req, RPC_INTERNAL_ERROR, "the tool's content is not valid UTF-8", NULL);
        return;
    }
    json_t *r = json_pack("{s:o,s:b}", "content", content, "isError", is_error);
    if (r && json_is_object(structured))
        json_object_set(r, "structuredContent", (json_t *)structured);
    if (r && json_array_size(denied)) {
        if (is_error && !json_is_object(structured))
            json_object_set_new(r, "structuredContent",
                                json_pack("{s:O}", "denied", (json_t *)denied));
        else
            json_object_set_new(r, "_meta", json_pack("{s:O}", MCP_META_DENIED, (json_t *)denied));
    }
    mcp_put_result(m, req, r);
}

/* What the model reads when its tool asked the user a question that the
 * host was not asked (no elicitation) or did not put to the user. */
void mcp_put_question(struct mcp *m, const struct mcp_reqctx *req, const char *question)
{
    char *text = NULL;
    if (asprintf(&text,
                 "[ask_user] The tool needs an answer from the user before it can go on. "
                 "Ask the user this question, then call the tool again with the answer: %s",
                 question) < 0)
        text = NULL;
    mcp_put_call_result(m, req, text ? text : question, false, NULL);
    free(text);
}

/* What the model reads once the user answered a tool's question (action
 * "accept", answer the answer) or did not. */
void mcp_put_answer(struct mcp *m, const struct mcp_reqctx *req, const char *question,
                    const char *action, const json_t *answer)
{
    char *shown = json_is_string(answer) ? strdup(json_string_value(answer))
                  : answer               ? te_json_dumps(answer, JSON_ENCODE_ANY, NULL)
                                         : NULL;
    char *text = NULL;
    int n = strcmp(action, "accept") == 0
                ? asprintf(&text, "The tool asked the user: %s\nThe user answered: %s",
                           question ? question : "", shown ? shown : "")
                : asprintf(&text, "The tool asked the user: %s\nThe user did not answer (%s).",
                           question ? question : "", action);
    mcp_put_call_result(m, req, n < 0 ? "" : text, false, NULL);
    free(text);
    free(shown);
}

/* notifications/progress for call c: the worker's (p its progress object)
 * or, p NULL, a heartbeat. Progress must increase with each notification:
 * a heartbeat before any progress of the worker's counts the seconds the
 * call has run; after, it adds 0.001 (and, like a worker's value that
 * does not increase, carries no total). */
void mcp_put_progress(struct mcp *m, struct mcp_call *c, const json_t *p)
{
    long long now = cli_now_ms();
    double v = p             ? json_number_value(json_object_get(p, "progress"))
               : c->reported ? c->progress + 0.001
                             : (double)((now - c->started_ms) / 1000);
    json_t *total = p ? json_object_get(p, "total") : NULL;
    if (v <= c->progress && (c->sent_ms || v <= 0)) {
        v = c->progress + 0.001;
        total = NULL;
    }
    json_t *params = json_pack("{s:O,s:f}", "progressToken", c->progress_token, "progress", v);
    if (params && total)
        json_object_set(params, "total", total);
    char msg[64];
    if (params && p && json_object_get(p, "message"))
        json_object_set(params, "message", json_object_get(p, "message"));
    else if (params && !p) {
        snprintf(msg, sizeof(msg), "running for %lld s", (now - c->started_ms) / 1000);
        json_object_set_new(params, "message", json_string(msg));
    }
    c->progress = v;
    c->sent_ms = now;
    if (p)
        c->reported = true;
    mcp_put_message(m,
                    json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", "notifications/progress",
                              "params", params),
                    &c->req);
}

/* Heartbeats due now; returns the ms until the next one, -1 for none. */
int mcp_progress_heartbeats(struct mcp *m)
{
    long long now = cli_now_ms(), next = -1;
    for (struct mcp_call *c = m->calls; c; c = c->next) {
        if (!c->progress_token || c->cancelled || c->elicit_id)
            continue;
        long long last = c->sent_ms ? c->sent_ms : c->started_ms;
        if (now - last >= m->heartbeat_ms) {
            mcp_put_progress(m, c, NULL);
            last = now;
        }
        long long wait = last + m->heartbeat_ms - now;
        if (next < 0 || wait < next)
            next = wait;
    }
    return next < 0 ? -1 : next > 60000 ? 60000 : (int)next;
}
