/*
 * batch_owner.h - who a batch reports to (batch.h): its owner, the
 * client's connection (server_batches.c), and the ops it gives. A header of
 * its own so that the runner's parts (batch_int.h) hold an owner without
 * batch.h.
 */
#ifndef TD_BATCH_OWNER_H
#define TD_BATCH_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <jansson.h>

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
     * room for ncalls more calls of the client, or of the subject it runs
     * the batch for (NULL: none), each its own bucket of limits and of
     * worker slots: 0 with *sched where the batch queues for its slots and
     * *bucket what release gives back with the calls, or -1 with err
     * saying which limit; the batch known under id (false: a duplicate). */
    unsigned (*next_seq)(void *data);
    int (*admit)(void *data, const char *subject, size_t ncalls, struct td_conn_sched **sched,
                 void **bucket, char *err, size_t errlen);
    void (*release)(void *data, void *bucket, size_t ncalls);
    bool (*add)(void *data, struct td_batch *b, const char *id);
    /* The owner's spill files (spill.c), removed when it goes; NULL: they
     * only age out. */
    struct td_spill_owner *(*spills)(void *data);
};
struct td_batch_owner {
    const struct td_batch_ops *ops;
    void *data;
    struct ucred cred; /* the client's (SO_PEERCRED) */
};
#endif
