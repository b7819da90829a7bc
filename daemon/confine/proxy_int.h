/*
 * proxy_int.h - one call's egress proxy (proxy.h) as its parts share it.
 * Each calls only the one below it:
 *
 *   proxy_request.c  the call's listener (td_proxy_start), accepting; a
 *                    connection's request head read and decided, refused
 *                    (403 and the call's denials) or connected out
 *                    (resolved on threads of its own: proxy_dns.c)
 *   proxy_head.c     the head itself, without sockets: parsed, its target
 *                    and Host headers checked, made origin-form
 *   proxy.c          a connection's end and the call's (td_proxy_stop):
 *                    closed, freed; the bytes of an established
 *                    connection (the relay)
 */
#ifndef TD_PROXY_INT_H
#define TD_PROXY_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include <uv.h>

#include "egress.h"
#include "proxy_head.h"
#include "proxy_tls.h"

struct td_denials;
struct td_egress;

enum state { HEAD, RESOLVING, CONNECTING, RELAY, DRAINING, CLOSING };

struct conn;
/* One direction of a relay: read from src, write to dst. */
struct flow {
    struct conn *c;
    uv_stream_t *src, *dst;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    char *buf; /* the one chunk in flight */
    bool eof;
};

struct conn {
    struct td_proxy *call;
    LIST_ENTRY(conn) link;
    enum state state;
    uv_tcp_t client, upstream;
    bool upstream_init;
    uv_timer_t timer;
    struct td_resolve *gai; /* the name being resolved (proxy_dns.h) */
    uv_connect_t creq;
    int handles;
    struct td_proxy_head h; /* h.buf: TD_PROXY_HEAD_MAX bytes, NULL once sent */
    size_t req_len;         /* up.buf holds the request to send, credentials in it */
    char host[256];
    unsigned port;
    struct flow up, down;
};

struct td_proxy {
    const struct td_egress *e;
    struct td_denials *denied; /* NULL once stopped */
    char *batch_id, *call_id;
    uint64_t serial; /* its lookups' owner (proxy_dns.h): never another call's */
    uv_tcp_t listen;
    bool listen_closed;
    LIST_HEAD(, conn) conns;
    unsigned open, accepted, refused, denials;
    uint64_t bytes_up, bytes_down;
    bool exhausted; /* max_bytes reached */
    uint64_t max_bytes;
    unsigned max_connections;
};

/* Frees the call once its listener is closed, its connections gone and it
 * is stopped. */
void proxy_call_maybe_free(struct td_proxy *c);
/* Frees the connection once its handles are closed (then its call, if
 * that was the last). */
void proxy_conn_maybe_free(struct conn *k);
/* uv_close callback of each of a connection's handles (data: the conn). */
void proxy_on_conn_closed(uv_handle_t *h);
/* uv_close callback of the call's listener (data: the call). */
void proxy_on_listen_closed(uv_handle_t *h);
/* Closes every handle of the connection (once; CLOSING from here). */
void proxy_conn_close(struct conn *k);
/* Connected: RELAY from here, both directions read (up.buf and down.buf
 * kept: a request's bytes may be in flight in up). */
void proxy_relay(struct conn *k);
/* Reads the flow's source again, unless it has ended. */
void proxy_flow_read(struct flow *f);

/* The call's bytes relayed so far, both ways: on its connections here and,
 * for a tool with credential headers, on those whose TLS proxy_tls.c ends
 * (asked only then: its lock stays off every other call's data path). */
static inline uint64_t proxy_relayed(const struct td_proxy *c)
{
    return c->bytes_up + c->bytes_down + (td_egress_creds(c->e) ? td_tls_used(c) : 0);
}

#endif
