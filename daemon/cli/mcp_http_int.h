/*
 * mcp_http_int.h - what the parts of the HTTP transport (mcp_http.h)
 * share: the listener, an exchange, a session.
 */
#ifndef MCP_HTTP_INT_H
#define MCP_HTTP_INT_H

#include <microhttpd.h>
#include <stdint.h>

#include "cli_sys.h"
#include "mcp_auth.h"
#include "mcp_http.h"
#include "toolexec.h"

/* MCP's error codes of the HTTP transport (2026-07-28's schema). */
enum {
    MCP_HTTP_INVALID_PARAMS = -32602,
    MCP_HTTP_HEADER_MISMATCH = -32020,
    MCP_HTTP_UNSUPPORTED_VERSION = -32022,
    /* ours, below that range: the replica drains (mcp_http_ready.c) */
    MCP_HTTP_DRAINING = -32010,
};

#define MCP_HTTP_SESSION_ID_LEN 32 /* hex characters */

enum x_state {
    X_RECEIVING, /* the body is coming in */
    X_WAITING,   /* given to the core; nothing sent yet (suspended) */
    X_JSON,      /* the answer is there, as one JSON object, to queue */
    X_SSE,       /* a stream: the response queued, events as they come */
    X_ANSWERED,  /* a response queued at once (an error, 202) */
    X_AUTH,      /* its token with the token checks' thread (suspended) */
};

/* What the request is, kept while its token is judged. */
enum x_verb { VERB_POST, VERB_GET, VERB_DELETE };

struct mcp_http_x {
    struct mcp_http *h;
    struct MHD_Connection *conn;
    struct mcp_http_session *session;
    enum x_state state;
    bool get_stream;  /* a session's GET stream: no answer ends it */
    bool initialize;  /* a request to initialize: mints the session */
    bool modern;      /* 2026-07-28 or later: no session */
    json_t *id;       /* the request's id */
    bool accepts_sse; /* Accept allows text/event-stream */
    bool suspended;   /* MHD's connection, while nothing is to be written */
    bool core_holds;  /* given to the core, not released yet */
    bool gone;        /* MHD is done with the connection's request */
    bool aborted;     /* the client went away: close without more */
    bool finished;    /* the answer (or the stream's end) was written out */
    int fd;           /* the connection's socket, watched while suspended */
    bool watched;     /* fd is in the listener's watch_fd */
    char *body;       /* the POST's body as it came */
    size_t body_len;
    bool too_big;
    json_t *answer; /* X_JSON: the response to queue */
    char *out;      /* X_SSE: bytes not yet taken by MHD */
    size_t out_len, out_off;
    bool out_end; /* the stream ends once out is empty */
    long long quiet_since_ms;
    enum x_verb verb;
    struct mcp_auth_result *auth;   /* with --resource: its token's verdict */
    struct mcp_http_auth_job *job;  /* with the token checks' thread */
    struct mcp_http_x *prev, *next; /* the listener's exchanges */
};

struct mcp_http_session {
    char id[MCP_HTTP_SESSION_ID_LEN + 1];
    struct mcp_http *h;
    unsigned busy;             /* exchanges of its that are not finished */
    long long used_ms;         /* when a request of its came last */
    struct mcp_http_x *stream; /* its GET stream, NULL for none */
    char *subject;             /* who minted it (with --resource): only they use it */
    void *data;                /* the core's */
    struct mcp_http_session *next;
};

struct mcp_http {
    struct mcp_http_opts o;
    const struct mcp_http_core *core;
    void *ctx;
    struct MHD_Daemon *mhd;
    int epoll_fd;
    int listen_fd;
    int watch_fd;    /* epoll: the suspended connections (mcp_http_stream.c) */
    unsigned nconns; /* connections MHD has */
    char where[64];
    /* /ready, /healthz and the drain (mcp_http_ready.c); NULL: none */
    struct mcp_http_ready *ready;
    struct mcp_http_x *xs;
    struct mcp_http_session *sessions;
    unsigned nsessions;
    struct mcp_http_conn *conns; /* MHD's connections (mcp_http_conn.c) */
    long long conns_due_ms;      /* when one may be due to be cut; 0: none */
    const char *const *origins;
    bool resumed;                 /* a connection resumed since MHD_run() last ran */
    struct mcp_http_authq *authq; /* the token checks' thread; NULL without auth */
    /* what an exchange leaves with the token checks, let go as it is freed
     * (mcp_http_auth.c's, above the exchanges; NULL without auth) */
    void (*x_detach)(struct mcp_http_x *x);
};

/* mcp_http_reply.c */
/* Queue a response: body (stolen) as application/json, or none; one more
 * header, name: value, when value is not NULL. */
enum MHD_Result mcp_http_queue(struct MHD_Connection *conn, unsigned status, json_t *body,
                               const char *name, const char *value);
enum MHD_Result mcp_http_reply(struct MHD_Connection *conn, unsigned status, json_t *body,
                               const char *session_id);
json_t *mcp_http_rpc_error(const json_t *id, int code, const char *message, json_t *data);

/* mcp_http_check.c: a POST's parsed message against its headers. NULL when
 * it may go on; else the error response (*status its HTTP status). */
json_t *mcp_http_check(struct MHD_Connection *conn, const json_t *msg, const char **version,
                       bool *modern, unsigned *status);

/* mcp_http_stream.c */
struct mcp_http_x *mcp_http_x_new(struct mcp_http *h, struct MHD_Connection *conn);
void mcp_http_x_free(struct mcp_http_x *x);
enum MHD_Result mcp_http_x_wait(struct mcp_http_x *x);
enum MHD_Result mcp_http_x_resumed(struct mcp_http_x *x);
enum MHD_Result mcp_http_x_open_stream(struct mcp_http_x *x);
void mcp_http_x_abort(struct mcp_http_x *x);
void mcp_http_x_unwatch(struct mcp_http_x *x);
/* Abort the suspended exchanges whose client closed (watch_fd ready). */
void mcp_http_xs_closed(struct mcp_http *h);
void mcp_http_x_end(struct mcp_http_x *x);
int mcp_http_x_keepalive(struct mcp_http_x *x, long long now);

/* mcp_http_ready.c: GET /ready and /healthz answered (true, *rc set);
 * a draining front's refusal of new work (true, *rc set). */
bool mcp_http_ready_route(struct mcp_http *h, struct MHD_Connection *conn, const char *url,
                          const char *method, enum MHD_Result *rc);
bool mcp_http_drain_refuses(struct mcp_http *h, struct MHD_Connection *conn, const json_t *msg,
                            enum MHD_Result *rc);

void mcp_http_x_wake(struct mcp_http_x *x);

/* mcp_http_auth.c: with o.auth, the resource server's part */
int mcp_http_auth_start(struct mcp_http *h, char *err, size_t errlen);
void mcp_http_auth_stop(struct mcp_http *h);
int mcp_http_auth_fd(const struct mcp_http *h); /* -1: none */
void mcp_http_auth_collect(struct mcp_http *h);
/* Judge x's token: true when x->auth holds the verdict (NULL: out of
 * memory); false: x waits for the thread, suspended in X_AUTH. */
bool mcp_http_auth_begin(struct mcp_http_x *x);
void mcp_http_auth_detach(struct mcp_http_x *x);
/* x's verdict: true when it may go on (nothing queued); else its answer
 * (401, or 500 out of memory) is queued, *rc what queueing it returned. */
bool mcp_http_auth_verdict(struct mcp_http_x *x, const char *verb, enum MHD_Result *rc);
/* A POST's message against the token's scopes (a tools/call's tool's);
 * logs the request with its subject. true: it may go on; else 403 is
 * queued, *rc what queueing it returned. */
bool mcp_http_auth_scopes(struct mcp_http_x *x, const json_t *msg, enum MHD_Result *rc);
/* The metadata document, a token in the query: *answered when it did. */
enum MHD_Result mcp_http_auth_early(struct mcp_http *h, struct MHD_Connection *conn,
                                    const char *url, const char *method, bool *answered);

/* mcp_http_conn.c: a connection's state, MHD's socket context. Opened
 * and closed: MHD's connection notifications; whole: its request has
 * arrived; waiting: its request is done, the next may come. */
struct mcp_http_conn;
void mcp_http_conn_opened(struct mcp_http *h, struct MHD_Connection *c, void **ctx);
void mcp_http_conn_closed(struct mcp_http *h, void **ctx);
void mcp_http_conn_whole(struct MHD_Connection *c);
void mcp_http_conn_waiting(struct MHD_Connection *c);
/* Shut down the connections whose request has not arrived whole in time;
 * returns the ms until the next is due, -1 for none. */
int mcp_http_conns_cut(struct mcp_http *h, long long now);
/* At most one of Content-Length and Transfer-Encoding, said once. */
bool mcp_http_conn_framing_ok(struct MHD_Connection *c);

/* mcp_http_session.c */
enum MHD_Result mcp_http_session_find(struct mcp_http *h, struct MHD_Connection *conn,
                                      struct mcp_http_session **s);
struct mcp_http_session *mcp_http_session_new(struct mcp_http *h);
int mcp_http_sessions_expire(struct mcp_http *h, long long now);

#endif
