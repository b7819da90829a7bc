/*
 * mcp_http.h - `toolexec mcp --listen`: MCP's Streamable HTTP transport,
 * one endpoint /mcp, served with libmicrohttpd from the MCP front's own
 * poll loop (no thread: the MCP core is single-threaded).
 *
 *   mcp_http_front.c    the front: the transport joined to MCP cores (one
 *                       a session), the poll loop
 *   mcp_http.c          the listener: options, libmicrohttpd set-up, the
 *                       poll loop's part, a request's checks and routing
 *   mcp_http_check.c    a POST's message against its headers (revisions,
 *                       MCP-Protocol-Version, Mcp-Method, Mcp-Name)
 *   mcp_http_conn.c     a connection's state: its request must arrive
 *                       whole in time (slowloris); its framing
 *   mcp_http_stream.c   exchanges: a request's answer, one JSON object or
 *                       a request-scoped SSE stream; a session's GET stream
 *   mcp_http_session.c  the sessions of 2025-11-25 and before: minted on
 *                       initialize, bounded, expired when idle, DELETE
 *   mcp_http_ready.c    GET /ready (the daemon's capacity) and /healthz for
 *                       a load balancer; the drain after SIGTERM
 *   mcp_http_reply.c    the leaves they all answer with: the clock, a
 *                       JSON-RPC error, a queued response
 *   mcp_http_auth.c     with --resource: an OAuth 2.1 resource server
 *                       (mcp_auth.h), tokens judged off the poll loop
 *
 * Upward to the MCP core only through struct mcp_http_core (below).
 */
#ifndef MCP_HTTP_H
#define MCP_HTTP_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

struct mcp_http;
struct mcp_http_x;       /* an exchange: one POST's answer, or a GET stream */
struct mcp_http_session; /* a session of 2025-11-25 and before */

/* What the transport asks of the MCP core. */
struct mcp_http_core {
    /* One JSON-RPC message of a POST (stolen). A request's answer goes to
     * x through mcp_http_send(); x stays valid until mcp_http_release(x).
     * A notification or a response has x NULL (answered 202 already).
     * s: its session; NULL for a revision without sessions. version: its
     * MCP-Protocol-Version header (a revision we speak), NULL: none.
     * subject: who its bearer token names (o.auth), NULL: none. */
    void (*message)(void *ctx, struct mcp_http_session *s, struct mcp_http_x *x, json_t *msg,
                    const char *version, const char *subject);
    /* The client closed x's stream before its response: the request is
     * cancelled; whatever is sent to x from now on is dropped. */
    void (*closed)(void *ctx, struct mcp_http_x *x);
    /* Session s ended (DELETE, idle expiry, shutdown): what runs in it is
     * cancelled, its state freed. */
    void (*session_end)(void *ctx, struct mcp_http_session *s);
    /* With o.auth: the scopes a tool's declaration names (its tools/list
     * "_meta"), NULL for none; *known false when no tool has that name. */
    const json_t *(*tool_scopes)(void *ctx, const char *tool, bool *known);
};

struct mcp_auth;

struct mcp_http_opts {
    const char *listen;         /* HOST:PORT */
    bool allow_remote;          /* --listen-remote: a non-loopback address */
    const char *const *origins; /* --allow-origin, NULL-terminated; may be NULL */
    size_t body_max;            /* bytes of a POST's body (413 past it) */
    size_t header_max;          /* bytes of a request's headers (431 past them) */
    unsigned conn_max;          /* connections at once */
    unsigned timeout_s;         /* an idle or stalled connection's life */
    unsigned sessions_max;      /* sessions at once */
    unsigned session_idle_s;    /* a session unused this long ends */
    unsigned keepalive_ms;      /* an SSE comment when a stream was quiet this long */
    unsigned drain_s;           /* SIGTERM: calls running may finish this long; 0: exit */
    struct mcp_auth *auth;      /* --resource: bearer tokens needed; NULL: none */
};

/* Defaults of the options above. header_max is also each connection's
 * libmicrohttpd memory pool, which it zeroes whole after every request: an
 * idle keep-alive connection costs that much and MHD's own state, 0.6 KiB
 * (bench/mcp_http.py c: 16.6 KiB a connection at 16 KiB, 15.6 at 15 KiB).
 * 15 KiB of request line and headers: a bearer token of several KiB
 * fits, as in Node.js's 16 KiB. */
#define MCP_HTTP_BODY_MAX (4u << 20)
/* Bytes of requests a daemon connection of the front queues while the
 * daemon does not read (its connections are non-blocking): four bodies. */
#define MCP_HTTP_DAEMON_QUEUE (16u << 20)
#define MCP_HTTP_HEADER_MAX (15u << 10)
#define MCP_HTTP_CONN_MAX 64u
#define MCP_HTTP_TIMEOUT_S 30u
#define MCP_HTTP_SESSIONS_MAX 32u
#define MCP_HTTP_SESSION_IDLE_S 1800u
#define MCP_HTTP_KEEPALIVE_MS 15000u
#define MCP_HTTP_DRAIN_S 30u

/* `toolexec mcp --listen`: serve o until SIGTERM or SIGINT (mcp_http_front.c);
 * returns the exit code. auth: --resource's configuration (its scopes
 * are the tools'), NULL: none. */
struct cli;
struct mcp;
struct mcp_auth_cfg;
/* tmpl: the settings each MCP core of the front starts with (the tool
 * timeout, the heartbeat, the tasks' options) */
int mcp_http_serve(struct cli *cli, const struct mcp_http_opts *o, const struct mcp *tmpl,
                   const struct mcp_auth_cfg *auth);
/* The same, from the module toolexec-mcp-http.so (mcp_http_load.c): the
 * front's libraries loaded only when it serves. */
int mcp_http_serve_module(struct cli *cli, const struct mcp_http_opts *o, const struct mcp *tmpl,
                          const struct mcp_auth_cfg *auth);

/* Start listening; NULL with a message in err. */
struct mcp_http *mcp_http_start(const struct mcp_http_opts *o, const struct mcp_http_core *core,
                                void *ctx, char *err, size_t errlen);
/* Where it listens, "HOST:PORT" (the port the kernel chose for port 0). */
const char *mcp_http_where(const struct mcp_http *h);
/* The descriptors to poll (at most mcp_http_nfds()), filled in from fds[0];
 * returns how many, and lowers *timeout_ms (-1: none) to when work is due. */
size_t mcp_http_nfds(const struct mcp_http *h);
size_t mcp_http_fds(struct mcp_http *h, struct pollfd *fds, int *timeout_ms);
/* After poll: do what is ready (fds as filled in and polled). */
void mcp_http_run(struct mcp_http *h, const struct pollfd *fds, size_t n);
/* Close everything: every session ends, every exchange is closed. */
void mcp_http_stop(struct mcp_http *h);

/* Readiness and drain (mcp_http_ready.c). The prober asks the daemon at
 * socket for its capacity on a connection of its own, whose descriptor
 * (-1: none now) the poll loop watches; h answers /ready from it. */
struct mcp_http_ready;
struct mcp_http_ready *mcp_http_ready_new(struct mcp_http *h, const char *socket);
void mcp_http_ready_free(struct mcp_http_ready *r);
/* *events: what to poll it for (POLLOUT while its request waits). */
int mcp_http_ready_fd(const struct mcp_http_ready *r, short *events);
void mcp_http_ready_readable(struct mcp_http_ready *r, short revents);
/* The daemon's --max-client-batches from its last capacity answer; 0: none
 * known (an older daemon, or no answer yet). */
unsigned mcp_http_ready_batches(const struct mcp_http_ready *r);
/* Begin the drain: /ready says 503, new calls are refused with 503. */
void mcp_http_drain(struct mcp_http *h);
/* The requests not yet answered to the end (GET streams aside); with fail,
 * each one a call holds is answered with the draining error and its call
 * cancelled. */
size_t mcp_http_drain_pending(struct mcp_http *h, bool fail);

/* A message for x's client (stolen): a notification or request before
 * the answer, or the answer (a response), which ends x's stream. */
void mcp_http_send(struct mcp_http_x *x, json_t *msg);
/* The core holds x no more. */
void mcp_http_release(struct mcp_http_x *x);
/* Whether x is an exchange of h's that the core holds (not released):
 * what the core hands back may name one it released already. */
bool mcp_http_x_held(const struct mcp_http *h, const struct mcp_http_x *x);
/* x's session, NULL for none. */
struct mcp_http_session *mcp_http_x_session(const struct mcp_http_x *x);
/* The exchange of session s answering request id, NULL for none. */
struct mcp_http_x *mcp_http_x_find(struct mcp_http *h, const struct mcp_http_session *s,
                                   const json_t *id);
/* A message for the session's own stream, the GET stream (stolen); false
 * when it has none open (the message is dropped). */
bool mcp_http_session_send(struct mcp_http_session *s, json_t *msg);
/* End session s (the core hears session_end). */
void mcp_http_session_end(struct mcp_http_session *s);
/* The core's state of a session, for it to set and read. */
void *mcp_http_session_data(const struct mcp_http_session *s);
void mcp_http_session_set_data(struct mcp_http_session *s, void *data);

#endif
