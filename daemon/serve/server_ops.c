/*
 * server_ops.c - the ops (server_int.h): the table request.c looks each
 * request line's "op" up in, and what each op does on its connection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "capacity.h"
#include "cleanup.h"
#include "learn.h"
#include "learndef.h"
#include "metrics.h"
#include "registry.h"
#include "request.h"
#include "stats.h"
#include "subject.h"
#include "tail.h"
#include "template.h"
#include "server.h"
#include "server_int.h"

/* Make c a subscriber to the event stream; again: the new filters replace
 * the old in place (a write of the subscriber may be in flight). */
void td_conn_subscribe(struct td_conn *c, json_t *tools, json_t *batches)
{
    char err[160];
    te_autojson json_t *tools_set = NULL, *batches_set = NULL;
    if (td_tail_filters(tools, batches, &tools_set, &batches_set, err, sizeof(err)) < 0) {
        td_conn_error(c, NULL, "request_error", "invalid_request", err, NULL);
        return;
    }
    uv_os_fd_t fd = -1;
    uv_fileno((uv_handle_t *)&c->h, &fd);
    if (!c->tail && !(c->tail = td_tail_new(td_conn_write, c, &c->cred, fd))) {
        td_conn_error(c, NULL, "request_error", "invalid_request",
                      "out of memory subscribing to the event stream", NULL);
        return;
    }
    td_tail_set_filters(c->tail, te_steal(&tools_set), te_steal(&batches_set));
    td_conn_send(c, json_pack("{s:s,s:O?,s:O?}", "event", "tailing", "tools",
                              json_is_null(tools) ? NULL : tools, "batches",
                              json_is_null(batches) ? NULL : batches));
}

/* The ops. Each answers on c; req is a JSON object it borrows
 * (td_request_handle frees it, the one place that does), so a handler may
 * return anywhere. */

static void op_run(struct td_conn *c, json_t *req)
{
    /* Only a front the daemon trusts (--subject-from), known by its
     * SO_PEERCRED uid, says whom it runs a batch for. */
    json_t *subject = json_object_get(req, "subject");
    if (subject && !json_is_null(subject) && !td_subject_trusted(c->cred.uid)) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "subject: only a front the daemon trusts (--subject-from) may name a subject; "
                 "uid %d is not one",
                 (int)c->cred.uid);
        td_conn_error(c, td_req_text(req, "batch"), "request_error", "invalid_request", msg, NULL);
        return;
    }
    td_batch_run(&(struct td_batch_owner){.ops = &td_conn_batch_ops, .data = c, .cred = c->cred},
                 req);
}

static void op_cancel(struct td_conn *c, json_t *req)
{
    const char *id = td_req_text(req, "batch");
    if (!id) {
        td_conn_error(c, NULL, "request_error", "invalid_request",
                      "batch: expected the id of a running batch", NULL);
        return;
    }
    struct batch_entry *e = td_conn_find_batch(c, id);
    if (!e || e->cancelled) {
        char msg[128];
        snprintf(msg, sizeof(msg), "batch: no running batch \"%.64s\" on this connection", id);
        td_conn_error(c, id, "request_error", "unknown_batch", msg, NULL);
        return;
    }
    e->cancelled = true;
    td_batch_cancel(e->b);
}

static void op_decide(struct td_conn *c, json_t *req)
{
    const char *id = td_req_text(req, "batch");
    const char *call = td_req_text(req, "id");
    json_t *decision = json_object_get(req, "decision");
    char msg[256];
    if (!id || !call || !decision) {
        td_conn_error(c, NULL, "request_error", "invalid_request",
                      "decide: expected \"batch\", \"id\" and \"decision\"", NULL);
        return;
    }
    struct batch_entry *e = td_conn_find_batch(c, id);
    if (!e) {
        snprintf(msg, sizeof(msg), "batch: no running batch \"%.64s\" on this connection", id);
        td_conn_error(c, NULL, "request_error", "unknown_batch", msg, NULL);
        return;
    }
    if (td_batch_decide(e->b, call, decision, msg, sizeof(msg)) < 0)
        td_conn_error(c, NULL, "request_error", "no_pending_decision", msg, NULL);
}

static void op_tools(struct td_conn *c, json_t *req)
{
    json_t *f = json_object_get(req, "format");
    json_t *watch = json_object_get(req, "watch");
    if (watch && !json_is_boolean(watch)) {
        td_conn_error(c, NULL, "request_error", "invalid_request", "watch: expected true or false",
                      NULL);
        return;
    }
    if (watch)
        c->watch_tools = json_is_true(watch);
    json_t *list = !f || json_is_null(f) ? td_registry_list(td_tools)
                   : te_json_is_text(f)  ? td_registry_list_as(td_tools, json_string_value(f))
                                         : NULL;
    if (!list) {
        td_conn_error(c, NULL, "request_error", "invalid_request",
                      "format: expected \"openai\", \"openai_responses\", \"anthropic\" or \"mcp\"",
                      NULL);
        return;
    }
    td_conn_send(c, json_pack("{s:s,s:o}", "event", "tools", "tools", list));
}

static void op_tail(struct td_conn *c, json_t *req)
{
    td_conn_subscribe(c, json_object_get(req, "tools"), json_object_get(req, "batches"));
}

static void op_stats(struct td_conn *c, json_t *req)
{
    struct td_stats_gauges g;
    td_server_gauges(&g);
    json_t *ev = td_stats_event(&g);
    te_autojson json_t *warm = td_template_stats(); /* warm tools' templates, when any */
    if (ev && json_object_size(warm))
        json_object_set_new(ev, "templates", te_steal(&warm));
    td_conn_send(c, ev);
}

/* {"event": "metrics", "content_type": ..., "text": ...}: what /metrics serves. */
static void op_metrics(struct td_conn *c, json_t *req)
{
    struct td_stats_gauges g;
    size_t len;
    td_server_gauges(&g);
    te_autofree char *text = td_metrics_text(&g, &len);
    if (!text) {
        td_conn_error(c, NULL, "engine_error", "internal", "metrics: out of memory", NULL);
        return;
    }
    td_conn_send(c, json_pack("{s:s,s:s,s:s%}", "event", "metrics", "content_type",
                              TD_METRICS_CONTENT_TYPE, "text", text, len));
}

/* {"op": "capacity"}: what this daemon can take on, for placement. It
 * takes no other key: a misspelt one would otherwise be silently lost. */
static void op_capacity(struct td_conn *c, json_t *req)
{
    const char *key;
    json_t *v;
    json_object_foreach(req, key, v)
    {
        if (strcmp(key, "op") != 0) {
            char msg[160];
            snprintf(msg, sizeof(msg), "unknown key \"%.64s\" in capacity request (it takes none)",
                     key);
            td_conn_error(c, NULL, "request_error", "invalid_request", msg, NULL);
            return;
        }
    }
    json_t *ev = td_capacity_event();
    if (!ev) {
        td_conn_error(c, NULL, "engine_error", "internal", "capacity: out of memory", NULL);
        return;
    }
    td_conn_send(c, ev);
}

/* {"op": "learned", "tool": NAME}: what the tool's calls since load
 * propose (learn mode, learndef.h), alone and as its whole definition. */
static void op_learned(struct td_conn *c, json_t *req)
{
    const char *name = td_req_text(req, "tool");
    struct td_tool *t = name ? td_registry_find(td_tools, name) : NULL;
    char msg[200];
    if (!t || !td_batch_tool_allowed(t, &c->cred) || !t->learn) {
        snprintf(msg, sizeof(msg), "tool: %s%.64s%s", name ? "\"" : "expected a tool's name",
                 name ? name : "",
                 !name                                       ? ""
                 : !t || !td_batch_tool_allowed(t, &c->cred) ? "\": no such tool"
                                                             : "\": not in learn mode");
        td_conn_error(c, NULL, "request_error", "invalid_request", msg, NULL);
        return;
    }
    json_t *p = td_learndef_proposal(t);
    json_t *def = td_learndef_definition(t, p);
    if (!p || !def) {
        json_decref(p);
        json_decref(def);
        td_conn_error(c, NULL, "engine_error", "internal", "learned: out of memory", NULL);
        return;
    }
    td_conn_send(c, json_pack("{s:s,s:s,s:i,s:o,s:o}", "event", "learned", "tool", t->name, "calls",
                              (int)td_learn_calls(t->learned), "learned", p, "definition", def));
}

/* Every op, written once (the unknown-op message lists them from here).
 * Who may call it: any client of the main socket, every op (the events
 * socket only talks: its lines are ignored before this table); new_work:
 * refused once the daemon is shutting down, the others still answered. */
static const struct td_op ops[] = {
    {"run", op_run, true},          {"cancel", op_cancel, false},
    {"decide", op_decide, false},   {"tools", op_tools, false},
    {"tail", op_tail, false},       {"stats", op_stats, false},
    {"metrics", op_metrics, false}, {"capacity", op_capacity, false},
    {"learned", op_learned, false},
};

static void request_error(struct td_conn *c, const char *batch, const char *reason,
                          const char *message)
{
    td_conn_error(c, batch, "request_error", reason, message, NULL);
}

void td_conn_handle_line(struct td_conn *c, char *line, size_t len)
{
    if (!c->events_only) /* the events socket only talks */
        td_request_handle(ops, sizeof(ops) / sizeof(ops[0]), c, line, len, request_error);
}
