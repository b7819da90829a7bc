/*
 * batch.h - the runner of a {"op": "run"} batch.
 */
#ifndef TD_BATCH_H
#define TD_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>

#include <jansson.h>

/* Content handed back to the model is cut beyond this (head and tail kept):
 * about 25k tokens, what a model can take without crowding out the rest. */
#define TD_CONTENT_BYTES_DEFAULT 100000

#include "scheduler.h" /* struct td_conn_sched */
#include "spill.h"     /* struct td_spill_owner */

struct td_conn;
struct td_batch;
/* How a batch reports to its owner (server.c: the client's connection),
 * given by the caller of td_batch_run: the one ordered path back up, which
 * carries back-pressure. data is the owner's. */
struct td_batch_ops {
    /* An event line for the client (stolen; NULL when it could not be
     * built). */
    void (*event)(void *data, json_t *ev);
    /* The batch completed (its last event sent): forget it. */
    void (*done)(void *data, struct td_batch *b);
    /* A run request that makes no batch: the error line for it. */
    void (*error)(void *data, const char *batch, const char *type, const char *reason,
                  const char *message, json_t *metadata);
    /* Admission: the owner's next batch number (for ids it makes up);
     * room for ncalls more calls (0, or -1 with err saying which limit),
     * given back with release; the batch known under id (false: a
     * duplicate). */
    unsigned (*next_seq)(void *data);
    int (*admit)(void *data, size_t ncalls, char *err, size_t errlen);
    void (*release)(void *data, size_t ncalls);
    bool (*add)(void *data, struct td_batch *b, const char *id);
    /* The owner's spill files (spill.c), removed when it goes; NULL: they
     * only age out. */
    struct td_spill_owner *(*spills)(void *data);
};
struct td_batch_owner {
    const struct td_batch_ops *ops;
    void *data;
    struct ucred cred;           /* the client's (SO_PEERCRED) */
    struct td_conn_sched *sched; /* the client's, shared by its batches */
};
/* Handle a {"op": "run"} request of owner. */
void td_batch_run(const struct td_batch_owner *owner, json_t *req);
void td_batch_free(struct td_batch *b);
/* Calls waiting for a worker slot. */
unsigned td_batch_queued(void);
/* {"op": "decide"}: the client's decision on a call's error (on_tool_error
 * "ask"). -ENOENT with err set when no decision is pending for that call. */
int td_batch_decide(struct td_batch *b, const char *call_id, json_t *decision, char *err,
                    size_t errlen);
/* Calls running in a worker (holding a --max-workers slot). */
unsigned td_batch_running(void);
/* Pause or resume reading the output of the batch's workers; workers started
 * while paused start paused. */
void td_batch_throttle(struct td_batch *b, bool pause);
/* Kill its running workers, start none of its queued calls, complete it
 * with halt {"halted_reason": "cancelled"}. */
void td_batch_cancel(struct td_batch *b);
/* Hold (true) or release (false) handing out worker slots freed meanwhile:
 * around cancelling many batches at once. */
void td_batch_hold(bool hold);

#endif
