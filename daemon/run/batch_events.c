/*
 * batch_events.c - a batch's events out (batch_int.h): each to the batch's
 * client through its owner's ops, in the order they happen, and to the
 * bus's observers (tail, stats, metrics, audit), which a tail filtered by
 * tool sees only for the calls of its tools.
 */
#include <jansson.h>

#include "batch_int.h"
#include "bus.h"

/* Whether the batch calls any tool named in the set (an object keyed by
 * tool name): what a tail filtered by tool sees of the batch's own events.
 * O(calls) once per batch-level event, whatever the filter's size. */
static bool calls_any(const void *src, const json_t *tools)
{
    const struct td_batch *b = src;
    for (size_t k = 0; k < b->ncalls; k++)
        if (b->calls[k].name && json_object_get(tools, b->calls[k].name))
            return true;
    return false;
}

/* An event of the batch (not stolen) to the bus's observers. */
void td_batch_publish(const struct td_batch *b, const char *tool, const json_t *ev)
{
    td_bus_publish(&(struct td_bus_msg){.kind = TD_BUS_EVENT,
                                        .json = ev,
                                        .batch_id = b->id,
                                        .tool = tool,
                                        .uid = b->owner.cred.uid,
                                        .calls_any = calls_any,
                                        .src = b,
                                        .pid = b->owner.cred.pid,
                                        .subject = b->r.subject});
}

/* Send {"event": name, "batch": id, ...fields} to the batch's client and
 * the subscribers; tool: the call's tool, NULL for the batch's own events.
 * fields is stolen. */
void td_batch_send_event(struct td_batch *b, const char *tool, const char *name, json_t *fields)
{
    json_t *ev = json_pack("{s:s,s:s}", "event", name, "batch", b->id);
    if (ev && fields)
        json_object_update(ev, fields);
    json_decref(fields);
    if (ev)
        td_batch_publish(b, tool, ev);
    b->owner.ops->event(b->owner.data, ev);
}
