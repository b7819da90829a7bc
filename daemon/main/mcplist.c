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
 *
 * A server that says its tools changed (notifications/tools/list_changed,
 * during a call of one of its tools or during its listing: the bridge's
 * tools_changed frame, run/worker_output.c) is listed again the same way.
 * Its notices are coalesced: never two listings of one server at once (one
 * notice or a flood during a listing: one more after it), and no sooner
 * than --mcp-relist-interval after its last relisting.
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
#include "metrics.h"
#include "options.h"
#include "registry.h"
#include "template.h"
#include "worker.h"

struct listing {
    struct td_tool *server; /* a reference */
    json_t *result;         /* its call's, once completed */
    struct td_batch *batch; /* NULL until the batch is made */
    bool relist;            /* for the server's notices, not a start or a reload */
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

/* A server's notices that its tools changed, by name (its td_tool is
 * another after each reload); only servers defined have one. */
struct relist {
    uint64_t last; /* loop time its last relisting on a notice started */
    bool started;  /* one has */
    bool wanted;   /* a notice not listed for yet */
    LIST_ENTRY(relist) link;
    char name[];
};
static LIST_HEAD(, relist) relists = LIST_HEAD_INITIALIZER(relists);
/* when the relistings are looked at next */
static uv_timer_t relist_timer;
static bool relist_timer_ready;

static void list_server(struct td_tool *t, bool relist);

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

static struct relist *relist_of(const char *name)
{
    struct relist *r;
    LIST_FOREACH(r, &relists, link)
        if (strcmp(r->name, name) == 0)
            return r;
    return NULL;
}

static bool listing_of(const char *name)
{
    struct listing *l;
    LIST_FOREACH(l, &listings, link)
        if (strcmp(l->server->name, name) == 0)
            return true;
    return false;
}

static void on_relist_timer(uv_timer_t *t);

/* The relistings looked at in ms (0: on the loop's next turn, never from
 * inside the worker or the batch that told: a listing started there would
 * nest one batch in another's callbacks). */
static void relist_arm(uint64_t ms)
{
    if (!relist_timer_ready) {
        uv_timer_init(td_loop, &relist_timer);
        uv_unref((uv_handle_t *)&relist_timer); /* it never holds a stop */
        relist_timer_ready = true;
    }
    if (!uv_is_active((uv_handle_t *)&relist_timer) || uv_timer_get_due_in(&relist_timer) > ms)
        uv_timer_start(&relist_timer, on_relist_timer, ms, 0);
}

/* r's server listed again if it is wanted and may be now; else, when the
 * interval holds it back, the timer set for then. */
static void relist_try(struct relist *r)
{
    struct td_tool *server = td_registry_find(td_tools, r->name);
    if (td_shutting_down || !server || !server->mcp)
        r->wanted = false; /* gone: nothing to list */
    if (!r->wanted || listing_of(r->name))
        return; /* the listing's end looks again */
    uint64_t now = uv_now(td_loop), gap = td_opts.mcp_relist_s * 1000ULL;
    if (r->started && now - r->last < gap) {
        relist_arm(r->last + gap - now);
        return;
    }
    r->wanted = false;
    r->started = true;
    r->last = now;
    td_metrics_mcp_tools_changed(true);
    td_log(TD_LOG_INFO, "MCP server %s: its tools changed: listing them again", r->name);
    list_server(server, true);
}

static void on_relist_timer(uv_timer_t *t)
{
    struct relist *r, *next;
    for (r = LIST_FIRST(&relists); r; r = next) {
        next = LIST_NEXT(r, link);
        relist_try(r);
    }
}

void td_mcplist_changed(const struct td_tool *tool)
{
    char name[TE_TOOL_NAME_MAX + 1];
    /* a server's tools are NAME.TOOL, and NAME has no '.' */
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(tool->name, "."), tool->name);
    td_metrics_mcp_tools_changed(false);
    struct td_tool *server = td_registry_find(td_tools, name);
    if (td_shutting_down || !server || !server->mcp)
        return; /* reloaded away meanwhile */
    struct relist *r = relist_of(name);
    if (!r && (r = calloc(1, sizeof(*r) + strlen(name) + 1))) {
        strcpy(r->name, name);
        LIST_INSERT_HEAD(&relists, r, link);
    }
    if (!r) {
        td_log(TD_LOG_ERR, "MCP server %s: out of memory: its changed tools not listed", name);
        return;
    }
    r->wanted = true;
    relist_arm(0);
}

static void list_done(void *data, struct td_batch *b)
{
    struct listing *l = data;
    char name[TE_TOOL_NAME_MAX + 1];
    snprintf(name, sizeof(name), "%s", l->server->name);
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
        /* those carried over a reload are not the definition's now; a
         * relisting's failure leaves those this definition listed */
        for (size_t i = 0; !l->relist && i < td_tools->n; i++)
            if (of_server(td_tools->tools[i], l->server->name)) {
                register_tools(l->server, NULL);
                break;
            }
    } else {
        register_tools(l->server, tools);
    }
    listing_free(l);
    /* notices that came meanwhile: the listing may predate their change */
    struct relist *r = relist_of(name);
    if (r && r->wanted)
        relist_arm(0);
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
    if (td_shutting_down && relist_timer_ready) {
        uv_close((uv_handle_t *)&relist_timer, NULL);
        relist_timer_ready = false;
    }
    /* at shutdown none is wanted; at a reload, those of servers gone */
    struct relist *r = LIST_FIRST(&relists), *rnext;
    for (; r; r = rnext) {
        rnext = LIST_NEXT(r, link);
        struct td_tool *server = td_registry_find(td_tools, r->name);
        if (td_shutting_down || !server || !server->mcp) {
            LIST_REMOVE(r, link);
            free(r);
        }
    }
}

static void list_server(struct td_tool *t, bool relist)
{
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
        return;
    }
    l->server = td_tool_ref(t);
    l->relist = relist;
    LIST_INSERT_HEAD(&listings, l, link);
    td_batch_run(
        &(struct td_batch_owner){.ops = &list_ops,
                                 .data = l,
                                 .cred = {.pid = getpid(), .uid = geteuid(), .gid = getegid()}},
        req);
    json_decref(req);
}

void td_mcplist_start(void (*changed)(void))
{
    /* the listings below come after every notice so far (and the
     * listings cancelled now list nothing again as they end) */
    struct relist *r;
    LIST_FOREACH(r, &relists, link)
        r->wanted = false;
    td_mcplist_stop(); /* listed for definitions no longer in force */
    on_changed = changed;
    td_worker_on_tools_changed(td_mcplist_changed);
    for (size_t i = 0; i < td_tools->n; i++)
        if (td_tools->tools[i]->mcp)
            list_server(td_tools->tools[i], false);
}
