/*
 * tail.c - subscribers to the event stream ({"op": "tail"} or a connection
 * to the events socket): every event of every batch the subscriber may see,
 * optionally filtered by tool and batch, plus a batch_started line naming
 * the client.
 *
 * Who sees what: a subscriber sees the batches of clients with its own uid;
 * root, the daemon's own uid and members of --tail-group see every batch.
 * Membership is the kernel's record of the subscriber's groups when it
 * connected (SO_PEERCRED's gid and SO_PEERGROUPS, Linux 4.13): no NSS
 * lookup, which may block the loop on LDAP, and the same groups its file
 * accesses are checked against.
 *
 * A slow subscriber never slows a batch: each has its own queue of event
 * lines with one write in flight. Everything held for a subscriber (the
 * queue and the line being written) stays within TAIL_QUEUE_MAX: the oldest
 * queued lines are dropped and the subscriber is told how many in a
 * {"event": "lagged", "dropped": N} line before the next one it gets. A line
 * longer than TAIL_LINE_MAX reaches subscribers as a summary without its big
 * members, so the newest event always fits.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include "bus.h"
#include "log.h"
#include "metrics.h"
#include "bigres.h"
#include "tail.h"
#include "toolexec.h"

/* Bytes held for a subscriber (queued plus in flight). */
#define TAIL_QUEUE_MAX (256u * 1024u)
/* Longer lines come as a summary: half the queue, so the newest line fits
 * whatever is in flight; above the default content cut (100000 bytes), so a
 * call's cut content reaches subscribers whole. */
#define TAIL_LINE_MAX (TAIL_QUEUE_MAX / 2)
/* A summary keeps the members no longer than this, up to SUMMARY_MAX. */
#define SUMMARY_MEMBER_MAX 1024
#define SUMMARY_MAX (8u * 1024u)
/* Filters: names per filter and their bytes in all. A filter is a hash set,
 * so its size does not cost per event; the caps bound what a subscriber
 * holds (two 400,000-name filters were 35 s of stall as linear lists). */
#define TAIL_FILTER_NAMES 1024
#define TAIL_FILTER_BYTES (64u * 1024u)
/* Groups read from SO_PEERGROUPS (NGROUPS_MAX is 65536). */
#define PEER_GROUPS_MAX 65536

struct item {
    STAILQ_ENTRY(item) link;
    char *data;
    size_t len;
};

struct td_tail {
    struct td_conn *conn;
    td_tail_write_fn write; /* the owner's (server.c), upward */
    uid_t uid;
    bool all;                /* sees every client's batches */
    json_t *tools, *batches; /* filters: sets (objects keyed by name), or NULL */
    STAILQ_HEAD(, item) queue;
    size_t bytes;  /* queued plus in flight */
    size_t flight; /* the line being written */
    unsigned long long dropped;
    bool writing;
    bool gone; /* freed by its owner while a write was in flight */
    LIST_ENTRY(td_tail) link;
};

static LIST_HEAD(, td_tail) subs;
static bool have_group;
static gid_t tail_gid;

static void on_bus(void *data, const struct td_bus_msg *m);

int td_tail_setup(const char *group)
{
    if (td_bus_subscribe(on_bus, NULL) < 0)
        return -1;
    if (!group)
        return 0;
    errno = 0;
    struct group *gr = getgrnam(group);
    if (!gr) {
        td_log(TD_LOG_ERR, "--tail-group %s: %s", group, errno ? strerror(errno) : "no such group");
        return -1;
    }
    tail_gid = gr->gr_gid;
    have_group = true;
    return 0;
}

/* Whether the peer on fd was in the --tail-group when it connected. */
static bool in_tail_group(int fd, gid_t gid)
{
    if (!have_group)
        return false;
    if (gid == tail_gid)
        return true;
    gid_t small[64], *groups = small;
    socklen_t len = sizeof(small);
    int rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len);
    if (rc < 0 && errno == ERANGE && len <= PEER_GROUPS_MAX * sizeof(gid_t)) {
        groups = malloc(len);
        rc = groups ? getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) : -1;
    }
    bool found = false;
    static bool warned; /* once: before Linux 4.13 it fails for everyone */
    if (rc < 0 && !warned) {
        warned = true;
        td_log(TD_LOG_WARN, "SO_PEERGROUPS: %s; only the primary group counts for --tail-group",
               strerror(errno));
    }
    for (size_t i = 0; rc == 0 && i < len / sizeof(gid_t) && !found; i++)
        found = groups[i] == tail_gid;
    if (groups != small)
        free(groups);
    return found;
}

/* A filter as a set; NULL with err naming the field and the limit. */
static json_t *make_set(const char *field, const json_t *list, bool *bad, char *err, size_t errlen)
{
    *bad = false;
    if (!list || json_is_null(list))
        return NULL;
    if (!json_is_array(list)) {
        snprintf(err, errlen, "%s: expected an array of strings", field);
        goto fail;
    }
    if (json_array_size(list) > TAIL_FILTER_NAMES) {
        snprintf(err, errlen, "%s: at most %u names (this one has %zu)", field, TAIL_FILTER_NAMES,
                 json_array_size(list));
        goto fail;
    }
    json_t *set = json_object();
    size_t i, bytes = 0;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (!te_json_is_text(v)) {
            snprintf(err, errlen, "%s: expected an array of strings", field);
            json_decref(set);
            goto fail;
        }
        bytes += json_string_length(v);
        if (bytes > TAIL_FILTER_BYTES) {
            snprintf(err, errlen, "%s: at most %u bytes of names in all", field, TAIL_FILTER_BYTES);
            json_decref(set);
            goto fail;
        }
        if (!set || json_object_set(set, json_string_value(v), json_true()) < 0) {
            snprintf(err, errlen, "%s: out of memory", field);
            json_decref(set);
            goto fail;
        }
    }
    return set;
fail:
    *bad = true;
    return NULL;
}

int td_tail_filters(const json_t *tools, const json_t *batches, json_t **tools_set,
                    json_t **batches_set, char *err, size_t errlen)
{
    bool bad;
    *tools_set = make_set("tools", tools, &bad, err, errlen);
    if (bad)
        return -1;
    *batches_set = make_set("batches", batches, &bad, err, errlen);
    if (bad) {
        json_decref(*tools_set);
        *tools_set = NULL;
        return -1;
    }
    return 0;
}

struct td_tail *td_tail_new(td_tail_write_fn write, struct td_conn *c, const struct ucred *cred,
                            int fd)
{
    struct td_tail *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->write = write;
    t->conn = c;
    t->uid = cred->uid;
    t->all = cred->uid == 0 || cred->uid == geteuid() || in_tail_group(fd, cred->gid);
    STAILQ_INIT(&t->queue);
    LIST_INSERT_HEAD(&subs, t, link);
    td_log(TD_LOG_DEBUG, "client pid %d uid %d: tailing %s", (int)cred->pid, (int)cred->uid,
           t->all ? "every batch" : "its own uid's batches");
    return t;
}

static void drop_queue(struct td_tail *t)
{
    for (struct item *i = STAILQ_FIRST(&t->queue), *n; i; i = n) {
        n = STAILQ_NEXT(i, link);
        t->bytes -= i->len;
        free(i->data);
        free(i);
    }
    STAILQ_INIT(&t->queue);
}

void td_tail_set_filters(struct td_tail *t, json_t *tools, json_t *batches)
{
    /* Lines queued under the old filters go with them; the one in flight
     * (the write callback holds t) finishes. */
    drop_queue(t);
    t->dropped = 0;
    json_decref(t->tools);
    json_decref(t->batches);
    t->tools = tools;
    t->batches = batches;
}

void td_tail_free(struct td_tail *t)
{
    if (!t)
        return;
    LIST_REMOVE(t, link);
    drop_queue(t);
    json_decref(t->tools);
    json_decref(t->batches);
    t->tools = t->batches = NULL;
    if (t->writing)
        t->gone = true; /* written() frees it */
    else
        free(t);
}

static void kick(struct td_tail *t);

static void written(struct td_conn *c, void *arg, int status)
{
    struct td_tail *t = arg;
    t->writing = false;
    t->bytes -= t->flight;
    t->flight = 0;
    if (t->gone) {
        free(t);
        return;
    }
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
        td_metrics_tail_lagged(t->dropped);
        t->dropped = 0;
        t->writing = true;
        if (t->write(t->conn, data, (size_t)n, written, t) < 0)
            t->writing = false;
        return;
    }
    struct item *i = STAILQ_FIRST(&t->queue);
    if (!i)
        return;
    STAILQ_REMOVE_HEAD(&t->queue, link);
    /* still counted in t->bytes until written */
    t->flight = i->len;
    t->writing = true;
    if (t->write(t->conn, i->data, i->len, written, t) < 0) {
        t->writing = false;
        t->bytes -= t->flight;
        t->flight = 0;
    }
    free(i);
}

static bool wants(const struct td_tail *t, const struct td_bus_msg *m)
{
    uid_t owner = m->uid;
    const char *batch_id = m->batch_id, *tool = m->tool;
    if (!t->all && owner != t->uid)
        return false;
    if (t->batches && !(batch_id && json_object_get(t->batches, batch_id)))
        return false;
    if (!t->tools)
        return true;
    /* a call's event by its tool; a batch's own events if it calls one */
    return tool ? json_object_get(t->tools, tool) != NULL
                : m->calls_any && m->calls_any(m->src, t->tools);
}

/* ev without its members longer than SUMMARY_MEMBER_MAX, saying which were
 * left out: {"tail_omitted": {"bytes": LINE_BYTES, "members": [...]}}. */
static char *summary(const json_t *ev, size_t line_bytes, size_t *len)
{
    json_t *s = json_object(), *left = json_array();
    const char *key;
    json_t *v;
    size_t total = 0;
    json_object_foreach((json_t *)ev, key, v)
    {
        size_t n = strlen(key);
        size_t dumped = 0;
        char *text = n <= SUMMARY_MEMBER_MAX ? te_json_dumps(v, JSON_ENCODE_ANY, &dumped) : NULL;
        free(text); /* measured as it will be written: numbers as te_json_dumps() keeps them */
        n += dumped;
        bool keep = text && n <= SUMMARY_MEMBER_MAX && total + n <= SUMMARY_MAX;
        if (keep) {
            json_object_set(s, key, v);
            total += n;
        } else if (strlen(key) <= SUMMARY_MEMBER_MAX) {
            json_array_append_new(left, json_string(key));
        }
    }
    json_object_set_new(s, "tail_omitted",
                        json_pack("{s:I,s:o}", "bytes", (json_int_t)line_bytes, "members", left));
    char *line = te_lines_dump(s, len);
    json_decref(s);
    return line;
}

/* An event of a batch (from the bus) to every subscriber that wants it
 * and may see it. */
static void on_bus(void *data, const struct td_bus_msg *m)
{
    (void)data;
    if (m->kind != TD_BUS_EVENT)
        return;
    const json_t *ev = m->json;
    char *line = NULL;
    size_t len = 0;
    struct td_tail *t;
    LIST_FOREACH(t, &subs, link) {
        if (!wants(t, m))
            continue;
        if (!line) {
            /* Subscribers see every client's batches, whose ids may repeat:
             * each event names its client (batch_started has it already). */
            /* a big result's text as its string (a copy: only when someone tails) */
            json_t *whole = td_big_materialize(json_incref((json_t *)ev));
            json_t *named =
                json_object_get(whole, "client") ? json_incref(whole) : json_copy(whole);
            if (named && !json_object_get(ev, "client"))
                json_object_set_new(named, "client",
                                    json_pack("{s:i,s:i,s:s*}", "pid", (int)m->pid, "uid",
                                              (int)m->uid, "subject", m->subject));
            line = named ? te_lines_dump(named, &len) : NULL;
            json_decref(named);
            if (line && len > TAIL_LINE_MAX) {
                char *s = summary(whole, len, &len);
                free(line);
                line = s;
            }
            json_decref(whole);
            if (!line)
                return;
        }
        /* Make room: the oldest queued lines go first. */
        while (!STAILQ_EMPTY(&t->queue) && t->bytes + len > TAIL_QUEUE_MAX) {
            struct item *old = STAILQ_FIRST(&t->queue);
            STAILQ_REMOVE_HEAD(&t->queue, link);
            t->bytes -= old->len;
            t->dropped++;
            free(old->data);
            free(old);
        }
        struct item *i = t->bytes + len <= TAIL_QUEUE_MAX ? malloc(sizeof(*i)) : NULL;
        char *copy = i ? malloc(len) : NULL;
        if (!copy) {
            free(i);
            t->dropped++;
            continue;
        }
        memcpy(copy, line, len);
        *i = (struct item){.data = copy, .len = len};
        STAILQ_INSERT_TAIL(&t->queue, i, link);
        t->bytes += len;
        kick(t);
    }
    free(line);
}

unsigned td_tail_count(void)
{
    unsigned n = 0;
    struct td_tail *t;
    LIST_FOREACH(t, &subs, link)
        n++;
    return n;
}
