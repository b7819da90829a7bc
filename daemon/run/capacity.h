/*
 * capacity.h - what this daemon can take on, for a client placing work
 * over several nodes ({"op": "capacity"}, /metrics): worker slots free,
 * calls queued, sandboxes prepared, and per tool (capacity.c).
 */
#ifndef TD_CAPACITY_H
#define TD_CAPACITY_H

#include <jansson.h>

/* {"tool": {"queued", "running", "spares", "warm"}} for every loaded tool
 * and any other with a call running or queued (a reload took it away);
 * warm: "ready", "starting", "down", or null for a cold tool. */
json_t *td_capacity_tools(void);
/* The capacity event: {"event": "capacity", "max_workers", "free_workers",
 * "running_calls", "queued_calls", "prepared_sandboxes", "shutting_down",
 * "tools": td_capacity_tools()}. NULL when out of memory. */
json_t *td_capacity_event(void);

#endif
