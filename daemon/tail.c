/*
 * tail.c - subscribers to the event stream ({"op": "tail"} or a connection
 * to the events socket): every event of every batch, optionally filtered by
 * tool and batch, plus a batch_started line naming the client.
 *
 * A slow subscriber never slows a batch: each has its own queue of event
 * lines with one write in flight. When the queue passes TAIL_QUEUE_MAX, the
 * oldest queued lines are dropped and the subscriber is told how many in a
 * {"event": "lagged", "dropped": N} line before the next one it gets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolexecd.h"

/* Queued bytes a subscriber may lag behind before lines are dropped. */
#define TAIL_QUEUE_MAX (256u * 1024u)

struct item {
    struct item *next;
    char *data;
    size_t len;
};

struct td_tail {
    struct td_conn *conn;
    json_t *tools, *batches; /* filters: arrays of strings, or NULL */
    struct item *head, *last;
    size_t bytes;
    unsigned long long dropped;
    bool writing;
    struct td_tail *prev, *next;
};

static struct td_tail *subs;

static bool listed(const json_t *list, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (s && json_is_string(v) && strcmp(json_string_value(v), s) == 0)
            return true;
    }
    return false;
}

struct td_tail *td_tail_new(struct td_conn *c, json_t *tools, json_t *batches)
{
    struct td_tail *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->conn = c;
    t->tools = json_incref(tools);
    t->batches = json_incref(batches);
    t->next = subs;
    if (subs)
        subs->prev = t;
    subs = t;
    return t;
}

void td_tail_free(struct td_tail *t)
{
    if (!t)
        return;
    if (t->prev)
        t->prev->next = t->next;
    else
        subs = t->next;
    if (t->next)
        t->next->prev = t->prev;
    for (struct item *i = t->head, *n; i; i = n) {
        n = i->next;
        free(i->data);
        free(i);
    }
    json_decref(t->tools);
    json_decref(t->batches);
    free(t);
}

static void kick(struct td_tail *t);

static void written(struct td_conn *c, void *arg, int status)
{
    struct td_tail *t = arg;
    t->writing = false;
    if (status == 0)
        kick(t);
}

/* Start writing the next line, telling first how many were dropped. */
static void kick(struct td_tail *t)
{
    if (t->writing)
        return;
    if (t->dropped) {
        char line[64];
        int n =
            snprintf(line, sizeof(line), "{\"event\":\"lagged\",\"dropped\":%llu}\n", t->dropped);
        char *data = strdup(line);
        if (!data)
            return;
        t->dropped = 0;
        t->writing = true;
        if (td_conn_write(t->conn, data, (size_t)n, written, t) < 0)
            t->writing = false;
        return;
    }
    struct item *i = t->head;
    if (!i)
        return;
    t->head = i->next;
    if (!t->head)
        t->last = NULL;
    t->bytes -= i->len;
    t->writing = true;
    if (td_conn_write(t->conn, i->data, i->len, written, t) < 0)
        t->writing = false;
    free(i);
}

static bool wants(const struct td_tail *t, const char *batch_id, const struct td_batch *b,
                  const char *tool)
{
    if (t->batches && !listed(t->batches, batch_id))
        return false;
    if (!t->tools)
        return true;
    /* a call's event by its tool; a batch's own events if it calls one */
    return tool ? listed(t->tools, tool) : td_batch_calls_any(b, t->tools);
}

void td_tail_publish(const json_t *ev, const struct td_batch *b, const char *batch_id,
                     const char *tool)
{
    char *line = NULL;
    size_t len = 0;
    for (struct td_tail *t = subs; t; t = t->next) {
        if (!wants(t, batch_id, b, tool))
            continue;
        if (!line) {
            line = json_dumps(ev, JSON_COMPACT);
            if (!line)
                return;
            len = strlen(line);
            line[len++] = '\n'; /* over the NUL */
        }
        struct item *i = malloc(sizeof(*i));
        char *copy = i ? malloc(len) : NULL;
        if (!copy) {
            free(i);
            t->dropped++;
            continue;
        }
        memcpy(copy, line, len);
        *i = (struct item){.data = copy, .len = len};
        if (t->last)
            t->last->next = i;
        else
            t->head = i;
        t->last = i;
        t->bytes += len;
        while (t->bytes > TAIL_QUEUE_MAX && t->head != t->last) {
            struct item *old = t->head;
            t->head = old->next;
            t->bytes -= old->len;
            t->dropped++;
            free(old->data);
            free(old);
        }
        kick(t);
    }
    free(line);
}

unsigned td_tail_count(void)
{
    unsigned n = 0;
    for (struct td_tail *t = subs; t; t = t->next)
        n++;
    return n;
}
