/*
 * stats.c - what {"op": "stats"} reports: uptime, workers, clients, and per
 * tool its calls by outcome, latency percentiles over its recent calls and
 * the mean cost of spawning its workers. The counters are pushed (the
 * event bus); the gauges come from the caller.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <uv.h>

#include "bus.h"
#include "instance.h"
#include "spares.h"
#include "spawner.h"
#include "stats.h"
#include "toolexec.h"

/* Latency percentiles are over each tool's last LATENCY_SAMPLES calls:
 * recent behaviour, in bounded memory. */
#define LATENCY_SAMPLES 1024

struct tool_stats {
    char *name;
    uint64_t calls, ok, handler_errors, asks, halts, tool_errors[TE_REASON_COUNT];
    uint64_t lat_us[LATENCY_SAMPLES];
    size_t nlat, lat_next;
    uint64_t spawn_us_sum, spawns;
    uint64_t denied[3]; /* entries of its calls' "denied", by kind */
    SLIST_ENTRY(tool_stats) link;
};

static SLIST_HEAD(, tool_stats) all;

/* Denials: entries of calls' "denied" lists, one a call per distinct
 * entry, by kind, plus the entries past a call's cap, and per system call
 * name (a call's repeats are one). */
static const char *const denial_kinds[3] = {"syscall", "network", "filesystem"};
static uint64_t denied_total[3], denied_more;
static json_t *denied_syscalls; /* name -> count */
static uint64_t started_ns, batches_served, calls_total;

static void on_bus(void *data, const struct td_bus_msg *m);

void td_stats_init(void)
{
    started_ns = uv_hrtime();
    td_bus_subscribe(on_bus, NULL); /* tail and stats: 2 of TD_BUS_MAX */
}

static struct tool_stats *find(const char *tool)
{
    struct tool_stats *t;
    SLIST_FOREACH(t, &all, link)
        if (strcmp(t->name, tool) == 0)
            return t;
    t = calloc(1, sizeof(*t));
    if (!t || !(t->name = strdup(tool))) {
        free(t);
        return NULL;
    }
    SLIST_INSERT_HEAD(&all, t, link);
    return t;
}

static void count_call(const char *tool, const json_t *result, uint64_t duration_us)
{
    struct tool_stats *t = find(tool);
    calls_total++;
    if (!t)
        return;
    t->calls++;
    switch (te_result_kind_of(result)) {
    case TE_RESULT_OK:
        t->ok++;
        break;
    case TE_RESULT_ERROR:
        t->handler_errors++;
        break;
    case TE_RESULT_ASK_USER:
        t->asks++;
        break;
    case TE_RESULT_HALT:
        t->halts++;
        break;
    case TE_RESULT_TOOL_ERROR: {
        const char *r =
            json_string_value(json_object_get(json_object_get(result, "tool_error"), "reason"));
        int i = te_reason_parse(r);
        if (i >= 0)
            t->tool_errors[i]++;
        break;
    }
    default:
        break;
    }
    t->lat_us[t->lat_next] = duration_us;
    t->lat_next = (t->lat_next + 1) % LATENCY_SAMPLES;
    if (t->nlat < LATENCY_SAMPLES)
        t->nlat++;
}

static void count_spawn(const char *tool, uint64_t spawn_us)
{
    struct tool_stats *t = find(tool);
    if (t) {
        t->spawn_us_sum += spawn_us;
        t->spawns++;
    }
}

static void count_denied(const char *tool, const json_t *list, uint64_t more)
{
    struct tool_stats *t = find(tool);
    size_t i;
    json_t *e;
    denied_more += more;
    json_array_foreach(list, i, e)
    {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        for (int k = 0; kind && k < 3; k++) {
            if (strcmp(kind, denial_kinds[k]) != 0)
                continue;
            denied_total[k]++;
            if (t)
                t->denied[k]++;
        }
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!kind || strcmp(kind, "syscall") != 0 || !name)
            continue;
        if (!denied_syscalls && !(denied_syscalls = json_object()))
            continue;
        json_t *n = json_object_get(denied_syscalls, name);
        json_object_set_new(denied_syscalls, name, json_integer(n ? json_integer_value(n) + 1 : 1));
    }
}

static json_t *denied_json(const uint64_t by_kind[3])
{
    json_t *o = json_object();
    for (int k = 0; k < 3; k++)
        json_object_set_new(o, denial_kinds[k], json_integer((json_int_t)by_kind[k]));
    return o;
}

/* Counters are pushed: the batch and the worker publish on the bus. */
static void on_bus(void *data, const struct td_bus_msg *m)
{
    (void)data;
    switch (m->kind) {
    case TD_BUS_CALL_DONE:
        count_call(m->tool, m->json, m->us);
        break;
    case TD_BUS_SPAWN:
        count_spawn(m->tool, m->us);
        break;
    case TD_BUS_BATCH_DONE:
        batches_served++;
        break;
    case TD_BUS_DENIED:
        count_denied(m->tool, m->json, m->us);
        break;
    default:
        break;
    }
}

uint64_t td_stats_batches_served(void)
{
    return batches_served;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static json_t *percentiles(const struct tool_stats *t)
{
    if (!t->nlat)
        return json_null();
    uint64_t sorted[LATENCY_SAMPLES];
    memcpy(sorted, t->lat_us, t->nlat * sizeof(sorted[0]));
    qsort(sorted, t->nlat, sizeof(sorted[0]), cmp_u64);
    /* nearest rank */
#define PCT(p) ((double)sorted[(t->nlat * (p) + 99) / 100 - 1] / 1000.0)
    return json_pack("{s:f,s:f,s:f}", "p50", PCT(50), "p90", PCT(90), "p99", PCT(99));
#undef PCT
}

static void on_instances(void *data, const char *server, unsigned n)
{
    json_object_set_new(data, server, json_integer((json_int_t)n));
}

static json_t *instance_counts(void)
{
    json_t *o = json_object();
    if (o)
        td_instances_each(on_instances, o);
    return o;
}

json_t *td_stats_event(const struct td_stats_gauges *g)
{
    json_t *tools = json_object();
    struct tool_stats *t;
    SLIST_FOREACH(t, &all, link) {
        json_t *errs = json_object();
        for (int r = 0; r < TE_REASON_COUNT; r++)
            json_object_set_new(errs, te_reason_name(r),
                                json_integer((json_int_t)t->tool_errors[r]));
        json_object_set_new(
            tools, t->name,
            json_pack("{s:I,s:I,s:I,s:I,s:I,s:o,s:o,s:o}", "calls", (json_int_t)t->calls, "ok",
                      (json_int_t)t->ok, "handler_errors", (json_int_t)t->handler_errors, "asks",
                      (json_int_t)t->asks, "halts", (json_int_t)t->halts, "tool_errors", errs,
                      "latency_ms", percentiles(t), "spawn_us_mean",
                      t->spawns ? json_real((double)t->spawn_us_sum / (double)t->spawns)
                                : json_null()));
        json_object_set_new(json_object_get(tools, t->name), "denied", denied_json(t->denied));
    }
    /* running: calls in a worker; processes: workers not yet reaped */
    json_t *ev = json_pack(
        "{s:s,s:I,s:s,s:{s:i,s:i,s:i,s:i},s:i,s:i,s:{s:i,s:I},s:I,s:o}", "event", "stats",
        "uptime_ms", (json_int_t)((uv_hrtime() - started_ns) / 1000000), "version", TD_VERSION,
        "workers", "running", (int)g->running, "processes", (int)g->processes, "queued",
        (int)g->queued, "max", (int)g->max_workers, "clients", (int)g->clients, "subscribers",
        (int)g->subscribers, "batches", "running", (int)g->batches, "served",
        (json_int_t)batches_served, "calls", (json_int_t)calls_total, "tools", tools);
    /* the spawner (spawner.c): none when calls start on the loop */
    if (td_spawner_active())
        json_object_set_new(ev, "spawner",
                            json_pack("{s:i,s:i,s:i}", "pid", (int)td_spawner_pid(), "restarts",
                                      (int)td_spawner_restarts(), "calls",
                                      (int)td_spawner_in_flight()));
    if (td_spawner_active())
        json_object_set_new(json_object_get(ev, "spawner"), "spares", td_spares_stats());
    /* MCP servers' instances (session and shared, instance.c) alive */
    json_object_set_new(ev, "mcp_instances",
                        json_pack("{s:I,s:o}", "alive", (json_int_t)td_instances_alive(), "servers",
                                  instance_counts()));
    json_t *denied = denied_json(denied_total);
    json_object_set_new(denied, "more", json_integer((json_int_t)denied_more));
    json_object_set_new(denied, "syscall_names",
                        denied_syscalls ? json_copy(denied_syscalls) : json_object());
    json_object_set_new(ev, "denied", denied);
    return ev;
}

void td_stats_free(void)
{
    json_decref(denied_syscalls);
    denied_syscalls = NULL;
    struct tool_stats *t;
    while ((t = SLIST_FIRST(&all))) {
        SLIST_REMOVE_HEAD(&all, link);
        free(t->name);
        free(t);
    }
}
