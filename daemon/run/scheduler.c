/*
 * scheduler.c - the worker-slot scheduler. Calls beyond --max-workers wait here,
 * one call started per turn, shared fairly first across client uids (and
 * the subjects a trusted front names: each a uid's equal, serve/subject.h),
 * then across a uid's connections, then across a connection's batches:
 * neither a big batch nor a uid with many connections, nor a subject
 * flooding its front, can starve the others.
 */
#include <stddef.h>

#include "scheduler.h"

void td_sched_enqueue(struct td_sched *s, struct td_sched_entry *e)
{
    if (e->waiting)
        return;
    e->waiting = true;
    TAILQ_INSERT_TAIL(&s->waiting, e, wlink);
}

void td_sched_remove(struct td_sched *s, struct td_sched_entry *e)
{
    if (!e->waiting)
        return;
    TAILQ_REMOVE(&s->waiting, e, wlink);
    e->waiting = false;
}

bool td_sched_may_start(const struct td_sched *s, unsigned max, bool from_queue)
{
    return !(s->used >= max || (!from_queue && !TAILQ_EMPTY(&s->waiting)));
}

/* A call that starts at once, never queued, is a turn too: else its client
 * and uid would look never served, and tie with one that truly never was
 * (one slot: A's first call starts, A's second and then B's wait; when the
 * slot frees, B's turn comes before A's second). */
static void served(struct td_sched *s, struct td_sched_entry *e)
{
    e->served_seq = ++s->counter;
    e->client->served = e->served_seq;
    e->client->user->served = e->served_seq;
}

void td_sched_take(struct td_sched *s, struct td_sched_entry *e)
{
    s->used++;
    e->slots++;
    e->client->slots++;
    e->client->user->slots++;
    served(s, e);
}

void td_sched_release(struct td_sched *s, struct td_sched_entry *e)
{
    s->used--;
    e->slots--;
    e->client->slots--;
    e->client->user->slots--;
}

/* Whether x goes before b: its uid holds fewer slots, or as many and was
 * served longer ago; within one uid the same for its connection. */
static bool goes_before(const struct td_conn_sched *x, const struct td_conn_sched *b)
{
    if (x->user != b->user) {
        if (x->user->slots != b->user->slots)
            return x->user->slots < b->user->slots;
        return x->user->served < b->user->served;
    }
    if (x->slots != b->slots)
        return x->slots < b->slots;
    return x->served < b->served;
}

/* The slots and last service of a client and of its uid are kept on the
 * connection and the uid's record: summing them over all batches for every
 * waiting batch made each handout O(waiting x batches), and 4,096 one-call
 * batches held the loop for minutes. One pass over the waiting batches,
 * each compared in O(1), is what a handout costs. */
struct td_sched_entry *td_sched_next(struct td_sched *s, unsigned max)
{
    if (s->used >= max || TAILQ_EMPTY(&s->waiting))
        return NULL;
    /* Fair across uids (one uid with 120 connections kept another's call
     * waiting behind all of them), then across the uid's connections, then
     * the batch waiting longest. */
    struct td_sched_entry *b = TAILQ_FIRST(&s->waiting);
    for (struct td_sched_entry *x = TAILQ_NEXT(b, wlink); x; x = TAILQ_NEXT(x, wlink))
        if (goes_before(x->client, b->client))
            b = x;
    served(s, b);
    td_sched_remove(s, b);
    return b;
}
