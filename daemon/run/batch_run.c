/*
 * batch_run.c - a {"op": "run"} request made a batch (batch_int.h): parsed,
 * its id made up where it names none, within --max-batch-calls; every tool
 * it calls found and allowed to the client (allow_uids, allow_gids) before
 * any call runs; admitted by its owner (its client's limits) and known by
 * its id; its calls set up, its first event out, its calls started.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "batch.h"
#include "batch_int.h"
#include "config.h"
#include "log.h"
#include "narrow.h"
#include "registry.h"
#include "toolexec.h"

static bool id_listed(const json_t *list, long id)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (json_integer_value(v) == id)
            return true;
    }
    return false;
}

/* allow_uids / allow_gids: a client passes if either list names it. */
bool td_batch_tool_allowed(const struct td_tool *t, const struct ucred *cred)
{
    if (!t->allow_uids && !t->allow_gids)
        return true;
    return (t->allow_uids && id_listed(t->allow_uids, (long)cred->uid)) ||
           (t->allow_gids && id_listed(t->allow_gids, (long)cred->gid));
}

static uint64_t default_concurrency(size_t ncalls)
{
    uint64_t c = (uint64_t)(td_cfg.online_cpus ? td_cfg.online_cpus : 1) * 2;
    if (ncalls < c)
        c = ncalls;
    return c ? c : 1;
}

static void drop_narrowed(struct td_tool **t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        td_tool_unref(t[i]);
    free(t);
}

/* Each call's tool as its batch's and its own "policy" narrow it (narrow.h):
 * out[i] a reference (NULL: no tool of ours), to[i] the policy's timeout. */
static int narrow_calls(const te_run_request *r, struct td_tool **out, uint64_t *to, char *err,
                        size_t errlen)
{
    size_t i;
    json_t *call;
    json_array_foreach(r->calls, i, call)
    {
        const char *name = json_string_value(json_object_get(call, "name"));
        struct td_tool *t =
            json_object_get(call, TE_CUSTOM_CALL) ? NULL : td_registry_find(td_tools, name);
        if (!t)
            continue;
        struct td_tool *batch;
        char key[48];
        uint64_t ms = 0;
        if (td_narrow_tool(t, r->narrow, "policy", &batch, &ms, err, errlen) < 0)
            return -1;
        snprintf(key, sizeof(key), "calls[%zu].policy", i);
        int rc =
            td_narrow_tool(batch, json_object_get(call, "policy"), key, &out[i], &ms, err, errlen);
        td_tool_unref(batch);
        if (rc < 0)
            return -1;
        to[i] = ms;
    }
    return 0;
}

void td_batch_run(const struct td_batch_owner *owner, json_t *req)
{
    const struct td_batch_ops *ops = owner->ops;
    void *conn = owner->data;
    char err[256];
    te_run_request r;
    if (te_run_request_parse(req, &r, err, sizeof(err)) < 0) {
        /* the batch id echoed only when it is a string */
        ops->error(conn, te_json_text_value(json_object_get(req, "batch")), "request_error",
                   "invalid_request", err, NULL);
        return;
    }
    char idbuf[32];
    const char *id = r.batch;
    if (!id) {
        snprintf(idbuf, sizeof(idbuf), "b-%u", ops->next_seq(conn));
        id = idbuf;
    }
    if (r.ncalls > td_cfg.max_batch_calls) {
        snprintf(err, sizeof(err), "calls: %zu calls exceed the limit of %zu (--max-batch-calls)",
                 r.ncalls, td_cfg.max_batch_calls);
        ops->error(conn, id, "request_error", "invalid_request", err, NULL);
        return;
    }
    /* Pre-flight: every tool must exist, and be allowed to this client,
     * before any call runs. */
    const struct ucred *cred = &owner->cred;
    size_t i;
    json_t *call;
    json_array_foreach(r.calls, i, call)
    {
        const char *name = json_string_value(json_object_get(call, "name"));
        if (json_object_get(call, TE_CUSTOM_CALL))
            continue; /* none of ours: that call's error (custom tool call) */
        struct td_tool *tool = td_registry_find(td_tools, name);
        if (tool && !td_batch_tool_allowed(tool, cred)) {
            char msg[128 + TE_TOOL_NAME_MAX];
            snprintf(msg, sizeof(msg), "tool %.*s is not allowed for uid %d", 2 * TE_TOOL_NAME_MAX,
                     name, (int)cred->uid);
            td_logc(TD_LOG_INFO, id, NULL, "client pid %d uid %d: forbidden tool %s",
                    (int)cred->pid, (int)cred->uid, name);
            ops->error(conn, id, "engine_error", "forbidden_tool", msg,
                       json_pack("{s:s}", "tool_name", name));
            return;
        }
        if (!tool && r.unknown_tool_error)
            continue; /* the call completes with a tool error of its own */
        if (!tool) {
            char msg[128 + TE_TOOL_NAME_MAX];
            snprintf(msg, sizeof(msg), "no tool named %.*s", 2 * TE_TOOL_NAME_MAX, name);
            ops->error(conn, id, "engine_error", "unknown_tool", msg,
                       json_pack("{s:s}", "tool_name", name));
            return;
        }
    }

    /* The request's "policy": each tool narrowed for the batch,
     * then for the call; any widening refuses the batch before a call runs. */
    struct td_tool **narrowed = calloc(r.ncalls + 1, sizeof(*narrowed));
    uint64_t *narrowed_to = calloc(r.ncalls + 1, sizeof(*narrowed_to));
    if (!narrowed || !narrowed_to ||
        narrow_calls(&r, narrowed, narrowed_to, err, sizeof(err)) < 0) {
        drop_narrowed(narrowed, r.ncalls);
        free(narrowed_to);
        ops->error(conn, id, "request_error", "invalid_request",
                   narrowed && narrowed_to ? err : "out of memory", NULL);
        return;
    }

    struct td_batch *b = calloc(1, sizeof(*b));
    if (!b || !(b->calls = calloc(r.ncalls + 1, sizeof(*b->calls))) || !(b->id = strdup(id))) {
        if (b)
            free(b->calls);
        free(b);
        drop_narrowed(narrowed, r.ncalls);
        free(narrowed_to);
        ops->error(conn, id, "engine_error", "internal", "out of memory", NULL);
        return;
    }
    struct td_conn_sched *sched = NULL;
    void *bucket = NULL;
    if (ops->admit(conn, r.subject, r.ncalls, &sched, &bucket, err, sizeof(err)) < 0) {
        free(b->calls);
        free(b->id);
        free(b);
        drop_narrowed(narrowed, r.ncalls);
        free(narrowed_to);
        ops->error(conn, id, "request_error", "invalid_request", err, NULL);
        return;
    }
    if (!ops->add(conn, b, id)) {
        ops->release(conn, bucket, r.ncalls);
        free(b->calls);
        free(b->id);
        free(b);
        drop_narrowed(narrowed, r.ncalls);
        free(narrowed_to);
        snprintf(err, sizeof(err), "batch \"%.64s\" is already running on this connection", id);
        ops->error(conn, id, "request_error", "duplicate_batch", err, NULL);
        return;
    }
    b->owner = *owner;
    b->sched.client = sched;
    b->bucket = bucket;
    b->accepted_ns = uv_hrtime();
    td_batch_link(b);
    b->req = json_incref(req);
    b->r = r;
    b->ncalls = r.ncalls;
    b->max_concurrency = r.max_concurrency ? r.max_concurrency : default_concurrency(r.ncalls);
    json_array_foreach(r.calls, i, call)
    {
        struct call *c = &b->calls[i];
        c->b = b;
        c->index = i;
        c->id = json_string_value(json_object_get(call, "id"));
        c->name = json_string_value(json_object_get(call, "name"));
        c->arguments = json_object_get(call, "arguments");
        /* NULL: a custom tool call, or an unknown tool under "unknown_tool": "error" */
        c->tool = narrowed[i]; /* the reference is the call's now */
        c->policy_timeout_ms = narrowed_to[i];
    }
    free(narrowed);
    free(narrowed_to);
    /* Subscribers learn who runs what before the batch's first event. */
    json_t *list = json_array();
    for (size_t k = 0; k < b->ncalls; k++)
        json_array_append_new(
            list, json_pack("{s:s,s:s}", "id", b->calls[k].id, "name", b->calls[k].name));
    json_t *started =
        json_pack("{s:s,s:s,s:{s:i,s:i,s:i,s:s*},s:o}", "event", "batch_started", "batch", b->id,
                  "client", "pid", (int)cred->pid, "uid", (int)cred->uid, "gid", (int)cred->gid,
                  "subject", r.subject, "calls", list);
    if (started)
        td_batch_publish(b, NULL, started);
    json_decref(started);
    td_logc(TD_LOG_INFO, b->id, NULL,
            "client pid %d uid %d gid %d%s%s: %zu calls, concurrency %llu", (int)cred->pid,
            (int)cred->uid, (int)cred->gid, r.subject ? " subject " : "",
            r.subject ? r.subject : "", b->ncalls, (unsigned long long)b->max_concurrency);
    td_batch_pump(b);
}
