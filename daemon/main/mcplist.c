/*
 * mcplist.c - the tools of the MCP servers defined ("mcp_server",
 * defs/mcpdef.c), found and registered. At start and after each reload,
 * each server's listing tool is run as a batch of the daemon's own (a call
 * like any: confined as its definition says, its timeout, its audit), so
 * the loop never waits on a server. Its answer, the server's tools, is
 * made one definition each (NAME.TOOL) and put in the registry in force as
 * a reload would, clients told as at a reload. An answer for a definition
 * no longer in force (reloaded meanwhile) is dropped: the reload lists
 * again.
 */
#include <sys/queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "config.h"
#include "declare.h"
#include "log.h"
#include "mcpdef.h"
#include "mcplist.h"
#include "registry.h"
#include "template.h"

struct listing {
    struct td_tool *server; /* a reference */
    json_t *result;         /* its call's, once completed */
    struct td_batch *batch; /* NULL until the batch is made */
    LIST_ENTRY(listing) link;
};
/* the listings in flight: cancelled at shutdown and at the next reload */
static LIST_HEAD(, listing) listings = LIST_HEAD_INITIALIZER(listings);

static void listing_free(struct listing *l)
{
    LIST_REMOVE(l, link);
    td_tool_unref(l->server);
    json_decref(l->result);
    free(l);
}

static void (*on_changed)(void);
/* the daemon's own batches: one worker slot at a time each, counted as
 * any client's */
static struct td_uid_sched own_uid;
static struct td_conn_sched own_sched = {.user = &own_uid};

static void list_event(void *data, json_t *ev)
{
    struct listing *l = data;
    const char *name = json_string_value(json_object_get(ev, "event"));
    if (name && strcmp(name, "tool_execution_completed") == 0) {
        json_decref(l->result);
        l->result = json_incref(json_object_get(ev, "result"));
    }
    json_decref(ev);
}

static void list_error(void *data, const char *batch, const char *type, const char *reason,
                       const char *message, json_t *metadata)
{
    struct listing *l = data;
    td_log(TD_LOG_ERR, "MCP server %s: its tools not listed: %s: %s", l->server->name,
           reason ? reason : type, message ? message : "");
    json_decref(metadata);
    /* no batch was made: nothing else comes for it */
    listing_free(l);
}

static unsigned list_next_seq(void *data)
{
    static unsigned seq;
    (void)data;
    return ++seq;
}

static int list_admit(void *data, const char *subject, size_t ncalls, struct td_conn_sched **sched,
                      void **bucket, char *err, size_t errlen)
{
    *sched = &own_sched;
    *bucket = NULL;
    return 0;
}

static void list_release(void *data, void *bucket, size_t ncalls) {}

static bool list_add(void *data, struct td_batch *b, const char *id)
{
    ((struct listing *)data)->batch = b;
    return true;
}

static struct td_spill_owner *list_spills(void *data)
{
    return NULL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(struct td_tool *const *)a)->name, (*(struct td_tool *const *)b)->name);
}

/* One listed tool made a definition and parsed: NULL (logged) when it
 * cannot be one. */
static struct td_tool *one_tool(struct td_tool *server, json_t *listed)
{
    char why[512];
    struct td_tool *t = NULL;
    json_t *def = td_mcpdef_tool_def(server, listed, why, sizeof(why));
    if (def &&
        td_registry_parse_def(td_mcpdef_dir(server), server->file, def, &t, why, sizeof(why)) < 0)
        t = NULL;
    json_decref(def);
    if (!t) {
        td_log(TD_LOG_WARN, "MCP server %s: a tool left out: %s", server->name, why);
        return NULL;
    }
    td_mcpdef_tool_made(server, t);
    if (td_registry_find(td_tools, t->name) && !td_registry_find(td_tools, t->name)->mcp_tool) {
        td_log(TD_LOG_WARN, "MCP server %s: tool %s left out: a tool of that name is defined",
               server->name, t->name);
        td_tool_unref(t);
        return NULL;
    }
    return t;
}

/* t is a tool of the server named name */
static bool of_server(const struct td_tool *t, const char *name)
{
    size_t plen = strlen(name);
    return t->mcp_tool && strncmp(t->name, name, plen) == 0 && t->name[plen] == '.';
}

/* The registry in force, with server's tools as listed in place of those
 * it had (none: tools NULL). */
static void register_tools(struct td_tool *server, json_t *tools)
{
    size_t n = td_tools->n + json_array_size(tools), k = 0;
    struct td_registry *r = calloc(1, sizeof(*r));
    if (!r || !(r->tools = calloc(n + 1, sizeof(*r->tools)))) {
        free(r);
        td_log(TD_LOG_ERR, "MCP server %s: out of memory", server->name);
        return;
    }
    for (size_t i = 0; i < td_tools->n; i++) {
        struct td_tool *t = td_tools->tools[i];
        if (of_server(t, server->name))
            continue; /* its tools as listed before */
        r->tools[k++] = td_tool_ref(t);
    }
    size_t old = k, i;
    json_t *listed;
    json_array_foreach(tools, i, listed)
    {
        struct td_tool *t = one_tool(server, listed);
        for (size_t j = old; t && j < k; j++)
            if (strcmp(r->tools[j]->name, t->name) == 0) {
                td_log(TD_LOG_WARN, "MCP server %s: tool %s listed twice: the first kept",
                       server->name, t->name);
                td_tool_unref(t);
                t = NULL;
            }
        if (t)
            r->tools[k++] = t;
    }
    r->n = k;
    qsort(r->tools, r->n, sizeof(*r->tools), by_name);
    char err[512];
    if (td_declare_check_names(r, err, sizeof(err)) < 0) {
        td_log(TD_LOG_ERR, "MCP server %s: its tools not registered: %s", server->name, err);
        td_registry_free(r);
        return;
    }
    td_registry_free(td_tools);
    td_tools = r;
    td_log(TD_LOG_INFO, "MCP server %s: %zu tools registered", server->name, k - old);
    /* as at a reload: a warm server's tools get their templates (those
     * of tools listed again unchanged are kept) */
    td_template_sync();
    if (on_changed)
        on_changed();
}

static void list_done(void *data, struct td_batch *b)
{
    struct listing *l = data;
    json_t *ok = json_object_get(l->result, "ok");
    json_t *tools = json_object_get(ok, "tools");
    if (td_shutting_down) {
        /* nothing to register for */
    } else if (td_registry_find(td_tools, l->server->name) != l->server) {
        td_log(TD_LOG_INFO, "MCP server %s: listed for definitions since reloaded",
               l->server->name);
    } else if (!json_is_array(tools)) {
        char *text = l->result ? json_dumps(l->result, JSON_COMPACT) : NULL;
        td_log(TD_LOG_ERR, "MCP server %s: its tools not listed: %.1000s", l->server->name,
               text ? text : "no result");
        free(text);
        /* those carried over a reload are not the definition's now */
        for (size_t i = 0; i < td_tools->n; i++)
            if (of_server(td_tools->tools[i], l->server->name)) {
                register_tools(l->server, NULL);
                break;
            }
    } else {
        register_tools(l->server, tools);
    }
    listing_free(l);
}

static const struct td_batch_ops list_ops = {
    .event = list_event,
    .done = list_done,
    .error = list_error,
    .next_seq = list_next_seq,
    .admit = list_admit,
    .release = list_release,
    .add = list_add,
    .spills = list_spills,
};

struct td_registry *td_mcplist_carry(const struct td_registry *old, struct td_registry *fresh)
{
    size_t extra = 0, n = fresh->n;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < old->n; i++) {
            struct td_tool *t = old->tools[i], *s;
            char server[TE_TOOL_NAME_MAX + 1];
            if (!t->mcp_tool)
                continue;
            snprintf(server, sizeof(server), "%.*s", (int)strcspn(t->name, "."), t->name);
            s = td_registry_find(fresh, server);
            if (!s || !s->mcp || td_registry_find(fresh, t->name))
                continue; /* the server gone, or a tool of that name defined */
            if (pass == 0)
                extra++;
            else
                fresh->tools[fresh->n++] = td_tool_ref(t);
        }
        if (pass == 0 && !extra)
            return fresh;
        struct td_tool **more =
            pass == 0 ? realloc(fresh->tools, (n + extra + 1) * sizeof(*more)) : NULL;
        if (pass == 0 && !more)
            return fresh; /* not carried: they come back once listed */
        if (more)
            fresh->tools = more;
    }
    qsort(fresh->tools, fresh->n, sizeof(*fresh->tools), by_name);
    char err[512];
    if (td_declare_check_names(fresh, err, sizeof(err)) < 0) {
        /* what the new definitions say wins: the carried go */
        size_t k = 0;
        for (size_t i = 0; i < fresh->n; i++)
            if (fresh->tools[i]->mcp_tool)
                td_tool_unref(fresh->tools[i]);
            else
                fresh->tools[k++] = fresh->tools[i];
        fresh->n = k;
    }
    return fresh;
}

void td_mcplist_stop(void)
{
    /* each cancel completes its batch (done frees it), others untouched */
    struct listing *l = LIST_FIRST(&listings), *next;
    for (; l; l = next) {
        next = LIST_NEXT(l, link);
        if (l->batch)
            td_batch_cancel(l->batch);
    }
}

void td_mcplist_start(void (*changed)(void))
{
    td_mcplist_stop(); /* listed for definitions no longer in force */
    on_changed = changed;
    for (size_t i = 0; i < td_tools->n; i++) {
        struct td_tool *t = td_tools->tools[i];
        if (!t->mcp)
            continue;
        struct listing *l = calloc(1, sizeof(*l));
        char id[TE_TOOL_NAME_MAX + 16];
        /* an id of its own kind: never one a client's "b-N" could be */
        snprintf(id, sizeof(id), "mcp-list-%s", t->name);
        json_t *req = l ? json_pack("{s:s,s:[{s:s,s:s,s:{}}]}", "batch", id, "calls", "id", "list",
                                    "name", t->name, "arguments")
                        : NULL;
        if (!req) {
            free(l);
            td_log(TD_LOG_ERR, "MCP server %s: out of memory", t->name);
            continue;
        }
        l->server = td_tool_ref(t);
        LIST_INSERT_HEAD(&listings, l, link);
        td_batch_run(
            &(struct td_batch_owner){.ops = &list_ops,
                                     .data = l,
                                     .cred = {.pid = getpid(), .uid = geteuid(), .gid = getegid()}},
            req);
        json_decref(req);
    }
}
