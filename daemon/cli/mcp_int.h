/*
 * mcp_int.h - the parts of `toolexec mcp` (mcp.c) and what they share: the
 * session's state, the messages written to the client, and how a transport
 * drives the MCP core.
 *
 * Each calls only those below it:
 *
 *   mcp.c           the stdio transport: options, the poll loop, lines of
 *                   standard input, the sink writing lines to standard output
 *   mcp_core.c      the core as a transport drives it: its life, the daemon
 *                   connection, the end of input or of a stream
 *   mcp_requests.c  the core's entry (mcp_feed): JSON-RPC requests and
 *                   notifications, batches of them
 *   mcp_events.c    what the daemon sends: a call's events, its answer, the
 *                   user's answer to a tool's question (elicitation)
 *   mcp_mrtr.c      2026-07-28: a tool's question as an InputRequiredResult,
 *                   the retry's answer (requestState signed)
 *   mcp_modern.c    2026-07-28: a request's _meta, server/discover,
 *                   subscriptions/listen, logs bound to a request
 *   mcp_tasks.c     2026-07-28's tasks extension: a long call as a task
 *                   handle, tasks/get, tasks/update, tasks/cancel
 *   mcp_tasks_opt.c its options (--task-after, --task-ttl, --max-tasks,
 *                   --task-max-result, --replica-id), for any transport
 *   mcp_toolinfo.c  what the daemon's listing says of each tool (content
 *                   blocks, task support), the calls held until it is known
 *   mcp_content.c   a tool's own MCP content blocks ("mcp": {"content":
 *                   "blocks"}): their value checked, the result
 *   mcp_state.c     the calls and listings in flight, requests to the daemon
 *   mcp_write.c     messages to the client through the sink: responses
 *                   (shaped for the request's revision), errors, progress,
 *                   and the JSON-RPC batches they are gathered into
 *
 * Driving the core from another transport (the core does no I/O of its own
 * but on the daemon connection):
 *
 *   1. mcp_core_init() with a connected te_client and a struct mcp_sink_ops
 *      (where messages go out) and its context.
 *   2. Each JSON-RPC message the client sends, parsed: mcp_feed(m, msg,
 *      origin). origin->stream is the transport's cookie for where messages
 *      bound to that request go (an HTTP POST's response stream); it comes
 *      back in every struct mcp_reqctx handed to the sink. Requests are
 *      answered now or later, from mcp_daemon_readable().
 *   3. Poll mcp_daemon_fd() for POLLIN and call mcp_daemon_readable() then;
 *      it reads every whole event already buffered. A non-blocking client
 *      (te_client_connect_nb) keeps a partial line for the next POLLIN; the
 *      transport then polls for POLLOUT while te_client_want_write() and
 *      calls te_client_flush() (a blocking one waits for both). Call
 *      mcp_heartbeats() when its last return (ms) is due, and after each
 *      feed; -1: none due. It also starts the calls held for a free batch
 *      slot (max_batches).
 *   4. A stream whose reader went away: mcp_stream_gone() cancels the calls
 *      bound to it. The end of all input: mcp_end_of_input(); the session
 *      is over once mcp_idle() and no more input is coming.
 *   5. m->lost set (an exit code): the daemon connection failed;
 *      mcp_fail_all() answers what is owed, then mcp_core_free().
 *
 * A struct mcp holds one legacy session (what initialize chose: revision,
 * elicitation): a transport with several 2025 sessions runs a core (and a
 * daemon connection) for each. 2026-07-28 requests carry all they need in
 * their _meta, so any core serves them. The sink's send gets final true
 * with a request's response (its stream can end); a listen's notifications
 * come with final false until its response, if ever. dropped can come for
 * a stream already gone (mcp_stream_gone()): the transport ignores it.
 */
#ifndef MCP_INT_H
#define MCP_INT_H

#include "cli.h"
#include "cli_sys.h"

/* JSON-RPC 2.0 error codes. */
enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
    /* MCP 2026-07-28 allocates -32020..-32099 */
    RPC_UNSUPPORTED_VERSION = -32022,
};

/* The stateless revision: each request carries its version and the
 * client's capabilities in _meta, under these keys. */
#define MCP_MODERN_VERSION "2026-07-28"
#define MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define MCP_META_LOGLEVEL "io.modelcontextprotocol/logLevel"
#define MCP_META_SERVERINFO "io.modelcontextprotocol/serverInfo"
#define MCP_META_SUBSCRIPTION "io.modelcontextprotocol/subscriptionId"
#define MCP_EXT_TASKS "io.modelcontextprotocol/tasks"
#define MCP_REPLICA_MAX 64 /* characters of --replica-id */
/* --daemon-batches' default: the daemon's --max-client-batches default (the
 * HTTP front uses the daemon's own, from its capacity answer, once known) */
#define MCP_DAEMON_BATCHES 64
/* A result's list of what the call's confinement refused (toolexec's own) */
#define MCP_META_DENIED "toolexecd/denied"

/* Log levels of notifications/message, least severe first. */
enum mcp_log_level {
    MCP_LOG_NONE = -1,
    MCP_LOG_DEBUG,
    MCP_LOG_INFO,
    MCP_LOG_NOTICE,
    MCP_LOG_WARNING,
    MCP_LOG_ERROR
};

/* A request, as its messages are addressed: what the sink is told about a
 * message bound to it. Each request carries its own: under 2026-07-28 a
 * request is self-contained (its revision and the client's capabilities
 * come in its _meta). */
struct mcp_reqctx {
    json_t *id;            /* NULL: a message whose id could not be read */
    void *stream;          /* the transport's cookie (mcp_origin), NULL on stdio */
    const char *version;   /* the revision its answer is shaped for */
    bool modern;           /* version is 2026-07-28: results carry resultType and
                              serverInfo, the client's input comes by MRTR */
    bool elicitation;      /* the client can be asked (elicitation, form mode) */
    int log_level;         /* notifications/message from this level on (modern: its
                              _meta's; 2025: the session's logging/setLevel);
                              MCP_LOG_NONE: none */
    const char *subject;   /* the origin's, while mcp_feed() runs; NULL in a copy */
    bool tasks;            /* modern: the client declared the tasks extension */
    struct mcp_task *task; /* the task this call runs for: its messages are
                              kept there (mcp_tasks.c), not sent */
};

/* Where messages go out. send: msg (stolen) to the client; req is the
 * request it belongs to (its response, its progress, a request made on its
 * behalf), NULL for a message of the session (a list change under 2025, an
 * error answering a message without an id); final: msg is req's last
 * message (its response), its stream can end. dropped (may be NULL): req
 * ends without a response (cancelled). */
struct mcp_sink_ops {
    void (*send)(void *ctx, json_t *msg, const struct mcp_reqctx *req, bool final);
    void (*dropped)(void *ctx, const struct mcp_reqctx *req);
};

/* What the transport knows of a message it feeds to the core. */
struct mcp_origin {
    void *stream;        /* where messages bound to its request go */
    const char *subject; /* the authenticated client, NULL: none (stdio) */
    const char *version; /* the revision the transport negotiated (HTTP's
                            MCP-Protocol-Version header), NULL: none; a
                            request without _meta's is served in it */
};

/* A tools/call in flight: its batch, until the batch's terminal event. */
struct mcp_call {
    struct mcp_reqctx req;
    char *batch;
    json_t *result;                /* from tool_execution_completed, once it came */
    json_t *denied;                /* its "denied", each entry with "why"; NULL: none */
    json_t *policy;                /* the "policy" its run request carries; NULL: none */
    bool cancelled;                /* by the client, or at the end of input: no response */
    json_t *elicit_id;             /* our elicitation/create for its ask_user, in flight */
    json_t *progress_token;        /* the request's _meta.progressToken; NULL: none */
    double progress;               /* the last progress sent (MCP: it must increase) */
    bool reported;                 /* the worker sent progress of its own */
    bool blocks;                   /* its tool's ok value is MCP content (mcp_content.c) */
    json_t *held;                  /* its run request, not sent yet: until the tools are
                                      known (awaiting_tools, mcp_toolinfo.c) or a batch
                                      slot is free (max_batches, mcp_state.c); NULL: sent */
    bool awaiting_tools;           /* held until the tools are known */
    long long started_ms, sent_ms; /* the call's start; the last notification */
    char *bind;                    /* modern: what its requestState is bound to */
    char *owner;                   /* may become a task: the subject it is bound to */
    bool running;                  /* its batch counts in nbatches */
    struct mcp_call *next;
};

/* A tools/list waiting for the daemon's tools event (they come in order). */
struct mcp_listing {
    struct mcp_reqctx req;
    bool cancelled;
    bool silent;         /* a subscriptions/listen's watch, or info: no response */
    bool info;           /* mcp_toolinfo.c's own */
    struct mcp_sub *sub; /* that listen, to acknowledge; NULL once it is over */
    struct mcp_listing *next;
};

/* A subscriptions/listen (2026-07-28): open until cancelled or the end. */
struct mcp_sub {
    struct mcp_reqctx req;
    bool tools; /* toolsListChanged: the only kind this server has */
    bool acked; /* notifications/subscriptions/acknowledged sent */
    struct mcp_sub *next;
};

/* A JSON-RPC batch (MCP 2025-03-26 only): its responses, sent together as
 * one array once each request in it has been answered (or cancelled). */
struct mcp_rpcbatch {
    json_t *out;
    void *stream;
    unsigned pending;
};
/* Which batch the response to a request goes into. */
struct mcp_route {
    json_t *id;
    void *stream;
    struct mcp_rpcbatch *rb;
    struct mcp_route *next;
};

struct mcp_task;
struct mcp {
    /* a task's message (its request's task set), kept for tasks/get:
     * mcp_tasks.c's, above the writer that meets it (set by mcp_core_init) */
    void (*task_capture)(struct mcp *m, struct mcp_task *t, json_t *msg);
    struct cli *cli;
    te_client *client;
    const struct mcp_sink_ops *sink;
    void *sink_ctx;
    json_int_t tool_timeout; /* 0: the daemon's default */
    struct mcp_call *calls;
    struct mcp_listing *listings, **listings_tail;
    unsigned long long seq;      /* tools/call requests so far */
    bool eof;                    /* no more input */
    int lost;                    /* an exit code once the daemon connection failed */
    bool elicitation;            /* the client declared the elicitation capability */
    const char *version;         /* the protocol revision agreed on; NULL before */
    struct mcp_rpcbatch *cur_rb; /* the JSON-RPC batch being read */
    struct mcp_route *routes;
    unsigned long long elicits; /* elicitation/create requests so far */
    long long heartbeat_ms;     /* --heartbeat */
    long long tools_wait_ms;    /* --tools-wait: a call held for the daemon's
                                   listing fails past it; 0: MCP_TOOLS_WAIT_MS */
    bool legacy_watch;          /* a 2025 tools/list: list changes to the session */
    struct mcp_sub *subs;
    unsigned char state_key[32]; /* signs requestState; new each process */
    bool state_ok;               /* state_key could be drawn */
    /* the tasks extension (mcp_tasks.c); 0: the default */
    long long task_after_ms; /* a call running this long becomes a task; <0: at once */
    long long task_ttl_ms;   /* a task is kept this long from its creation */
    unsigned max_tasks;      /* tasks kept at most (the oldest finished one goes) */
    size_t task_max_result;  /* bytes of a task's result at most */
    const char *replica_id;  /* the handles' prefix; NULL: none */
    struct mcp_task *tasks;
    unsigned ntasks;
    /* mcp_toolinfo.c: each tool's _meta in the daemon's listing, by name;
     * NULL: not known yet */
    json_t *tool_meta;
    bool info_asked; /* its listing asked for (and reloads watched) */
    int log_level;   /* 2025: logging/setLevel's; MCP_LOG_NONE before */
    /* batches run at once on the daemon connection (--daemon-batches, the
     * daemon's --max-client-batches); a call past it is held until one
     * ends. 0: no bound. */
    unsigned max_batches, nbatches;
};

/* The core's entry points, for a transport (see the top of this file):
 * mcp_core.c (mcp_heartbeats() too), and mcp_feed() (mcp_requests.c),
 * mcp_fail_all() (mcp_events.c). */
void mcp_core_init(struct mcp *m, struct cli *cli, te_client *client,
                   const struct mcp_sink_ops *sink, void *sink_ctx);
void mcp_core_free(struct mcp *m);
void mcp_feed(struct mcp *m, json_t *msg, const struct mcp_origin *o);
int mcp_daemon_fd(const struct mcp *m);
int mcp_daemon_readable(struct mcp *m);
void mcp_stream_gone(struct mcp *m, void *stream);
void mcp_end_of_input(struct mcp *m);
bool mcp_idle(const struct mcp *m);
int mcp_heartbeats(struct mcp *m);
/* How long a call waits for the daemon's tool listing (mcp_toolinfo.c)
 * unless --tools-wait says: a daemon that works answers at once, and a
 * host gives up on a request after 60 s. */
#define MCP_TOOLS_WAIT_MS 30000

/* mcp_write.c: writing messages (each stolen) */
void mcp_put_message(struct mcp *m, json_t *msg, const struct mcp_reqctx *req);
void mcp_put_result(struct mcp *m, const struct mcp_reqctx *req, json_t *result);
void mcp_put_error(struct mcp *m, const struct mcp_reqctx *req, int code, const char *message,
                   json_t *data);
void mcp_put_call_result(struct mcp *m, const struct mcp_reqctx *req, const char *text,
                         bool is_error, const json_t *structured);
/* The same with what the call's confinement refused it (te_why_denied()'s
 * list, why.h, or NULL): each entry's sentence after the text, and the list in
 * structuredContent (an error's) or _meta (a result's, whose structured
 * content is the tool's own and may have a schema to meet). */
void mcp_put_call_result_denied(struct mcp *m, const struct mcp_reqctx *req, const char *text,
                                bool is_error, const json_t *structured, const json_t *denied);
void mcp_put_progress(struct mcp *m, struct mcp_call *c, const json_t *p);
void mcp_put_question(struct mcp *m, const struct mcp_reqctx *req, const char *question);
void mcp_put_answer(struct mcp *m, const struct mcp_reqctx *req, const char *question,
                    const char *action, const json_t *answer);
/* The progress heartbeats due now sent; ms until the next (-1: none). */
int mcp_progress_heartbeats(struct mcp *m);
void mcp_rb_release(struct mcp *m, struct mcp_rpcbatch *rb);
void mcp_route_drop(struct mcp *m, const struct mcp_reqctx *req);

/* mcp_state.c: the calls and listings in flight, requests to the daemon */
struct mcp_call *mcp_call_by_batch(struct mcp *m, const char *batch);
struct mcp_call *mcp_call_by_id(struct mcp *m, void *stream, const json_t *id);
void mcp_call_remove(struct mcp *m, struct mcp_call *c);
struct mcp_listing *mcp_listing_pop(struct mcp *m);
void mcp_listing_free(struct mcp *m, struct mcp_listing *l);
void mcp_reqctx_copy(struct mcp_reqctx *dst, const struct mcp_reqctx *src);
int mcp_send_daemon(struct mcp *m, json_t *req);
int mcp_run_call(struct mcp *m, struct mcp_call *c, json_t *req);
bool mcp_listing_send(struct mcp *m, struct mcp_listing *l, json_t *req);
/* The answer to a request that found the daemon connection's queue full. */
#define MCP_SEND_FULL                                                                              \
    "toolexecd is not reading this connection (its send queue is full): the request was not "      \
    "sent, try it again"
void mcp_start_held(struct mcp *m);
void mcp_cancel_call(struct mcp *m, struct mcp_call *c);

/* mcp_modern.c: the 2026-07-28 revision's request metadata and methods */
extern const char *const mcp_versions[];
const char *mcp_version_known(const char *v);
bool mcp_read_meta(struct mcp *m, struct mcp_reqctx *q, const json_t *params, const char *method);
void mcp_on_discover(struct mcp *m, const struct mcp_reqctx *q);
void mcp_on_listen(struct mcp *m, const struct mcp_reqctx *q, const json_t *params);
void mcp_listen_acked(struct mcp *m, struct mcp_sub *sub);
void mcp_listen_failed(struct mcp *m, struct mcp_sub *sub, const char *message);
bool mcp_listen_cancel(struct mcp *m, void *stream, const json_t *id);
void mcp_tools_changed(struct mcp *m, const json_t *ev);
void mcp_subs_end(struct mcp *m, bool all, void *stream, bool graceful);
void mcp_log(struct mcp *m, const struct mcp_reqctx *req, int level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A level's name as ours (one above error for those above it, which none
 * of ours reaches); MCP_LOG_NONE: not a level's name. */
#define MCP_LOG_LEVELS_TEXT                                                                        \
    "expected debug, info, notice, warning, error, critical, alert or emergency"
int mcp_log_level_of(const char *name);
/* mcp_log(), its text as is from logger (NULL: "toolexec") */
void mcp_log_as(struct mcp *m, const struct mcp_reqctx *req, int level, const char *logger,
                const char *text);
json_t *mcp_list_result(const struct mcp_reqctx *req, const json_t *tools);

/* mcp_mrtr.c: the 2026-07-28 revision's questions to the user (multi
 * round-trip requests): an InputRequiredResult, the retry's answer */
void mcp_state_init(struct mcp *m);
char *mcp_call_bind(const char *subject, const char *name, const json_t *args);
void mcp_put_input_required(struct mcp *m, struct mcp_call *c, const char *question);
bool mcp_on_retry(struct mcp *m, const struct mcp_reqctx *q, const json_t *params,
                  const char *bind);

/* mcp_tasks.c: the tasks extension (its options, for a transport's
 * getopt_long table: MCP_TASK_OPTIONS, handled by mcp_tasks_option()) */
enum {
    MCP_OPT_TASK_AFTER = 0x4d00,
    MCP_OPT_TASK_TTL,
    MCP_OPT_MAX_TASKS,
    MCP_OPT_TASK_MAX_RESULT,
    MCP_OPT_REPLICA,
};
#define MCP_TASK_OPTIONS                                                                           \
    {"task-after", required_argument, NULL, MCP_OPT_TASK_AFTER},                                   \
        {"task-ttl", required_argument, NULL, MCP_OPT_TASK_TTL},                                   \
        {"max-tasks", required_argument, NULL, MCP_OPT_MAX_TASKS},                                 \
        {"task-max-result", required_argument, NULL, MCP_OPT_TASK_MAX_RESULT},                     \
    {                                                                                              \
        "replica-id", required_argument, NULL, MCP_OPT_REPLICA                                     \
    }
int mcp_tasks_option(struct mcp *m, int opt, const char *arg);    /* mcp_tasks_opt.c */
void mcp_tasks_settings(struct mcp *dst, const struct mcp *from); /* mcp_tasks_opt.c */
void mcp_tasks_defaults(struct mcp *m);
void mcp_tasks_free(struct mcp *m);
/* call c's run request sent; support its tool's task support (NULL: not said) */
void mcp_task_started(struct mcp *m, struct mcp_call *c, const char *support);
void mcp_task_capture(struct mcp *m, struct mcp_task *t, json_t *msg);
int mcp_tasks_tick(struct mcp *m);
void mcp_task_asks(struct mcp *m, struct mcp_call *c);
bool mcp_on_tasks(struct mcp *m, const struct mcp_reqctx *q, const char *method,
                  const json_t *params);

/* mcp_toolinfo.c: mcp_call_start() sends call c's run request (stolen)
 * once the tools are known (or refuses the call); _learn() with each
 * listing's tools (NULL: the daemon refused it), _reloaded() at a reload;
 * mcp_toolinfo_declare(): a modern list's tools with execution.taskSupport */
void mcp_call_start(struct mcp *m, struct mcp_call *c, json_t *run);
void mcp_toolinfo_learn(struct mcp *m, const json_t *tools);
void mcp_toolinfo_reloaded(struct mcp *m);
/* The calls held for the listing past tools_wait_ms failed; ms until the
 * next is due (-1: none held). */
int mcp_toolinfo_expire(struct mcp *m);
void mcp_toolinfo_declare(json_t *tools);
bool mcp_tool_blocks(const struct mcp *m, const char *name);
const char *mcp_tool_tasks(const struct mcp *m, const char *name); /* NULL: not said */

/* mcp_content.c: a tool's own content blocks; mcp_content_check(): 0, or
 * -1 with why naming what is wrong and where. */
#define MCP_CONTENT_MAX_BLOCKS 128u
#define MCP_CONTENT_MAX_BYTES (8u * 1024u * 1024u) /* the value as compact JSON */
int mcp_content_check(const json_t *ok, char *why, size_t whylen);
void mcp_put_blocks_result(struct mcp *m, const struct mcp_reqctx *req, const json_t *ok,
                           const json_t *denied);
/* mcp_write.c: the text of the denials after text ("[toolexec] Refused
 * ..."); NULL: no memory */
char *mcp_denials_text(const char *text, const json_t *denied);

/* mcp_events.c: the daemon's events */
void mcp_on_elicit_response(struct mcp *m, struct mcp_call *c, const json_t *msg);
int mcp_read_event(struct mcp *m);
void mcp_fail_all(struct mcp *m);

#endif
