/*
 * metrics.c - counters and histograms in the Prometheus text format
 * (metrics.h). Per tool: calls by outcome, call duration, time queued
 * before a worker slot, spawn cost; daemon-wide: batches, lagged tail
 * subscribers, denials by kind (from the completed events' "denied"), and
 * the gauges the caller gives.
 *
 * Histograms have fixed buckets: a scrape is O(tools x buckets), and memory
 * is bounded by the number of tools the registry has ever named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <uv.h>

#include "bus.h"
#include "capacity.h"
#include "instance.h"
#include "metrics.h"
#include "outcome.h"
#include "spares.h"
#include "spawner.h"
#include "toolexec.h"

/* Seconds. Calls: 1 ms to 5 min (timeouts are up to minutes). Spawns:
 * 100 us to 250 ms; a mean of 9.9 ms (pidns) and 8.6 ms (pgroup) was
 * measured on 2 cores at load 31 (100 echo calls each), an idle host is
 * several times faster. */
static const double call_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                      0.5,   1,      2.5,   5,    10,    30,   60,  300};
#define NCALL_B (sizeof(call_buckets) / sizeof(call_buckets[0]))
static const double spawn_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                       0.01,   0.025,   0.05,   0.1,   0.25};
#define NSPAWN_B (sizeof(spawn_buckets) / sizeof(spawn_buckets[0]))

struct hist {
    uint64_t count, b[NCALL_B]; /* non-cumulative; NCALL_B >= NSPAWN_B */
    double sum;
};

/* Outcomes other than tool_error, in the order they are written. */
static const char *const plain_outcomes[] = {"ok", "error", "ask_user", "halt", "unknown"};
#define NPLAIN (sizeof(plain_outcomes) / sizeof(plain_outcomes[0]))

struct tool_metrics {
    char *name;
    uint64_t plain[NPLAIN], tool_errors[TE_REASON_COUNT];
    struct hist duration, queued, spawn;
    SLIST_ENTRY(tool_metrics) link;
};

/* Denials by kind, as confinement names them. */
struct denial {
    char *kind;
    uint64_t n;
    SLIST_ENTRY(denial) link;
};

static SLIST_HEAD(, tool_metrics) tools;
static SLIST_HEAD(, denial) denials;
static uint64_t batches_total, lagged_total, dropped_total;
static uint64_t mcp_changed_total, mcp_relists_total;
static double started_s; /* the epoch seconds at init */

static void on_bus(void *data, const struct td_bus_msg *m);

void td_metrics_init(void)
{
    uv_timeval64_t tv;
    if (uv_gettimeofday(&tv) == 0)
        started_s = (double)tv.tv_sec + tv.tv_usec / 1e6;
    td_bus_subscribe(on_bus, NULL);
}

void td_metrics_tail_lagged(uint64_t dropped)
{
    lagged_total++;
    dropped_total += dropped;
}

void td_metrics_mcp_tools_changed(bool relisted)
{
    if (relisted)
        mcp_relists_total++;
    else
        mcp_changed_total++;
}

static struct tool_metrics *find(const char *tool)
{
    struct tool_metrics *t;
    SLIST_FOREACH(t, &tools, link)
        if (strcmp(t->name, tool) == 0)
            return t;
    t = calloc(1, sizeof(*t));
    if (!t || !(t->name = strdup(tool))) {
        free(t);
        return NULL;
    }
    SLIST_INSERT_HEAD(&tools, t, link);
    return t;
}

static void observe(struct hist *h, const double *bounds, size_t n, double v)
{
    size_t i = 0;
    while (i < n && v > bounds[i])
        i++;
    if (i < n)
        h->b[i]++;
    h->count++;
    h->sum += v;
}

static void count_denial(const char *kind, uint64_t n)
{
    struct denial *d;
    SLIST_FOREACH(d, &denials, link)
        if (strcmp(d->kind, kind) == 0)
            break;
    if (!d) {
        d = calloc(1, sizeof(*d));
        if (!d || !(d->kind = strdup(kind))) {
            free(d);
            return;
        }
        SLIST_INSERT_HEAD(&denials, d, link);
    }
    d->n += n;
}

/* A completed event's "denied" (denials.h): distinct entries, each with
 * its "kind"; the ones past the cap only counted in "denied_more", kind
 * unknown. */
static void count_denials(const json_t *completed)
{
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(completed, "denied"), i, v)
    {
        const char *kind = json_string_value(json_object_get(v, "kind"));
        count_denial(kind ? kind : "unknown", 1);
    }
    json_int_t more = json_integer_value(json_object_get(completed, "denied_more"));
    if (more > 0)
        count_denial("unknown", (uint64_t)more);
}

static void count_call(const struct td_bus_msg *m)
{
    struct tool_metrics *t = find(m->tool);
    if (!t)
        return;
    const char *reason, *o = td_outcome_of(m->json, &reason);
    if (reason) {
        int r = te_reason_parse(reason);
        if (r >= 0)
            t->tool_errors[r]++;
        else
            t->plain[NPLAIN - 1]++;
    } else {
        size_t i = 0;
        while (i < NPLAIN - 1 && strcmp(plain_outcomes[i], o) != 0)
            i++;
        t->plain[i]++;
    }
    observe(&t->duration, call_buckets, NCALL_B, (double)m->us / 1e6);
    const json_t *q = json_object_get(m->completed, "queued_ms");
    if (json_is_number(q))
        observe(&t->queued, call_buckets, NCALL_B, json_number_value(q) / 1e3);
    count_denials(m->completed);
}

static void on_bus(void *data, const struct td_bus_msg *m)
{
    (void)data;
    switch (m->kind) {
    case TD_BUS_CALL_DONE:
        if (m->tool)
            count_call(m);
        break;
    case TD_BUS_SPAWN: {
        struct tool_metrics *t = m->tool ? find(m->tool) : NULL;
        if (t)
            observe(&t->spawn, spawn_buckets, NSPAWN_B, (double)m->us / 1e6);
        break;
    }
    case TD_BUS_BATCH_DONE:
        batches_total++;
        break;
    default:
        break;
    }
}

/* A label value: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fputc('\\', f), fputc(*s, f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void hist(FILE *f, const char *name, const char *tool, const struct hist *h,
                 const double *bounds, size_t n)
{
    uint64_t cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += h->b[i];
        fprintf(f, "%s_bucket{tool=\"", name);
        label(f, tool);
        fprintf(f, "\",le=\"%g\"} %llu\n", bounds[i], (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{tool=\"", name);
    label(f, tool);
    fprintf(f, "\",le=\"+Inf\"} %llu\n%s_sum{tool=\"", (unsigned long long)h->count, name);
    label(f, tool);
    fprintf(f, "\"} %.9g\n%s_count{tool=\"", h->sum, name);
    label(f, tool);
    fprintf(f, "\"} %llu\n", (unsigned long long)h->count);
}

static void one_value(FILE *f, const char *name, const char *type, const char *help,
                      unsigned long long v)
{
    head(f, name, type, help);
    fprintf(f, "%s %llu\n", name, v);
}

static void gauge(FILE *f, const char *name, const char *help, unsigned long long v)
{
    one_value(f, name, "gauge", help, v);
}

/* A daemon-wide counter, without labels. */
static void counter(FILE *f, const char *name, const char *help, uint64_t v)
{
    one_value(f, name, "counter", help, (unsigned long long)v);
}

/* The capacity for placement per tool (capacity.h), one gauge per count;
 * warm ready only for warm tools. */
static void tool_gauges(FILE *f)
{
    static const struct {
        const char *key, *name, *help;
    } per[] = {
        {"queued", "toolexecd_tool_calls_queued", "Calls of the tool waiting for a worker slot."},
        {"running", "toolexecd_tool_calls_running", "Calls of the tool holding a worker slot."},
        {"spares", "toolexecd_tool_spares_ready", "Sandboxes prepared ahead for the tool, ready."},
        {"warm", "toolexecd_tool_warm_ready", "A warm tool's template is ready (1) or not (0)."},
        {"instances", "toolexecd_tool_mcp_instances",
         "An MCP server's instances alive (its listing tool's)."},
    };
    json_t *cap = td_capacity_tools();
    for (size_t i = 0; cap && i < sizeof(per) / sizeof(per[0]); i++) {
        head(f, per[i].name, "gauge", per[i].help);
        const char *name;
        json_t *e;
        json_object_foreach(cap, name, e)
        {
            json_t *v = json_object_get(e, per[i].key);
            if (!v || json_is_null(v))
                continue; /* a cold tool has no template, a tool no instances */
            fprintf(f, "%s{tool=\"", per[i].name);
            label(f, name);
            fprintf(f, "\"} %lld\n",
                    json_is_string(v) ? (long long)(strcmp(json_string_value(v), "ready") == 0)
                                      : (long long)json_integer_value(v));
        }
    }
    json_decref(cap);
}

char *td_metrics_text(const struct td_stats_gauges *g, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    struct tool_metrics *t;

    head(f, "toolexecd_build_info", "gauge", "The daemon's version.");
    fprintf(f, "toolexecd_build_info{version=\"%s\"} 1\n", TD_VERSION);
    head(f, "toolexecd_start_time_seconds", "gauge", "When the daemon started, Unix time.");
    fprintf(f, "toolexecd_start_time_seconds %.3f\n", started_s);

    head(f, "toolexecd_calls_total", "counter",
         "Finished calls by tool and outcome (ok, error, ask_user, halt, tool_error with its "
         "reason).");
    SLIST_FOREACH(t, &tools, link) {
        for (size_t i = 0; i < NPLAIN; i++) {
            if (!t->plain[i] && i >= 2) /* ok and error always; the rest once seen */
                continue;
            fputs("toolexecd_calls_total{tool=\"", f);
            label(f, t->name);
            fprintf(f, "\",outcome=\"%s\"} %llu\n", plain_outcomes[i],
                    (unsigned long long)t->plain[i]);
        }
        for (int r = 0; r < TE_REASON_COUNT; r++) {
            if (!t->tool_errors[r])
                continue;
            fputs("toolexecd_calls_total{tool=\"", f);
            label(f, t->name);
            fprintf(f, "\",outcome=\"tool_error\",reason=\"%s\"} %llu\n", te_reason_name(r),
                    (unsigned long long)t->tool_errors[r]);
        }
    }
    head(f, "toolexecd_call_duration_seconds", "histogram",
         "From a call's start in a worker to its final result.");
    SLIST_FOREACH(t, &tools, link)
        hist(f, "toolexecd_call_duration_seconds", t->name, &t->duration, call_buckets, NCALL_B);
    head(f, "toolexecd_call_queued_seconds", "histogram",
         "From its batch's acceptance to a call's start (waiting for a worker slot).");
    SLIST_FOREACH(t, &tools, link)
        hist(f, "toolexecd_call_queued_seconds", t->name, &t->queued, call_buckets, NCALL_B);
    head(f, "toolexecd_spawn_duration_seconds", "histogram",
         "Cost of spawning a worker, until it has exec'd.");
    SLIST_FOREACH(t, &tools, link)
        if (t->spawn.count)
            hist(f, "toolexecd_spawn_duration_seconds", t->name, &t->spawn, spawn_buckets,
                 NSPAWN_B);

    /* Denials by kind, from the completed events' "denied" lists: a
     * distinct entry of a call counts once. */
    head(f, "toolexecd_denials_total", "counter",
         "Operations the confinement of a call denied, by kind.");
    struct denial *d;
    SLIST_FOREACH(d, &denials, link) {
        fputs("toolexecd_denials_total{kind=\"", f);
        label(f, d->kind);
        fprintf(f, "\"} %llu\n", (unsigned long long)d->n);
    }
    /* Warm templates: a place for their gauges once they exist. */

    counter(f, "toolexecd_batches_total", "Batches completed.", batches_total);
    counter(f, "toolexecd_tail_lagged_total",
            "Times a tail subscriber fell behind and was told it lagged.", lagged_total);
    counter(f, "toolexecd_tail_dropped_lines_total",
            "Event lines dropped for lagging tail subscribers.", dropped_total);
    counter(f, "toolexecd_mcp_tools_changed_total",
            "Notices from MCP servers' calls that their tools changed.", mcp_changed_total);
    counter(f, "toolexecd_mcp_relists_total",
            "MCP servers' tools listed again on such notices (coalesced, rate-bounded).",
            mcp_relists_total);

    gauge(f, "toolexecd_workers_running", "Calls running in a worker.", g->running);
    gauge(f, "toolexecd_worker_processes", "Worker processes not yet reaped.", g->processes);
    gauge(f, "toolexecd_workers_max", "The --max-workers limit.", g->max_workers);
    gauge(f, "toolexecd_workers_free", "Worker slots free (max less running).",
          g->running < g->max_workers ? g->max_workers - g->running : 0);
    gauge(f, "toolexecd_calls_queued", "Calls waiting for a worker slot.", g->queued);
    gauge(f, "toolexecd_clients", "Client connections.", g->clients);
    gauge(f, "toolexecd_tail_subscribers", "Event subscribers (tail).", g->subscribers);
    gauge(f, "toolexecd_batches_running", "Batches not yet completed.", g->batches);
    gauge(f, "toolexecd_mcp_instances", "MCP servers' instances alive (session and shared).",
          td_instances_alive());
    if (td_spawner_active()) {
        gauge(f, "toolexecd_spawner_calls", "Calls the spawner holds (sent, not yet ended).",
              td_spawner_in_flight());
        gauge(f, "toolexecd_spares", "Sandboxes prepared ahead, held (ready or being made).",
              td_spares_count());
        head(f, "toolexecd_spawner_restarts_total", "counter", "Times the spawner died.");
        fprintf(f, "toolexecd_spawner_restarts_total %u\n", td_spawner_restarts());
    }
    tool_gauges(f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void td_metrics_free(void)
{
    struct tool_metrics *t;
    while ((t = SLIST_FIRST(&tools))) {
        SLIST_REMOVE_HEAD(&tools, link);
        free(t->name);
        free(t);
    }
    struct denial *d;
    while ((d = SLIST_FIRST(&denials))) {
        SLIST_REMOVE_HEAD(&denials, link);
        free(d->kind);
        free(d);
    }
}
