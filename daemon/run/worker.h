/*
 * worker.h - one call's process.
 */
#ifndef TD_WORKER_H
#define TD_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/resource.h>

#include <jansson.h>

struct td_tool;

struct td_worker;
struct td_denials;
/* What is known of a call besides its result. */
struct td_call_facts {
    const struct rusage *ru;         /* the worker's (wait4), NULL when not known */
    const struct td_denials *denied; /* what its confinement refused; NULL: nothing */
    struct td_big *big;              /* the result's big text (bigres.h), the callee's to unref */
    long long uid;                   /* the uid its process ran as; -1: not known */
};
/* facts: NULL when nothing is known (the call never had a worker). */
typedef void (*td_result_cb)(void *data, json_t *result /* stolen */,
                             const struct td_call_facts *facts);
/* A progress frame's object (borrowed), before the result; same data. */
typedef void (*td_progress_cb)(void *data, const json_t *progress);
struct td_worker_spec {
    struct td_tool *tool;
    const char *batch_id, *call_id;
    json_t *request; /* the request frame's object */
    uint64_t timeout_ms;
    td_progress_cb progress; /* NULL: a progress frame is an invalid response */
    const char **start;      /* warm tools: set to "warm" or "cold" (may be NULL) */
    /* A serving worker (an MCP server's instance, instance.c): request is
     * written and stdin kept open for td_worker_send(); no timer until a
     * call is sent; each response frame goes to answer, the result
     * callback is its own end. */
    bool serve;
    void (*answer)(void *data, json_t *result /* stolen */);
};
/* Start a worker. The result callback runs exactly once, never from inside
 * this call; on failure to spawn returns NULL and *result is the call's
 * handler_exit tool error. */
struct td_worker *td_worker_start(const struct td_worker_spec *s, td_result_cb cb, void *data,
                                  json_t **result);
/* Forget the callback (its owner is going away); the worker is killed. */
void td_worker_abandon(struct td_worker *w);
/* Kill it now; its result is a handler_exit with cause.cancelled. */
void td_worker_cancel(struct td_worker *w);
void td_worker_setup(void);
/* A serving worker's next call: request (borrowed) written as one frame,
 * the call's ids its log's and errors', its timeout armed; 0, or < 0 when
 * it cannot be written (the worker is then failing). */
int td_worker_send(struct td_worker *w, const char *batch_id, const char *call_id,
                   const json_t *request, uint64_t timeout_ms);
/* Its run uid (-1: not known yet). */
long long td_worker_uid(const struct td_worker *w);
/* Stop / resume reading a worker's stdout (its client is not reading). */
void td_worker_throttle(struct td_worker *w, bool pause);
unsigned td_workers_alive(void);
/* cb (its owner's, upward) runs after a worker is freed. */
void td_worker_on_gone(void (*cb)(void));
/* cb (upward) runs for each {"tools_changed": true} frame an MCP server's
 * worker writes before its response (its server's tools changed), with the
 * worker's tool: the server's listing tool or one of its tools. Unset, or
 * from any other tool, such a frame is the response (invalid_return). */
void td_worker_on_tools_changed(void (*cb)(const struct td_tool *tool));

#endif
