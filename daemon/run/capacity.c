/*
 * capacity.c - the capacity of this daemon for placement (capacity.h). The
 * totals are the counts the scheduler keeps (td_batch_running(),
 * td_batch_queued()), so the per-tool numbers sum to them; spares are the
 * ready ones (a spare still being made serves no call yet); an MCP server's
 * instances alive (instance.h) are on its own entry.
 */
#include "capacity.h"
#include "batch.h"
#include "config.h"
#include "instance.h"
#include "registry.h"
#include "spares.h"
#include "template.h"

static json_t *entry(json_t *tools, const char *name)
{
    json_t *e = json_object_get(tools, name);
    if (!e) {
        const char *warm = td_template_state(name);
        e = json_pack("{s:i,s:i,s:i,s:s?}", "queued", 0, "running", 0, "spares", 0, "warm", warm);
        if (!e || json_object_set_new(tools, name, e) < 0)
            return NULL;
    }
    return e;
}

static void count(json_t *e, const char *key)
{
    json_t *v = json_object_get(e, key);
    if (v)
        json_integer_set(v, json_integer_value(v) + 1);
}

static void on_call(void *data, const char *tool, bool running)
{
    json_t *e = entry(data, tool);
    if (e)
        count(e, running ? "running" : "queued");
}

/* An MCP server's instances alive, on its (listing) tool's entry. */
static void on_instances(void *data, const char *server, unsigned n)
{
    json_t *e = entry(data, server);
    if (e)
        json_object_set_new(e, "instances", json_integer((json_int_t)n));
}

json_t *td_capacity_tools(void)
{
    json_t *tools = json_object();
    if (!tools)
        return NULL;
    for (size_t i = 0; td_tools && i < td_tools->n; i++)
        entry(tools, td_tools->tools[i]->name);
    td_batch_each_call(on_call, tools);
    json_t *spares = td_spares_stats();
    const char *name;
    json_t *n;
    json_object_foreach(spares, name, n)
    {
        json_t *e = entry(tools, name);
        if (e)
            json_object_set(e, "spares", n);
    }
    json_decref(spares);
    td_instances_each(on_instances, tools);
    return tools;
}

json_t *td_capacity_event(void)
{
    json_t *tools = td_capacity_tools();
    if (!tools)
        return NULL;
    json_int_t ready = 0;
    const char *name;
    json_t *e;
    json_object_foreach(tools, name, e) ready += json_integer_value(json_object_get(e, "spares"));
    unsigned running = td_batch_running();
    return json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:o}", "event", "capacity",
                     "mcp_instances", (json_int_t)td_instances_alive(), "max_workers",
                     (json_int_t)td_cfg.max_workers, "free_workers",
                     (json_int_t)(running < td_cfg.max_workers ? td_cfg.max_workers - running : 0),
                     "running_calls", (json_int_t)running, "queued_calls",
                     (json_int_t)td_batch_queued(), "prepared_sandboxes", ready,
                     "max_client_batches", (json_int_t)td_cfg.max_client_batches, "shutting_down",
                     td_shutting_down, "tools", tools);
}
