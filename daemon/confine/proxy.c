/*
 * proxy.c - the HTTP proxy the daemon serves inside the network namespace
 * of each call with an egress allow-list (proxy.h; the list: egress.c).
 *
 * The call's child brings up loopback, listens on 127.0.0.1:3128 and hands
 * the socket up (sandbox.c, step 7c); the daemon accepts on it on its own
 * loop. Each connection sends one request head (at most 16 KiB, within
 * 10 s), parsed with http-parser:
 *   - CONNECT host:port: a tunnel (TLS), port as asked;
 *   - an absolute-form http:// request: forwarded with its line in origin
 *     form and "Connection: close" (one request per connection), port 80
 *     unless the URI says;
 *   - anything else: 400.
 * The host and port are checked against the list before any name is
 * resolved; a refused one gets 403 with a body that says why, and is added
 * to the call's denials. The daemon resolves names itself (on threads of
 * the proxy's own, proxy_dns.c: never the loop, nor libuv's thread pool,
 * which a resolver that never answers would stall) and connects to the address it checked,
 * so what the tool asked for and where the bytes go cannot differ; a name
 * that leads only to a loopback or private address is refused
 * (td_egress_private(): DNS rebinding).
 *
 * Bytes are relayed with one read in flight per direction: a side is not
 * read again until what was read from it is written to the other, so a
 * slow reader holds its writer back and memory per connection stays two
 * buffers. Per call, at most max_connections are open at once (one more is
 * closed at once), TD_PROXY_MAX_TOTAL in all (then the listener is closed
 * and the kernel refuses the rest), and max_bytes cross in all (the
 * connection that would cross it is closed, later requests get 403). Every
 * connection of a call is closed when the call ends.
 *
 * This file: a connection's end and its call's, and the relay of an
 * established one; the listener and the request head: proxy_request.c.
 */
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "log.h"
#include "proxy.h"
#include "proxy_dns.h"
#include "proxy_int.h"
#include "proxy_tls.h"

#define RELAY_CHUNK 32768

/* ---- a connection's end ------------------------------------------------- */

void proxy_call_maybe_free(struct td_proxy *c)
{
    if (!c->listen_closed || !LIST_EMPTY(&c->conns) || c->denied)
        return;
    free(c->batch_id);
    free(c->call_id);
    free(c);
}

void proxy_conn_maybe_free(struct conn *k)
{
    if (k->handles > 0)
        return;
    struct td_proxy *c = k->call;
    LIST_REMOVE(k, link);
    c->open--;
    free(k->h.buf);
    if (k->up.buf && k->req_len) /* the request, credentials in it */
        explicit_bzero(k->up.buf, k->req_len);
    free(k->up.buf);
    free(k->down.buf);
    free(k);
    proxy_call_maybe_free(c);
}

void proxy_on_conn_closed(uv_handle_t *h)
{
    struct conn *k = h->data;
    k->handles--;
    proxy_conn_maybe_free(k);
}

void proxy_conn_close(struct conn *k)
{
    if (k->state == CLOSING)
        return;
    k->state = CLOSING;
    td_resolve_cancel(k->gai); /* its callback never comes */
    k->gai = NULL;
    uv_close((uv_handle_t *)&k->client, proxy_on_conn_closed);
    uv_close((uv_handle_t *)&k->timer, proxy_on_conn_closed);
    if (k->upstream_init && !uv_is_closing((uv_handle_t *)&k->upstream))
        uv_close((uv_handle_t *)&k->upstream, proxy_on_conn_closed);
}

/* ---- the call's end ----------------------------------------------------- */

void proxy_on_listen_closed(uv_handle_t *h)
{
    struct td_proxy *c = h->data;
    c->listen_closed = true;
    proxy_call_maybe_free(c);
}

void td_proxy_stop(struct td_proxy *c)
{
    if (!c)
        return;
    if (c->accepted || c->denials)
        td_logc(TD_LOG_INFO, c->batch_id, c->call_id,
                "egress: %u connections (%u refused at max_connections), %u requests refused, "
                "%llu bytes out, %llu bytes in",
                c->accepted, c->refused, c->denials, (unsigned long long)c->bytes_up,
                (unsigned long long)c->bytes_down);
    c->denied = NULL;
    td_tls_stop(c); /* its connections with credentials, in their threads */
    struct conn *k;
    LIST_FOREACH(k, &c->conns, link)
        proxy_conn_close(k);
    if (!uv_is_closing((uv_handle_t *)&c->listen))
        uv_close((uv_handle_t *)&c->listen, proxy_on_listen_closed);
    else /* closed at TD_PROXY_MAX_TOTAL: nothing else may be left to free it */
        proxy_call_maybe_free(c);
}

/* ---- relaying ------------------------------------------------------------- */

static void relay_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *k = h->data;
    struct flow *f = (uv_handle_t *)&k->client == h ? &k->up : &k->down;
    (void)suggested;
    if (!f->buf)
        f->buf = malloc(RELAY_CHUNK);
    *buf = uv_buf_init(f->buf, f->buf ? RELAY_CHUNK : 0);
}

static void on_flow_written(uv_write_t *req, int status)
{
    struct flow *f = req->data;
    if (f->c->state != RELAY)
        return;
    if (status < 0) {
        proxy_conn_close(f->c);
        return;
    }
    proxy_flow_read(f);
}

static void on_flow_shut(uv_shutdown_t *req, int status)
{
    struct flow *f = req->data;
    struct conn *k = f->c;
    (void)status;
    if (k->state == RELAY && k->up.eof && k->down.eof)
        proxy_conn_close(k);
}

static void on_flow_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct conn *k = s->data;
    struct flow *f = s == (uv_stream_t *)&k->client ? &k->up : &k->down;
    struct td_proxy *c = k->call;
    (void)buf;
    if (n == 0)
        return;
    if (n < 0) {
        if (n != UV_EOF) {
            proxy_conn_close(k);
            return;
        }
        uv_read_stop(s);
        f->eof = true;
        f->sreq.data = f;
        if (uv_shutdown(&f->sreq, f->dst, on_flow_shut) < 0)
            proxy_conn_close(k);
        return;
    }
    /* the call's connections whose TLS we end count too (proxy_tls.c) */
    if (proxy_relayed(c) + (uint64_t)n > c->max_bytes) {
        if (!c->exhausted)
            td_logc(TD_LOG_INFO, c->batch_id, c->call_id,
                    "egress: max_bytes (%llu) reached; %s port %u closed",
                    (unsigned long long)c->max_bytes, k->host, k->port);
        c->exhausted = true;
        proxy_conn_close(k);
        return;
    }
    *(f == &k->up ? &c->bytes_up : &c->bytes_down) += (uint64_t)n;
    /* one chunk in flight: not read again until it is written */
    uv_read_stop(s);
    f->wreq.data = f;
    if (uv_write(&f->wreq, f->dst, &(uv_buf_t){.base = f->buf, .len = (size_t)n}, 1,
                 on_flow_written) < 0)
        proxy_conn_close(k);
}

void proxy_flow_read(struct flow *f)
{
    if (!f->eof && uv_read_start(f->src, relay_alloc, on_flow_read) < 0)
        proxy_conn_close(f->c);
}

void proxy_relay(struct conn *k)
{
    k->state = RELAY;
    k->up = (struct flow){.c = k,
                          .src = (uv_stream_t *)&k->client,
                          .dst = (uv_stream_t *)&k->upstream,
                          .buf = k->up.buf};
    k->down = (struct flow){.c = k,
                            .src = (uv_stream_t *)&k->upstream,
                            .dst = (uv_stream_t *)&k->client,
                            .buf = k->down.buf};
    proxy_flow_read(&k->up);
    proxy_flow_read(&k->down);
}
