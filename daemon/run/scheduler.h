/*
 * scheduler.h - the worker-slot scheduler: which waiting batch gets the next of
 * the daemon's --max-workers slots. No libuv, no JSON: it only counts, so
 * it is tested alone (daemon/unit/test_scheduler.c).
 */
#ifndef TD_SCHEDULER_H
#define TD_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

/* The scheduler's state for a client uid (kept with the server's record of
 * the uid, shared by its connections): worker slots its calls hold, and when
 * a call of it last left the queue. */
struct td_uid_sched {
    unsigned slots;
    uint64_t served;
};

/* The scheduler's state for a client (kept on its connection): the same,
 * for this connection alone, and its uid's. */
struct td_conn_sched {
    unsigned slots;
    uint64_t served;
    struct td_uid_sched *user; /* never NULL once it runs a batch */
};

/* One batch, as the scheduler sees it; embedded in the batch. */
struct td_sched_entry {
    struct td_conn_sched *client;
    TAILQ_ENTRY(td_sched_entry) wlink;
    unsigned slots;      /* worker slots its calls hold */
    uint64_t served_seq; /* when a call of it last left the queue */
    bool waiting;        /* in the queue for a worker slot */
};

struct td_sched {
    unsigned used; /* slots held, all batches */
    uint64_t counter;
    TAILQ_HEAD(td_sched_queue, td_sched_entry) waiting; /* in arrival order */
};
#define TD_SCHED_INITIALIZER(s)                                                                    \
    {                                                                                              \
        .waiting = TAILQ_HEAD_INITIALIZER((s).waiting)                                             \
    }

/* Put e at the back of the queue (no-op when already waiting); take it out
 * (no-op when not waiting). */
void td_sched_enqueue(struct td_sched *s, struct td_sched_entry *e);
void td_sched_remove(struct td_sched *s, struct td_sched_entry *e);
/* A call may start now: a slot is free, and, unless the batch has its turn
 * (from_queue), no batch is waiting that it would overtake. */
bool td_sched_may_start(const struct td_sched *s, unsigned max, bool from_queue);
/* A call of e's takes a slot / gives its slot back. */
void td_sched_take(struct td_sched *s, struct td_sched_entry *e);
void td_sched_release(struct td_sched *s, struct td_sched_entry *e);
/* The waiting batch that has the next free slot, taken out of the queue and
 * marked served; NULL when no slot is free or none waits. */
struct td_sched_entry *td_sched_next(struct td_sched *s, unsigned max);

#endif
