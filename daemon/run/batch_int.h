/*
 * batch_int.h - the runner (batch.h) as its parts share it: a batch and its
 * calls. Each part calls only those below it:
 *
 *   batch_run.c     a run request: parsed, its tools checked for the client,
 *                   admitted by its owner, the batch made and started
 *   batch.c         the batch run: calls started within the worker slots,
 *                   their results routed (on_tool_error), encoded, cut,
 *                   spilled and sent; cancelled, settled, completed, freed
 *   batch_events.c  a batch's events out: to its client and the bus
 *   batch_messages.c  its messages: each call's content in its client's
 *                   LLM API's shape, with the reasons for its denials
 */
#ifndef TD_BATCH_INT_H
#define TD_BATCH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/resource.h>

#include <jansson.h>
#include <uv.h>

#include "batch_owner.h"
#include "scheduler.h"
#include "toolexec.h"

struct td_big;
struct td_icall;
struct td_instance;
struct td_tool;
struct td_worker;

enum call_state { CALL_QUEUED, CALL_RUNNING, CALL_DONE };

struct call {
    struct td_batch *b;
    size_t index;
    const char *id, *name; /* borrowed from the request */
    json_t *arguments;
    struct td_tool *tool;
    struct td_worker *worker;
    struct td_icall *icall; /* or its place on an MCP server's instance (instance.h) */
    enum call_state state;
    json_t *content;    /* JSON string, once done */
    struct td_big *big; /* the result's big text (bigres.h) while an event may name it */
    json_t *halt;       /* this call's halt candidate, if it halts */
    bool is_error;      /* its result is an error (Anthropic's is_error) */
    bool slot;          /* holds one of the daemon's --max-workers slots */
    uint64_t started_ns, done_ns;
    uint64_t timeout_ms;        /* effective: the tool's ceiling and the batch's */
    uint64_t policy_timeout_ms; /* the request's "policy" narrowing (0: none) */
    struct rusage ru;           /* the worker's, from wait4() */
    bool have_ru;
    json_t *denied;    /* {"denied": [...], "learned": {...}} for the completed event; NULL: none */
    const char *start; /* warm tools: "warm" or "cold" (template.c) */
    json_t *enforced;  /* what it ran under (enforced.c); NULL: it never ran */
    json_t *awaiting;  /* an error waiting for the client's decision */
    uv_timer_t *ask_timer; /* ... until the call's timeout */
};

struct td_batch {
    struct td_batch_owner owner; /* its client's connection (server.c) */
    char *id;
    json_t *req; /* owns the calls */
    te_run_request r;
    struct call *calls;
    size_t ncalls, next, running, done;
    uint64_t max_concurrency;
    bool pumping;
    bool cancelled;
    uint64_t accepted_ns;
    struct td_sched_entry sched;       /* its place in the worker-slot queue */
    void *bucket;                      /* its owner's admission (uid or subject), released */
    struct td_batch *anext, *aprev;    /* all batches, for per-client counts */
    bool throttled;                    /* its client is not reading: workers' output paused */
    size_t settle_from;                /* cancelled: calls from here on still to settle */
    TAILQ_ENTRY(td_batch) settle_link; /* in the list of batches being settled */
    bool settling;
    struct td_instance *instances; /* its MCP servers' instances (instance.h) */
};

/* batch_events.c */
/* An event of the batch (not stolen) to the bus's observers. */
void td_batch_publish(const struct td_batch *b, const char *tool, const json_t *ev);
/* Send {"event": name, "batch": id, ...fields} to the batch's client and
 * the subscribers; tool: the call's tool, NULL for the batch's own events.
 * fields is stolen. */
void td_batch_send_event(struct td_batch *b, const char *tool, const char *name, json_t *fields);

/* batch_messages.c */
/* batch_completed's "messages": one per call, in input order. */
json_t *td_batch_messages(const struct td_batch *b);

/* batch.c */
/* Counted among all batches (td_batch_free takes it out). */
void td_batch_link(struct td_batch *b);
/* Start what the batch's concurrency and the worker slots allow; completes
 * (and frees) the batch once every call is done. */
void td_batch_pump(struct td_batch *b);

#endif
