/*
 * instance.h - an MCP server's instances (instance.c): "session", one
 * server per batch, or "shared", a pool per server serving every batch;
 * each serves its calls one at a time.
 */
#ifndef TD_INSTANCE_H
#define TD_INSTANCE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "worker.h"

struct td_instance; /* a batch's instances: a list, its head a pointer */
struct td_icall;    /* a call served by one */

/* t's calls run on an instance (its server says "instance": "session"). */
bool td_instance_wanted(const struct td_tool *t);
/* A call of s->tool on the instance of set keyed by its server and, when
 * narrowed, s->tool itself (or, "shared" and not narrowed, on one of its
 * server's pool): started at its first call, queued behind the call in
 * flight. cb runs exactly once, never from inside this call; NULL
 * with *result the call's tool error when no instance can serve it. */
struct td_icall *td_instance_call(struct td_instance **set, const struct td_worker_spec *s,
                                  td_result_cb cb, void *data, json_t **result);
/* The call ends now as cancelled (cb runs before this returns); an
 * instance serving it is killed. */
void td_instance_cancel(struct td_icall *ic);
/* Every instance of set killed and freed; calls still on them forgotten
 * (their callbacks never run). */
void td_instances_close(struct td_instance **set);
/* "shared": every pool retired (a reload, a stop): its idle instances
 * killed now, the others once their calls are over; the next call of a
 * shared server starts a pool of its own. */
void td_instances_retire(void);
/* Instances alive, in all and of server (its name). */
unsigned td_instances_alive(void);
unsigned td_instances_of(const char *server);
/* fn for each server with instances alive, with their number. */
void td_instances_each(void (*fn)(void *data, const char *server, unsigned n), void *data);

#endif
