/*
 * instance.c - an MCP server's instances: "instance": "session" (defs/
 * mcpdef.c), one server per batch, kept across the batch's calls of its
 * tools and gone with the batch; "shared", a pool of them per server.
 *
 * An instance is a worker of its own (worker.c, serving): the bridge in
 * serve mode (mcpbridge/bridge_serve.c), started by the first call that
 * needs it, with the sandbox a call of its tool gets (view, uid, cgroup,
 * filter, egress proxy, seccomp listener), which the instance, not the
 * call, owns. It is keyed by its server and, for a call narrowed by a
 * "policy" (defs/narrow.c), by that narrowed tool too: a narrowed call
 * never shares a less narrow instance. Its calls are served one at a time
 * (one request frame in flight, the rest queued here), each with its own
 * timeout: the worker's timer, armed per call. A response frame ends the
 * call in flight; the worker's own end (a timeout, a crash, a cancel) ends
 * the call in flight with that result and the instance with it: the
 * batch's next call of the server starts a fresh one (nothing of the dead
 * one is trusted). Its batch closes it (td_instances_close at completion,
 * cancellation, daemon stop; a reload leaves it to its batch, which holds
 * its tools): the worker is abandoned, which kills its whole tree.
 *
 * "instance": "shared": a pool per server definition instead (struct
 * td_pool), its instances made the same way by the call that first needs
 * one and serving any batch's calls: an idle one takes a call, else a new
 * one while the pool has fewer than "instances" (default 1), else the one
 * with the fewest calls before it. An instance is recycled (killed, the
 * next call starting a fresh one) after "recycle_calls" answers, reaped
 * after "idle_ms" idle, started afresh after a crash by the next call;
 * the pools are retired at a reload and at daemon stop (td_instances_retire:
 * idle ones killed at once, busy ones once their calls are over). A call
 * narrowed by a policy never goes to a pool: it gets its batch's own.
 *
 * Bounds: no more instances in all than --max-workers, and no more of one
 * server than its "instances" (a session's default: --max-workers); a call
 * that would need one more fails at once (cause.instance_ceiling). Its
 * calls take the batch's worker slots as any call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "bigres.h"
#include "config.h"
#include "instance.h"
#include "log.h"
#include "registry.h"
#include "tool.h"
#include "toolexec.h"

struct td_icall {
    struct td_instance *inst;
    td_result_cb cb;
    void *data;
    td_progress_cb progress;
    struct td_tool *tool;
    json_t *request; /* {"name", "arguments"} as the bridge takes it */
    char *batch_id, *call_id;
    uint64_t timeout_ms;
    TAILQ_ENTRY(td_icall) link;
};

struct td_pool;

struct td_instance {
    struct td_instance *next; /* in its batch's set, or its pool's */
    struct td_pool *pool;     /* "shared": its pool; NULL: a batch's */
    unsigned served;          /* calls its worker answered (recycle_calls) */
    uv_timer_t *idle;         /* a pool's: its idle_ms, armed while idle */
    TAILQ_ENTRY(td_instance) all;
    char server[TE_TOOL_NAME_MAX + 1];
    struct td_tool *narrowed; /* a narrowed tool's own instance; NULL: none */
    struct td_worker *w;      /* NULL: none running (the next call starts one) */
    struct td_icall *cur;     /* in flight */
    TAILQ_HEAD(, td_icall) queue;
    int refs;        /* its set's, and one for each callback out in progress */
    bool closed;     /* its set let it go */
    bool cancelling; /* its batch is cancelled: no fresh instance for the rest */
};

/* "shared": one pool per server definition (its generation: a reload's
 * definition has a pool of its own), its instances serving any batch's
 * calls, recycled after recycle_calls, reaped after idle_ms idle, restarted
 * on demand after a crash, retired at a reload and at daemon stop. */
struct td_pool {
    TAILQ_ENTRY(td_pool) link;
    char server[TE_TOOL_NAME_MAX + 1];
    unsigned gen; /* the definition's (tool.h mcp_gen) */
    unsigned max, recycle_calls;
    uint64_t idle_ms;
    struct td_instance *set;
    unsigned n;   /* instances in set (alive or not) */
    int refs;     /* its instances, and one while it is being retired */
    bool retired; /* out of the list: a reload's or a stop's */
};

static void pool_unref(struct td_pool *p)
{
    if (--p->refs == 0)
        free(p);
}

static TAILQ_HEAD(, td_instance) all = TAILQ_HEAD_INITIALIZER(all);
static TAILQ_HEAD(, td_pool) pools = TAILQ_HEAD_INITIALIZER(pools);
static unsigned alive;

bool td_instance_wanted(const struct td_tool *t)
{
    return t && t->mcp_tool && t->mcp_instance != TD_MCP_CALL;
}

unsigned td_instances_alive(void)
{
    return alive;
}

unsigned td_instances_of(const char *server)
{
    unsigned n = 0;
    struct td_instance *i;
    TAILQ_FOREACH(i, &all, all)
        if (i->w && strcmp(i->server, server) == 0)
            n++;
    return n;
}

void td_instances_each(void (*fn)(void *data, const char *server, unsigned n), void *data)
{
    struct td_instance *i, *j;
    TAILQ_FOREACH(i, &all, all) {
        if (!i->w)
            continue;
        bool first = true; /* each server once, at its first instance */
        for (j = TAILQ_FIRST(&all); j != i && first; j = TAILQ_NEXT(j, all))
            first = !(j->w && strcmp(j->server, i->server) == 0);
        if (first)
            fn(data, i->server, td_instances_of(i->server));
    }
}

static void icall_free(struct td_icall *ic)
{
    td_tool_unref(ic->tool);
    json_decref(ic->request);
    free(ic->batch_id);
    free(ic->call_id);
    free(ic);
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

static void inst_unref(struct td_instance *i)
{
    if (--i->refs > 0)
        return;
    TAILQ_REMOVE(&all, i, all);
    td_tool_unref(i->narrowed);
    if (i->pool)
        pool_unref(i->pool);
    if (i->idle)
        uv_close((uv_handle_t *)i->idle, timer_closed);
    free(i);
}

/* ic's result out (its callback, once); ic freed. */
static void icall_done(struct td_icall *ic, json_t *result, const struct td_call_facts *f)
{
    td_result_cb cb = ic->cb;
    void *data = ic->data;
    icall_free(ic);
    if (cb)
        cb(data, result, f);
    else {
        json_decref(result);
        if (f)
            td_big_unref(f->big);
    }
}

static void serve_next(struct td_instance *i);

/* The worker forgotten: killed, its end (if any) no more ours. */
static void drop_worker(struct td_instance *i)
{
    if (!i->w)
        return;
    struct td_worker *w = i->w;
    i->w = NULL;
    i->served = 0;
    alive--;
    if (i->idle)
        uv_timer_stop(i->idle);
    td_worker_abandon(w);
}

static void pool_idle(struct td_instance *i);
static void close_one(struct td_instance *i);
static void pool_unlink(struct td_instance *i);

/* The worker's result: its own end. The call in flight ends with it. */
static void inst_ended(void *data, json_t *result, const struct td_call_facts *f)
{
    struct td_instance *i = data;
    i->w = NULL;
    i->served = 0;
    alive--;
    struct td_icall *ic = i->cur;
    i->cur = NULL;
    i->refs++;
    if (ic)
        icall_done(ic, result, f);
    else {
        td_logc(TD_LOG_INFO, NULL, NULL, "instance of %s ended between calls", i->server);
        json_decref(result);
        td_big_unref(f ? f->big : NULL);
    }
    if (!i->closed && (!i->cancelling || i->pool))
        serve_next(i); /* on a fresh instance (a pool's serve other batches) */
    pool_idle(i);
    inst_unref(i);
}

static void inst_answer(void *data, json_t *result)
{
    struct td_instance *i = data;
    struct td_icall *ic = i->cur;
    i->cur = NULL;
    if (!ic) { /* a frame no call asked for: nothing of the instance is trusted */
        json_decref(result);
        drop_worker(i);
        return;
    }
    i->refs++;
    i->served++;
    icall_done(ic, result,
               &(struct td_call_facts){.uid = i->w ? td_worker_uid(i->w) : -1, .ru = NULL});
    /* recycled: its next call (if any) starts a fresh one */
    if (i->pool && i->pool->recycle_calls && i->served >= i->pool->recycle_calls)
        drop_worker(i);
    if (!i->closed)
        serve_next(i);
    pool_idle(i);
    inst_unref(i);
}

static void inst_progress(void *data, const json_t *progress)
{
    struct td_instance *i = data;
    if (i->cur && i->cur->progress)
        i->cur->progress(i->cur->data, progress);
}

static bool ceiling(const struct td_instance *i, const struct td_tool *t, json_t **why)
{
    unsigned per = i->pool            ? i->pool->max
                   : t->mcp_instances ? t->mcp_instances
                                      : td_cfg.max_workers;
    unsigned in_all = td_cfg.max_workers;
    unsigned mine = i->pool ? 0 : td_instances_of(i->server); /* a pool's bounds itself */
    if (alive < in_all && mine < per)
        return false;
    *why = json_pack("{s:{s:s,s:I,s:I}}", "instance_ceiling", "server", i->server, "limit",
                     (json_int_t)(mine >= per ? per : in_all), "alive",
                     (json_int_t)(mine >= per ? mine : alive));
    return true;
}

/* The worker of i started for ic (its tool, its sandbox); false with ic's
 * result in *result when it cannot be. */
static bool start(struct td_instance *i, struct td_icall *ic, json_t **result)
{
    json_t *why = NULL;
    if (ceiling(i, ic->tool, &why)) {
        char detail[160];
        snprintf(detail, sizeof(detail),
                 "no instance of %s can start: its ceiling of instances is reached", i->server);
        *result =
            te_tool_error_new(TE_HANDLER_EXIT, ic->tool->name, ic->call_id, detail, why, NULL);
        return false;
    }
    json_t *req = json_pack("{s:b}", "serve", 1);
    struct td_worker_spec spec = {.tool = ic->tool,
                                  .batch_id = ic->batch_id,
                                  .call_id = ic->call_id,
                                  .request = req,
                                  .timeout_ms = ic->timeout_ms,
                                  .progress = inst_progress,
                                  .serve = true,
                                  .answer = inst_answer};
    i->w = td_worker_start(&spec, inst_ended, i, result);
    json_decref(req);
    if (!i->w)
        return false;
    alive++;
    td_logc(TD_LOG_DEBUG, ic->batch_id, ic->call_id, "instance of %s started", i->server);
    return true;
}

/* The next queued call sent, on a fresh instance when none runs. */
static void serve_next(struct td_instance *i)
{
    while (!i->cur && !TAILQ_EMPTY(&i->queue)) {
        struct td_icall *ic = TAILQ_FIRST(&i->queue);
        TAILQ_REMOVE(&i->queue, ic, link);
        json_t *result = NULL;
        if (!i->w && !start(i, ic, &result)) {
            icall_done(ic, result, NULL);
            if (i->closed)
                return;
            continue;
        }
        i->cur = ic;
        if (td_worker_send(i->w, ic->batch_id, ic->call_id, ic->request, ic->timeout_ms) == 0)
            return;
        /* its worker is ending (its result taken, not yet out): a fresh one */
        i->cur = NULL;
        drop_worker(i);
        TAILQ_INSERT_HEAD(&i->queue, ic, link);
        if (!start(i, ic, &result)) {
            TAILQ_REMOVE(&i->queue, ic, link);
            icall_done(ic, result, NULL);
            continue;
        }
    }
}

static void server_of(const struct td_tool *t, char *out)
{
    const char *dot = strchr(t->name, '.');
    size_t n = dot ? (size_t)(dot - t->name) : strlen(t->name);
    if (n > TE_TOOL_NAME_MAX)
        n = TE_TOOL_NAME_MAX;
    memcpy(out, t->name, n);
    out[n] = '\0';
}

static struct td_instance *inst_new(const char *server, struct td_tool *narrowed,
                                    struct td_instance **set)
{
    struct td_instance *i = calloc(1, sizeof(*i));
    if (!i)
        return NULL;
    snprintf(i->server, sizeof(i->server), "%s", server);
    i->narrowed = narrowed ? td_tool_ref(narrowed) : NULL;
    TAILQ_INIT(&i->queue);
    i->refs = 1;
    i->next = *set;
    *set = i;
    TAILQ_INSERT_TAIL(&all, i, all);
    return i;
}

/* ---- "shared": pools ------------------------------------------------------ */

static void on_idle(uv_timer_t *t)
{
    struct td_instance *i = t->data;
    if (!i->cur && TAILQ_EMPTY(&i->queue)) {
        td_logc(TD_LOG_DEBUG, NULL, NULL, "instance of %s idle %llu ms: reaped", i->server,
                (unsigned long long)i->pool->idle_ms);
        drop_worker(i);
    }
}

/* A pool's instance with nothing to do: its idle timer armed. */
static void pool_idle(struct td_instance *i)
{
    if (i->pool && i->pool->retired && !i->closed && !i->cur && TAILQ_EMPTY(&i->queue)) {
        close_one(i); /* its pool retired: it goes once idle */
        return;
    }
    if (!i->pool || i->closed || !i->w || i->cur || !TAILQ_EMPTY(&i->queue) || !i->pool->idle_ms)
        return;
    if (!i->idle && (i->idle = malloc(sizeof(*i->idle)))) {
        uv_timer_init(td_loop, i->idle);
        i->idle->data = i;
    }
    if (i->idle)
        uv_timer_start(i->idle, on_idle, i->pool->idle_ms, 0);
}

static unsigned queued(const struct td_instance *i)
{
    unsigned n = i->cur ? 1 : 0;
    const struct td_icall *ic;
    TAILQ_FOREACH(ic, &i->queue, link)
        n++;
    return n;
}

static struct td_pool *pool_for(const struct td_tool *t, const char *server)
{
    struct td_pool *p;
    TAILQ_FOREACH(p, &pools, link)
        if (p->gen == t->mcp_gen && strcmp(p->server, server) == 0)
            return p;
    if (!(p = calloc(1, sizeof(*p))))
        return NULL;
    snprintf(p->server, sizeof(p->server), "%s", server);
    p->gen = t->mcp_gen;
    p->max = t->mcp_instances ? t->mcp_instances : 1;
    p->recycle_calls = t->mcp_recycle_calls;
    p->idle_ms = t->mcp_idle_ms;
    p->refs = 1; /* the list's */
    TAILQ_INSERT_TAIL(&pools, p, link);
    return p;
}

/* The instance of p a call goes to: an idle one, else a new one while p
 * has room, else the one with the fewest calls before it. */
static struct td_instance *pool_pick(struct td_pool *p)
{
    struct td_instance *i, *best = NULL;
    for (i = p->set; i; i = i->next)
        if (!i->cur && TAILQ_EMPTY(&i->queue) && i->w)
            return i;
    for (i = p->set; i; i = i->next)
        if (!i->cur && TAILQ_EMPTY(&i->queue))
            return i; /* not running: started for the call */
    if (p->n < p->max && (i = inst_new(p->server, NULL, &p->set))) {
        i->pool = p;
        p->n++;
        p->refs++;
        return i;
    }
    for (i = p->set; i; i = i->next)
        if (!best || queued(i) < queued(best))
            best = i;
    return best;
}

/* i out of its pool's set. */
static void pool_unlink(struct td_instance *i)
{
    struct td_instance **pp = &i->pool->set;
    while (*pp && *pp != i)
        pp = &(*pp)->next;
    if (*pp)
        *pp = i->next;
    i->next = NULL;
}

void td_instances_retire(void)
{
    struct td_pool *p;
    while ((p = TAILQ_FIRST(&pools))) {
        TAILQ_REMOVE(&pools, p, link);
        p->retired = true; /* no new call; freed with its last instance */
        /* a call in flight or queued is its batch's: it ends first (its
         * batch cancels it at a stop); what is idle goes now, the rest
         * once idle (pool_idle) */
        struct td_instance *i = p->set, *next;
        for (; i; i = next) {
            next = i->next;
            if (!i->cur && TAILQ_EMPTY(&i->queue))
                close_one(i);
        }
        pool_unref(p); /* the list's */
    }
}

/* ---- calls ---------------------------------------------------------------- */

struct td_icall *td_instance_call(struct td_instance **set, const struct td_worker_spec *s,
                                  td_result_cb cb, void *data, json_t **result)
{
    char server[TE_TOOL_NAME_MAX + 1];
    server_of(s->tool, server);
    struct td_tool *narrowed = s->tool->parent ? s->tool : NULL;
    struct td_icall *ic = calloc(1, sizeof(*ic));
    const char *mcp_name = s->tool->argv && s->tool->mcp_cmd > 2 ? s->tool->argv[2] : "";
    if (ic) {
        ic->request = json_pack("{s:s,s:O}", "name", mcp_name, "arguments",
                                json_object_get(s->request, "arguments"));
        ic->batch_id = strdup(s->batch_id);
        ic->call_id = strdup(s->call_id);
    }
    struct td_instance *i = NULL;
    if (ic && s->tool->mcp_instance == TD_MCP_SHARED && !narrowed) {
        struct td_pool *p = pool_for(s->tool, server);
        i = p ? pool_pick(p) : NULL;
    } else if (ic) {
        /* a session's, or a narrowed call of a shared server: its batch's */
        i = *set;
        while (i && !(strcmp(i->server, server) == 0 && i->narrowed == narrowed))
            i = i->next;
        if (!i)
            i = inst_new(server, narrowed, set);
    }
    if (!ic || !i || !ic->request || !ic->batch_id || !ic->call_id) {
        if (ic)
            icall_free(ic);
        *result = te_tool_error_new(TE_HANDLER_EXIT, s->tool->name, s->call_id, "out of memory",
                                    NULL, NULL);
        return NULL;
    }
    ic->inst = i;
    ic->tool = td_tool_ref(s->tool);
    ic->cb = cb;
    ic->data = data;
    ic->progress = s->progress;
    ic->timeout_ms = s->timeout_ms;
    if (!i->cur && !i->w && !start(i, ic, result)) {
        icall_free(ic);
        return NULL;
    }
    if (i->idle)
        uv_timer_stop(i->idle);
    TAILQ_INSERT_TAIL(&i->queue, ic, link);
    if (!i->cur) {
        /* sent now; its answer comes from the loop, never from in here */
        struct td_icall *first = TAILQ_FIRST(&i->queue);
        TAILQ_REMOVE(&i->queue, first, link);
        i->cur = first;
        if (td_worker_send(i->w, first->batch_id, first->call_id, first->request,
                           first->timeout_ms) < 0) {
            /* its worker is ending: the call is sent on a fresh one once
             * its end is out (inst_ended) */
            i->cur = NULL;
            TAILQ_INSERT_HEAD(&i->queue, first, link);
        }
    }
    return ic;
}

static json_t *cancelled(const struct td_icall *ic)
{
    return te_tool_error_new(TE_HANDLER_EXIT, ic->tool->name, ic->call_id, "cancelled",
                             json_pack("{s:b}", "cancelled", 1), NULL);
}

void td_instance_cancel(struct td_icall *ic)
{
    struct td_instance *i = ic->inst;
    i->refs++;
    if (i->cur == ic) {
        /* its worker's cancel ends the call at once (inst_ended); a batch's
         * instance's queued calls are not started on a fresh one while
         * their batch is cancelled: each is cancelled in turn (a pool's
         * are other batches' too: they are) */
        i->cancelling = true;
        if (i->w)
            td_worker_cancel(i->w);
        i->cancelling = false;
    } else {
        TAILQ_REMOVE(&i->queue, ic, link);
        icall_done(ic, cancelled(ic), NULL);
        pool_idle(i);
    }
    inst_unref(i);
}

static void close_one(struct td_instance *i)
{
    if (i->pool) {
        pool_unlink(i);
        i->pool->n--;
    }
    i->closed = true;
    drop_worker(i);
    if (i->cur) {
        i->cur->cb = NULL;
        icall_free(i->cur);
        i->cur = NULL;
    }
    struct td_icall *ic;
    while ((ic = TAILQ_FIRST(&i->queue))) {
        TAILQ_REMOVE(&i->queue, ic, link);
        icall_free(ic);
    }
    inst_unref(i);
}

void td_instances_close(struct td_instance **set)
{
    while (*set) {
        struct td_instance *i = *set;
        *set = i->next;
        close_one(i);
    }
}
