/*
 * mcp_events.c - what the daemon sends to `toolexec mcp` (mcp_int.h): a
 * call's progress, result and its batch's end, which answer the host's
 * tools/call; a tool's ask_user, put to the user through the host
 * (elicitation) where it can; the tools list; the connection's loss.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_int.h"
#include "why.h"

static bool is_event(const json_t *ev, const char *kind)
{
    const char *k = json_string_value(json_object_get(ev, "event"));
    return k && strcmp(k, kind) == 0;
}

static bool is_failure(const json_t *result)
{
    return !result || json_object_get(result, "error") || json_object_get(result, "tool_error");
}

/* A tool's ask_user: put the question to the user through the host
 * (elicitation/create) when it can; true when the call now waits for that. */
static bool ask_host(struct mcp *m, struct mcp_call *c, const char *question)
{
    if (!c->req.elicitation) {
        mcp_put_question(m, &c->req, question);
        return false;
    }
    char id[64];
    snprintf(id, sizeof(id), "toolexec-elicit-%llu", ++m->elicits);
    json_t *req = json_pack("{s:s,s:s,s:s,s:{s:s,s:{s:s,s:{s:{s:s,s:s}},s:[s]}}}", "jsonrpc", "2.0",
                            "id", id, "method", "elicitation/create", "params", "message", question,
                            "requestedSchema", "type", "object", "properties", "answer", "type",
                            "string", "title", "Answer", "required", "answer");
    if (!req) {
        mcp_put_question(m, &c->req, question);
        return false;
    }
    c->elicit_id = json_string(id);
    mcp_put_message(m, req, &c->req);
    return true;
}

/* The host's answer to our elicitation/create for call c. */
void mcp_on_elicit_response(struct mcp *m, struct mcp_call *c, const json_t *msg)
{
    const char *question = json_string_value(json_object_get(c->result, "ask_user"));
    json_t *result = json_object_get(msg, "result");
    const char *action = json_string_value(json_object_get(result, "action"));
    json_t *answer = json_object_get(json_object_get(result, "content"), "answer");
    if (c->cancelled) {
        /* no response for a cancelled request */
    } else if (!action) {
        mcp_put_question(m, &c->req, question ? question : "");
    } else {
        mcp_put_answer(m, &c->req, question, action, answer);
    }
    mcp_call_remove(m, c);
}

/* The batch's terminal event: the call's answer. */
static void finish_call(struct mcp *m, struct mcp_call *c, const json_t *ev)
{
    const char *question = json_string_value(json_object_get(c->result, "ask_user"));
    if (c->cancelled) {
        /* MCP: no response for a cancelled request */
    } else if (is_event(ev, "batch_completed") && question && c->req.modern) {
        mcp_put_input_required(m, c, question);
    } else if (is_event(ev, "batch_completed") && question) {
        if (ask_host(m, c, question))
            return; /* answered when the host's response comes */
    } else if (is_event(ev, "batch_completed") && c->blocks && json_object_get(c->result, "ok")) {
        mcp_put_blocks_result(m, &c->req, json_object_get(c->result, "ok"), c->denied);
    } else if (is_event(ev, "batch_completed")) {
        json_t *msg = json_array_get(json_object_get(ev, "messages"), 0);
        mcp_put_call_result_denied(m, &c->req, json_string_value(json_object_get(msg, "content")),
                                   is_failure(c->result), json_object_get(c->result, "ok"),
                                   c->denied);
    } else {
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *reason = json_string_value(json_object_get(ev, "reason"));
        const char *message = json_string_value(json_object_get(ev, "message"));
        if (!message)
            message = "toolexecd refused the call";
        mcp_log(m, &c->req, MCP_LOG_ERROR, "%s: %s", c->batch, message);
        if (reason && strcmp(reason, "unknown_tool") == 0) {
            /* the spec (2025-06-18, 2025-11-25) lists an unknown tool as a
             * protocol error, its example -32602 */
            const char *tool =
                json_string_value(json_object_get(json_object_get(ev, "metadata"), "tool_name"));
            char text[256];
            snprintf(text, sizeof(text), "Unknown tool: %.200s", tool ? tool : "");
            mcp_put_error(m, &c->req, RPC_INVALID_PARAMS, text,
                          json_pack("{s:s?,s:s?}", "type", type, "reason", reason));
        } else if (type && strcmp(type, "engine_error") == 0) {
            /* forbidden_tool: a tool error, which the model can read and act
             * on */
            mcp_put_call_result(m, &c->req, message, true, NULL);
        } else {
            int code = reason && strcmp(reason, "invalid_request") == 0 ? RPC_INVALID_PARAMS
                                                                        : RPC_INTERNAL_ERROR;
            mcp_put_error(m, &c->req, code, message,
                          json_pack("{s:s?,s:s?}", "type", type, "reason", reason));
        }
    }
    mcp_call_remove(m, c);
}

/* An error event that is not a batch's: a tools request's refusal. */
static void on_loose_error(struct mcp *m, const json_t *ev)
{
    const char *message = json_string_value(json_object_get(ev, "message"));
    struct mcp_listing *l = mcp_listing_pop(m);
    if (!l) {
        cli_err("mcp: toolexecd: %s", message ? message : "an error");
        return;
    }
    if (l->info)
        mcp_toolinfo_learn(m, NULL);
    else if (l->silent && l->sub)
        mcp_listen_failed(m, l->sub, message ? message : "toolexecd refused");
    else if (!l->cancelled && !l->silent)
        mcp_put_error(m, &l->req, RPC_INTERNAL_ERROR, message ? message : "toolexecd refused",
                      NULL);
    mcp_listing_free(m, l);
}

static void on_event(struct mcp *m, json_t *ev)
{
    const char *batch = json_string_value(json_object_get(ev, "batch"));
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    struct mcp_call *c;
    if (is_event(ev, "tools") && !batch) {
        struct mcp_listing *l = mcp_listing_pop(m);
        mcp_toolinfo_learn(m, json_object_get(ev, "tools"));
        if (l && l->silent && l->sub)
            mcp_listen_acked(m, l->sub);
        else if (l && !l->cancelled && !l->silent)
            mcp_put_result(m, &l->req, mcp_list_result(&l->req, json_object_get(ev, "tools")));
        if (l)
            mcp_listing_free(m, l);
    } else if (is_event(ev, "tools_changed")) {
        mcp_toolinfo_reloaded(m);
        mcp_tools_changed(m, ev);
    } else if (is_event(ev, "error") && reason && strcmp(reason, "unknown_batch") == 0) {
        /* our cancel crossed the batch's completion on the wire */
    } else if (is_event(ev, "error") && !batch) {
        on_loose_error(m, ev);
    } else if (!(c = mcp_call_by_batch(m, batch))) {
        /* not one of ours any more */
    } else if (c->elicit_id) {
        /* its batch is over: it waits for the host's answer alone */
    } else if (is_event(ev, "tool_execution_progress")) {
        json_t *p = json_object_get(ev, "progress");
        const char *said = json_string_value(json_object_get(p, "message"));
        /* a progress message is what a tool can say while it runs: the
         * client that asked for logs gets it as one, the tool its logger */
        if (said && !c->cancelled)
            mcp_log_as(m, &c->req, MCP_LOG_INFO, json_string_value(json_object_get(ev, "name")),
                       said);
        if (c->progress_token && !c->cancelled)
            mcp_put_progress(m, c, p);
    } else if (is_event(ev, "tool_execution_started")) {
        mcp_log(m, &c->req, MCP_LOG_INFO, "%s: the tool started", c->batch);
    } else if (is_event(ev, "tool_execution_completed")) {
        mcp_log(m, &c->req, MCP_LOG_DEBUG, "%s: the tool completed", c->batch);
        json_decref(c->result);
        c->result = json_incref(json_object_get(ev, "result"));
        c->blocks = mcp_tool_blocks(m, json_string_value(json_object_get(ev, "name")));
        json_decref(c->denied);
        c->denied = te_why_denied(json_object_get(ev, "denied"), c->policy, NULL);
    } else if (is_event(ev, "batch_completed") || is_event(ev, "error")) {
        finish_call(m, c, ev);
    }
}

/* Read one event. Returns 0, or an exit code when the connection failed. */
int mcp_read_event(struct mcp *m)
{
    json_t *ev;
    int rc = te_client_recv(m->client, &ev);
    if (rc == -EAGAIN)
        return 0; /* a non-blocking client's partial line: kept for the next read */
    if (rc < 0)
        return cli_recv_failed(m->cli, rc, "the session ended");
    on_event(m, ev);
    json_decref(ev);
    return 0;
}

/* The daemon is gone: what is still owed an answer gets an error. */
void mcp_fail_all(struct mcp *m)
{
    const char *msg = "lost the connection to toolexecd";
    while (m->calls) {
        if (!m->calls->cancelled)
            mcp_put_error(m, &m->calls->req, RPC_INTERNAL_ERROR, msg, NULL);
        mcp_call_remove(m, m->calls);
    }
    struct mcp_listing *l;
    while ((l = mcp_listing_pop(m))) {
        if (!l->cancelled && !l->silent)
            mcp_put_error(m, &l->req, RPC_INTERNAL_ERROR, msg, NULL);
        mcp_listing_free(m, l);
    }
    mcp_subs_end(m, true, NULL, true);
}
