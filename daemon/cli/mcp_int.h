/*
 * mcp_int.h - the parts of `toolexec mcp` (mcp.c) and what they share: the
 * session's state and the messages written to the host.
 *
 * Each calls only those below it:
 *
 *   mcp.c           the session: options, the poll loop
 *   mcp_requests.c  what the host sends: lines, JSON-RPC requests and
 *                   notifications, batches of them
 *   mcp_events.c    what the daemon sends: a call's events, its answer, the
 *                   user's answer to a tool's question (elicitation)
 *   mcp_state.c     the calls and listings in flight, requests to the daemon
 *   mcp_write.c     messages to the host: responses, errors, progress, and
 *                   the JSON-RPC batches they are gathered into
 */
#ifndef MCP_INT_H
#define MCP_INT_H

#include "cli.h"

/* JSON-RPC 2.0 error codes. */
enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
};

/* A tools/call in flight: its batch, until the batch's terminal event. */
struct mcp_call {
    json_t *id; /* the JSON-RPC request's id */
    char *batch;
    json_t *result;                /* from tool_execution_completed, once it came */
    bool cancelled;                /* by the client, or at the end of input: no response */
    json_t *elicit_id;             /* our elicitation/create for its ask_user, in flight */
    json_t *progress_token;        /* the request's _meta.progressToken; NULL: none */
    double progress;               /* the last progress sent (MCP: it must increase) */
    bool reported;                 /* the worker sent progress of its own */
    long long started_ms, sent_ms; /* the call's start; the last notification */
    struct mcp_call *next;
};

/* A tools/list waiting for the daemon's tools event (they come in order). */
struct mcp_listing {
    json_t *id;
    bool cancelled;
    struct mcp_listing *next;
};

/* A JSON-RPC batch (MCP 2025-03-26 only): its responses, sent together as
 * one array once each request in it has been answered (or cancelled). */
struct mcp_rpcbatch {
    json_t *out;
    unsigned pending;
};
/* Which batch the response to a request id goes into. */
struct mcp_route {
    json_t *id;
    struct mcp_rpcbatch *rb;
    struct mcp_route *next;
};

struct mcp {
    struct cli *cli;
    te_client *client;
    json_int_t tool_timeout; /* 0: the daemon's default */
    struct mcp_call *calls;
    struct mcp_listing *listings, **listings_tail;
    unsigned long long seq;      /* tools/call requests so far */
    te_lines in;                 /* the line of standard input being read */
    bool eof;                    /* the host is gone: no more input */
    bool hangup;                 /* writing to standard output failed */
    int lost;                    /* an exit code once the daemon connection failed */
    bool elicitation;            /* the host declared the elicitation capability */
    const char *version;         /* the protocol revision agreed on; NULL before */
    struct mcp_rpcbatch *cur_rb; /* the JSON-RPC batch being read */
    struct mcp_route *routes;
    unsigned long long elicits; /* elicitation/create requests so far */
    long long heartbeat_ms;     /* --heartbeat */
};

/* mcp_write.c: writing messages (each stolen) */
void mcp_put_message(struct mcp *m, json_t *msg);
void mcp_put_result(struct mcp *m, json_t *id, json_t *result);
void mcp_put_error(struct mcp *m, json_t *id, int code, const char *message, json_t *data);
void mcp_put_call_result(struct mcp *m, json_t *id, const char *text, bool is_error,
                         const json_t *structured);
void mcp_put_progress(struct mcp *m, struct mcp_call *c, const json_t *p);
int mcp_heartbeats(struct mcp *m);
void mcp_rb_release(struct mcp *m, struct mcp_rpcbatch *rb);
void mcp_route_drop(struct mcp *m, const json_t *id);
long long mcp_now_ms(void);

/* mcp_state.c: the calls and listings in flight, and the daemon connection */
struct mcp_call *mcp_call_by_batch(struct mcp *m, const char *batch);
struct mcp_call *mcp_call_by_id(struct mcp *m, const json_t *id);
void mcp_call_remove(struct mcp *m, struct mcp_call *c);
struct mcp_listing *mcp_listing_pop(struct mcp *m);
void mcp_listing_free(struct mcp *m, struct mcp_listing *l);
void mcp_send_daemon(struct mcp *m, json_t *req);
void mcp_cancel_call(struct mcp *m, struct mcp_call *c);
void mcp_end_of_input(struct mcp *m);

/* mcp_requests.c: read what standard input has and handle every whole line
 * in it */
void mcp_read_input(struct mcp *m);

/* mcp_events.c */
void mcp_on_elicit_response(struct mcp *m, struct mcp_call *c, const json_t *msg);
int mcp_read_event(struct mcp *m);
void mcp_fail_all(struct mcp *m);

#endif
