/*
 * server_int.h - the parts of the server (server.h) and the connection
 * they share. Each calls only those below it:
 *
 *   server_read.c     accepting a client, reading its request lines
 *   server_ops.c      the ops (a table): what each request does
 *   server_batches.c  a connection's batches: how they report back
 *                     (td_batch_ops) and are admitted
 *   server.c          a connection's life (idle, hang-up, lost, closed), its
 *                     writes and back-pressure; the server-wide counts
 */
#ifndef TD_SERVER_INT_H
#define TD_SERVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <uv.h>

#include "batch.h"
#include "toolexec.h"

/* A bucket of fairness and limits: what one uid holds across its
 * connections (--max-clients-per-uid, --max-queued-calls, its share of the
 * worker slots); or, keyed (uid, subject), what one subject a trusted
 * front names (subject.h) holds across that front's connections: its own
 * --max-queued-calls and its own share of the slots, like a uid's. */
struct uid_use {
    uid_t uid;
    char *subject; /* NULL: the uid's own */
    unsigned conns;
    size_t calls; /* calls of its unfinished batches */
    struct td_uid_sched sched;
    /* a subject's batches queue as one client's (a uid's queue as their
     * connections') */
    struct td_conn_sched client;
    LIST_ENTRY(uid_use) link;
};

struct batch_entry {
    struct td_batch *b;
    char *id;
    bool cancelled;
    LIST_ENTRY(batch_entry) link;
};

struct td_conn {
    uv_pipe_t h;
    te_lines in; /* the request line being read */
    bool eof, dead, closing;
    unsigned pending_writes;
    size_t pending_bytes; /* queued, not yet written */
    bool congested;       /* workers' output paused for this client */
    LIST_HEAD(, batch_entry) batches;
    unsigned nbatches;
    struct ucred cred;
    uv_poll_t hup;        /* after EOF: tells a full close from a half-close */
    int hup_fd;           /* a dup of the socket, -1 when not watching */
    int handles;          /* open libuv handles */
    struct td_tail *tail; /* a subscriber to the event stream */
    bool events_only;     /* accepted on the events socket: requests ignored */
    struct uid_use *uid;  /* NULL only for a connection refused at accept */
    uv_timer_t idle;      /* --idle-timeout */
    uv_idle_t rest;       /* resumes reading after a turn's worth of requests */
    uv_prepare_t flush;   /* writes the turn's events (corked) before the loop waits */
    char *cork;           /* those events' lines, one write for all */
    size_t cork_len, cork_cap;
    size_t turn_bytes; /* read since it last rested */
    struct td_conn_sched sched;
    struct td_spill_owner spills; /* removed when it closes */
    bool idle_closing;            /* told it was idle; closed at the next expiry at the latest */
    LIST_ENTRY(td_conn) link;
    bool watch_tools; /* {"op": "tools", "watch": true}: told of each reload */
};

/* server.c */
/* The bucket of (uid, subject), subject NULL for the uid's own, made when
 * new; NULL when out of memory. Freed by td_uid_use_put once it holds no
 * connection and no call. */
struct uid_use *td_uid_use_get(uid_t uid, const char *subject);
void td_uid_use_put(struct uid_use *u);
/* Its request line buffer, within --max-request-buffer. */
void td_conn_lines_init(struct td_conn *c);
/* Counted among the connections (and its uid's): how many there are now. */
unsigned td_conn_add(struct td_conn *c);
/* Closed when nothing more is owed to it or asked of it. */
void td_conn_maybe_close(struct td_conn *c);
/* The client is gone for good: its batches are cancelled. */
void td_conn_lost(struct td_conn *c, const char *why);
/* After EOF: tells a full close from a half-close. */
void td_conn_watch_hup(struct td_conn *c);
/* --idle-timeout's timer callback. */
void td_conn_on_idle(uv_timer_t *t);
/* Room for need bytes of c's line among every client's: false when c lost
 * its own line. */
bool td_conn_make_room(struct td_conn *c, size_t need);

/* server_batches.c */
extern const struct td_batch_ops td_conn_batch_ops;
struct batch_entry *td_conn_find_batch(struct td_conn *c, const char *id);

/* server_ops.c */
/* Make c a subscriber to the event stream (tools, batches: its filters). */
void td_conn_subscribe(struct td_conn *c, json_t *tools, json_t *batches);
/* One request line of c, to its op. */
void td_conn_handle_line(struct td_conn *c, char *line, size_t len);

#endif
