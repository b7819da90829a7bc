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

/* A file-system entry's sentence (why()'s): the access and path, the rule,
 * and the definition key that allows it where one does. */
static char *why_filesystem(const char *path, const char *access, const char *rule)
{
    static const char *const verbs[][2] = {{"read", "Reading"},
                                           {"write", "Writing"},
                                           {"execute", "Executing"},
                                           {"create", "Creating"},
                                           {"remove", "Removing"}};
    const char *verb = "Access to";
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(access, verbs[i][0]) == 0)
            verb = verbs[i][1];
    bool entry = !strcmp(access, "create") || !strcmp(access, "remove");
    /* what is made or removed needs its directory writable */
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (entry && slash)
        slash[slash == dir ? 1 : 0] = '\0';
    const char *key = !strcmp(access, "read") ? "read" : "write";
    const char *target = entry ? dir : path;
    const char *cause = NULL;
    char *s = NULL;
    int n = -1;
    if (!strcmp(rule, "hide"))
        n = asprintf(&s,
                     "%s %s was refused: the tool's definition hides it on purpose "
                     "(\"filesystem\": {\"hide\": [...]}); only its operator can change that.",
                     verb, path);
    else if (!strcmp(rule, "permissions"))
        n = asprintf(&s,
                     "%s %s was refused by the file's own permissions for the call's user; no "
                     "key of the tool's definition changes them.",
                     verb, path);
    else if (!strcmp(access, "execute"))
        n = asprintf(&s,
                     "%s %s was refused: the tool's view mounts it without execution (%s); no "
                     "key of the tool's definition makes it executable.",
                     verb, path, rule);
    else {
        if (!strcmp(rule, "hidden by the view"))
            cause = "the tool's view hides it";
        else if (!strcmp(rule, "not in the minimal root"))
            cause = "the tool's minimal root does not show it";
        else if (!strcmp(rule, "read-only in the view"))
            cause = "the tool's view shows it read-only";
        else if (!strcmp(rule, "outside Landlock's rules"))
            cause = "Landlock lets the call write only where the tool's definition says";
        else
            cause = rule;
        n = asprintf(&s,
                     "%s %s was refused: %s; only the tool's definition (\"filesystem\": "
                     "{\"%s\": [\"%s\"]}) allows it, within what a run request's \"policy\" "
                     "leaves.",
                     verb, path, cause, key, target);
    }
    return n < 0 ? NULL : s;
}

/* A sentence a model can act on, for one entry of "denied": what was
 * refused and which part of the tool's definition (or of a run request's
 * policy, which only narrows it) decides that; never a way around it. */
static char *why(const json_t *e)
{
    const char *kind = json_string_value(json_object_get(e, "kind"));
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *host = json_string_value(json_object_get(e, "host"));
    const char *reason = json_string_value(json_object_get(e, "reason"));
    const char *cause = json_string_value(json_object_get(e, "cause"));
    json_int_t port = json_integer_value(json_object_get(e, "port"));
    const char *path = json_string_value(json_object_get(e, "path"));
    const char *access = json_string_value(json_object_get(e, "access"));
    const char *rule = json_string_value(json_object_get(e, "rule"));
    char *s = NULL;
    int n = -1;
    kind = kind ? kind : "";
    if (strcmp(kind, "filesystem") == 0 && path && access && rule)
        return why_filesystem(path, access, rule);
    if (strcmp(kind, "syscall") == 0 && name)
        n = asprintf(&s,
                     "The system call %s was refused (EPERM) by the tool's system-call filter; "
                     "only the tool's definition (\"syscalls\", \"deny_syscalls\") can allow it.",
                     name);
    else if (strcmp(kind, "network") == 0 && host && reason &&
             strcmp(reason, "private_address") == 0)
        n = asprintf(&s,
                     "Network access to %s port %lld was refused: the name resolved only to "
                     "loopback or private addresses, which a listed name never reaches; only "
                     "listing the address itself in the tool's definition (\"network\": "
                     "{\"allow\": [...]}) allows it.",
                     host, (long long)port);
    else if (strcmp(kind, "network") == 0 && host && reason)
        n = asprintf(&s,
                     "Network access to %s port %lld was refused: this call's %s limit was "
                     "reached (the tool's definition, \"network\": {\"%s\": N}, sets it).",
                     host, (long long)port, reason, reason);
    else if (strcmp(kind, "network") == 0 && host)
        n = asprintf(&s,
                     "Network access to %s port %lld was refused: it is not in the tool's "
                     "network allow-list; only the tool's definition (\"network\": {\"allow\": "
                     "[\"%s:%lld\"]}) allows it, within what a run request's \"policy\" "
                     "leaves.",
                     host, (long long)port, host, (long long)port);
    else if (strcmp(kind, "network") == 0 && reason && strcmp(reason, "max_connections") == 0)
        n = asprintf(&s, "A network connection was refused: this call had its most proxy "
                         "connections open at once (the tool's definition, \"network\": "
                         "{\"max_connections\": N}, sets that).");
    else if (strcmp(kind, "network") == 0 && reason)
        n = asprintf(&s,
                     "A network connection was refused: this call made the most proxy "
                     "connections a call may make in all (%s, fixed).",
                     reason);
    else if (strcmp(kind, "egress_failure") == 0 && host)
        n = asprintf(&s, "Connecting to %s port %lld failed (not a refusal): %s.", host,
                     (long long)port, cause ? cause : "unknown");
    if (n < 0) {
        char *j = te_json_dumps(e, JSON_COMPACT, NULL);
        n = asprintf(&s, "Refused: %s", j ? j : "?");
        free(j);
    }
    return n < 0 ? NULL : s;
}

json_t *mcp_denied_why(const json_t *denied)
{
    if (!json_array_size(denied))
        return NULL;
    json_t *out = json_array(), *e;
    size_t i;
    json_array_foreach(denied, i, e)
    {
        char *w = why(e);
        json_t *c = json_deep_copy(e);
        if (!w || !json_is_object(c) || json_object_set_new(c, "why", json_string(w)) < 0 ||
            json_array_append_new(out, c) < 0) {
            free(w);
            json_decref(out);
            return NULL;
        }
        free(w);
    }
    return out;
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
        c->denied = mcp_denied_why(json_object_get(ev, "denied"));
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
