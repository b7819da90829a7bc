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
    e->wnext = NULL;
    if (s->tail)
        s->tail->wnext = e;
    else
        s->head = e;
    s->tail = e;
}

void td_sched_remove(struct td_sched *s, struct td_sched_entry *e)
{
    if (!e->waiting)
        return;
    struct td_sched_entry **pp = &s->head, *prev = NULL;
    while (*pp && *pp != e) {
        prev = *pp;
        pp = &(*pp)->wnext;
    }
    if (*pp)
        *pp = e->wnext;
    if (s->tail == e)
        s->tail = prev;
    e->waiting = false;
}

bool td_sched_may_start(const struct td_sched *s, unsigned max, bool from_queue)
{
    return !(s->used >= max || (!from_queue && s->head));
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
    if (s->used >= max || !s->head)
        return NULL;
    /* Fair across clients: the waiting batch whose client holds the fewest
     * slots, then whose client was served least recently, then the one
     * waiting longest. */
    struct td_sched_entry *b = s->head;
    unsigned best = b->client->slots;
    uint64_t best_seq = b->client->served;
    for (struct td_sched_entry *x = b->wnext; x; x = x->wnext) {
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
