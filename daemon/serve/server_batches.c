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

/* The bucket the batch's calls count in: the client's uid, or the subject
 * its trusted front names (a bucket of its own, keyed by the front's uid
 * and the subject). */
static int batch_admit(void *data, const char *subject, size_t ncalls, struct td_conn_sched **sched,
                       void **bucket, char *err, size_t errlen)
{
    struct td_conn *c = data;
    if (c->nbatches >= td_cfg.max_client_batches) {
        snprintf(err, errlen,
                 "batch: %u batches are already running on this connection, the limit "
                 "(--max-client-batches); wait for one to complete",
                 c->nbatches);
        return -1;
    }
    struct uid_use *u = subject && c->uid ? td_uid_use_get(c->cred.uid, subject) : c->uid;
    if (!u || ncalls > td_cfg.max_queued_calls - u->calls) {
        char whose[96];
        if (subject)
            snprintf(whose, sizeof(whose), "subject \"%.64s\"", subject);
        else
            snprintf(whose, sizeof(whose), "uid %d", (int)c->cred.uid);
        snprintf(err, errlen,
                 "calls: %zu more calls would exceed the limit of %zu calls in unfinished "
                 "batches of %s (--max-queued-calls; %zu now); wait for a batch to complete",
                 ncalls, td_cfg.max_queued_calls, whose, u ? u->calls : 0);
        td_uid_use_put(u);
        return -1;
    }
    u->calls += ncalls;
    *sched = subject ? &u->client : &c->sched;
    *bucket = u;
    return 0;
}

static void batch_release(void *data, void *bucket, size_t ncalls)
{
    struct uid_use *u = bucket;
    (void)data;
    u->calls -= ncalls;
    td_uid_use_put(u); /* a subject's: gone with its last call */
}

/* Assigned batch ids ("b-N") count across the daemon's life, not per
 * connection: two clients' batches never share an assigned id, on the
 * events socket nor in a tail's --batches filter. */
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
