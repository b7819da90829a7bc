/*
 * scheduler.c - the worker-slot scheduler. Calls beyond --max-workers wait here:
 * batches in round-robin order, one call started per turn, so a big batch
 * cannot starve the others.
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

void td_sched_take(struct td_sched *s, struct td_sched_entry *e)
{
    s->used++;
    e->slots++;
    e->client->slots++;
}

void td_sched_release(struct td_sched *s, struct td_sched_entry *e)
{
    s->used--;
    e->slots--;
    e->client->slots--;
}

/* The client's slots and last service are kept on the connection: summing
 * them over all batches for every waiting batch made each handout
 * O(waiting x batches), and 4,096 one-call batches held the loop for
 * minutes. */
struct td_sched_entry *td_sched_next(struct td_sched *s, unsigned max)
{
    if (s->used >= max || TAILQ_EMPTY(&s->waiting))
        return NULL;
    /* Fair across clients: the waiting batch whose client holds the fewest
     * slots, then whose client was served least recently, then the one
     * waiting longest. */
    struct td_sched_entry *b = TAILQ_FIRST(&s->waiting);
    unsigned best = b->client->slots;
    uint64_t best_seq = b->client->served;
    for (struct td_sched_entry *x = TAILQ_NEXT(b, wlink); x; x = TAILQ_NEXT(x, wlink)) {
        unsigned n = x->client->slots;
        uint64_t q = x->client->served;
        if (n < best || (n == best && q < best_seq)) {
            b = x;
            best = n;
            best_seq = q;
        }
    }
    b->served_seq = ++s->counter;
    b->client->served = b->served_seq;
    td_sched_remove(s, b);
    return b;
}
