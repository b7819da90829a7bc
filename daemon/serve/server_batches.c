/*
 * server_batches.c - a connection's batches (server_int.h): the
 * td_batch_ops a batch reports back through (events, errors, its end, its
 * spills) and is admitted by (--max-client-batches, --max-queued-calls).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "config.h"
#include "server.h"
#include "server_int.h"

/* The batch ops (td_batch_ops) of a connection: how its batches report
 * back and are admitted. */
static bool batch_add(void *data, struct td_batch *b, const char *id)
{
    struct td_conn *c = data;
    struct batch_entry *e;
    LIST_FOREACH(e, &c->batches, link)
        if (strcmp(e->id, id) == 0)
            return false;
    e = malloc(sizeof(*e));
    if (!e || !(e->id = strdup(id))) {
        free(e);
        return false;
    }
    e->b = b;
    e->cancelled = false;
    if (c->congested)
        td_batch_throttle(b, true);
    LIST_INSERT_HEAD(&c->batches, e, link);
    c->nbatches++;
    return true;
}

static void batch_done(void *data, struct td_batch *b)
{
    struct td_conn *c = data;
    struct batch_entry *e;
    LIST_FOREACH(e, &c->batches, link) {
        if (e->b == b) {
            LIST_REMOVE(e, link);
            free(e->id);
            free(e);
            c->nbatches--;
            if (!c->nbatches && td_cfg.idle_timeout_s && !c->closing)
                uv_timer_start(&c->idle, td_conn_on_idle, td_cfg.idle_timeout_s * 1000ULL, 0);
            break;
        }
    }
    td_conn_maybe_close(c);
}

static int batch_admit(void *data, size_t ncalls, char *err, size_t errlen)
{
    struct td_conn *c = data;
    if (c->nbatches >= td_cfg.max_client_batches) {
        snprintf(err, errlen,
                 "batch: %u batches are already running on this connection, the limit "
                 "(--max-client-batches); wait for one to complete",
                 c->nbatches);
        return -1;
    }
    if (!c->uid || ncalls > td_cfg.max_queued_calls - c->uid->calls) {
        snprintf(err, errlen,
                 "calls: %zu more calls would exceed the limit of %zu calls in unfinished "
                 "batches of uid %d (--max-queued-calls; %zu now); wait for a batch to complete",
                 ncalls, td_cfg.max_queued_calls, (int)c->cred.uid, c->uid ? c->uid->calls : 0);
        return -1;
    }
    c->uid->calls += ncalls;
    return 0;
}

static void batch_release(void *data, size_t ncalls)
{
    struct td_conn *c = data;
    c->uid->calls -= ncalls;
}

/* Assigned batch ids ("b-N") count across the daemon's life, not per
 * connection: two clients' batches never share an assigned id, on the
 * events socket nor in a tail's --batches filter (issue 14). */
static unsigned batch_next_seq(void *data)
{
    static unsigned seq;
    (void)data;
    return ++seq;
}

static void batch_event(void *data, json_t *ev)
{
    td_conn_send(data, ev);
}

static void batch_error(void *data, const char *batch, const char *type, const char *reason,
                        const char *message, json_t *metadata)
{
    td_conn_error(data, batch, type, reason, message, metadata);
}

static struct td_spill_owner *batch_spills(void *data)
{
    return &((struct td_conn *)data)->spills;
}

const struct td_batch_ops td_conn_batch_ops = {
    .event = batch_event,
    .done = batch_done,
    .error = batch_error,
    .next_seq = batch_next_seq,
    .admit = batch_admit,
    .release = batch_release,
    .add = batch_add,
    .spills = batch_spills,
};

struct batch_entry *td_conn_find_batch(struct td_conn *c, const char *id)
{
    struct batch_entry *e;
    LIST_FOREACH(e, &c->batches, link)
        if (strcmp(e->id, id) == 0)
            return e;
    return NULL;
}
