/*
 * bus.h - the daemon's event bus: observers that may lag or drop (tail,
 * stats) subscribe with a callback; the owners of what happens (batch,
 * worker) publish, and so call nothing of the observers'. Synchronous: a
 * subscriber's callback runs inside td_bus_publish and must not block; one
 * that falls behind queues or drops on its own side.
 */
#ifndef TD_BUS_H
#define TD_BUS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <jansson.h>

enum td_bus_kind {
    TD_BUS_EVENT,      /* an event line of a batch (json), as its client gets it */
    TD_BUS_CALL_DONE,  /* a call's final result (json), after us microseconds */
    TD_BUS_BATCH_DONE, /* a batch completed */
    TD_BUS_SPAWN,      /* a worker of tool was spawned in us microseconds */
    TD_BUS_DENIED,     /* a call's denials (json: the "denied" list; us: "denied_more") */
};

struct td_bus_msg {
    enum td_bus_kind kind;
    const json_t *json;   /* EVENT: the event; CALL_DONE: the result; not stolen */
    const char *batch_id; /* EVENT */
    const char *tool;     /* the call's tool; NULL for a batch's own events */
    uid_t uid;            /* EVENT: the uid of the batch's client */
    uint64_t us;          /* CALL_DONE: the call's duration; SPAWN: its cost */
    /* EVENT of a batch's own (tool NULL): whether the batch calls any tool
     * named in the set (an object keyed by tool name). */
    bool (*calls_any)(const void *src, const json_t *tools);
    const void *src;
    pid_t pid; /* EVENT: the pid of the batch's client (tail tells clients apart) */
    /* EVENT, CALL_DONE: whom a trusted front ran the batch for (its
     * "subject"), NULL when none */
    const char *subject;
    /* CALL_DONE, for metrics and the audit trail (metrics.c, audit.c): */
    const char *call_id;
    const struct ucred *cred; /* the batch's client (SO_PEERCRED) */
    const json_t *arguments;  /* the call's arguments */
    const json_t *completed;  /* its tool_execution_completed event: times,
                               * resource use, denials */
};

/* tail, stats, metrics and audit today. */
#define TD_BUS_MAX 8

typedef void (*td_bus_cb)(void *data, const struct td_bus_msg *m);
/* 0, or -1 when TD_BUS_MAX subscribers are taken already. */
int td_bus_subscribe(td_bus_cb cb, void *data);
void td_bus_publish(const struct td_bus_msg *m);
/* Drop every subscriber (at exit). */
void td_bus_clear(void);

#endif
