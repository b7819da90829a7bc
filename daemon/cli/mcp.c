/*
 * mcp.c - `toolexec mcp`: a Model Context Protocol server over stdio that
 * forwards to the daemon, so any MCP host can call toolexecd's tools.
 *
 * MCP's stdio transport: one JSON-RPC 2.0 message per line on standard input
 * and output; standard output carries nothing else, messages for people go
 * to standard error. One daemon connection carries the whole session:
 *
 *   initialize                the server's capabilities (tools only)
 *   ping                      {}
 *   tools/list                {"op": "tools", "format": "mcp"}
 *   tools/call                a run request of one call, in a batch of its
 *                             own named after the request's id
 *   notifications/cancelled   {"op": "cancel"} for that call's batch; the
 *                             request then gets no response
 *
 * Calls run concurrently: standard input and the socket are polled together
 * and each call's state is found by its batch id. Tool errors (a result of
 * "error" or "tool_error", an unknown or forbidden tool) are results with
 * "isError": true, as MCP asks; a request the daemon refuses is a JSON-RPC
 * error. The end of standard input ends the session: calls still running
 * are cancelled, and toolexec exits 0 once the daemon has confirmed it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#ifndef CLI_VERSION
#define CLI_VERSION "unknown"
#endif

/* The newest revision of MCP this server speaks; offered to a client that
 * asks for one it does not know. */
#define MCP_LATEST_VERSION "2025-11-25"

/* A longer message on standard input is refused (the daemon's own default
 * limit on a request line). */
#define MCP_LINE_MAX (16u << 20)

/* A running call whose request carried a progressToken gets a
 * notifications/progress at least this often (--heartbeat): hosts time a
 * request out after 60 s without one by default. */
#define MCP_HEARTBEAT_MS 5000

/* Characters of a request id kept in a batch id, for people reading tail. */
#define MCP_BATCH_ID_CHARS 40

/* JSON-RPC 2.0 error codes. */
enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
};

static const char *const supported_versions[] = {"2024-11-05", "2025-03-26", "2025-06-18",
                                                 "2025-11-25", NULL};

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

/* ------------------------------------------------------------------------ */
/* Writing messages */

static void put_line(struct mcp *m, json_t *msg);

static void rb_release(struct mcp *m, struct mcp_rpcbatch *rb)
{
    if (--rb->pending)
        return;
    if (json_array_size(rb->out))
        put_line(m, rb->out);
    else
        json_decref(rb->out);
    free(rb);
}

/* The route of a response to id, unlinked; NULL when it has none. */
static struct mcp_route *route_take(struct mcp *m, const json_t *id)
{
    for (struct mcp_route **p = &m->routes; *p; p = &(*p)->next)
        if (json_equal((*p)->id, id)) {
            struct mcp_route *r = *p;
            *p = r->next;
            return r;
        }
    return NULL;
}

/* A request of a JSON-RPC batch that gets no response (cancelled). */
static void route_drop(struct mcp *m, const json_t *id)
{
    struct mcp_route *r = m->routes ? route_take(m, id) : NULL;
    if (r) {
        rb_release(m, r->rb);
        json_decref(r->id);
        free(r);
    }
}

/* Write one message (stolen): a response to a request of a JSON-RPC batch
 * goes into that batch's array. */
static void put_message(struct mcp *m, json_t *msg)
{
    bool response = msg && (json_object_get(msg, "result") || json_object_get(msg, "error"));
    json_t *id = response ? json_object_get(msg, "id") : NULL;
    struct mcp_route *r = id && m->routes ? route_take(m, id) : NULL;
    if (r) {
        json_array_append_new(r->rb->out, msg);
        rb_release(m, r->rb);
        json_decref(r->id);
        free(r);
        return;
    }
    if (response && !id && m->cur_rb) {
        /* an element of the batch being read that had no usable id */
        json_array_append_new(m->cur_rb->out, msg);
        return;
    }
    put_line(m, msg);
}

/* Write one message (stolen) as a line on standard output. */
static void put_line(struct mcp *m, json_t *msg)
{
    char *s = msg ? te_json_dumps(msg, 0, NULL) : NULL;
    json_decref(msg);
    if (!s) {
        cli_err("mcp: out of memory; a response is lost");
        return;
    }
    if (!m->hangup && (fputs(s, stdout) == EOF || putchar('\n') == EOF || fflush(stdout) == EOF)) {
        /* the host closed its end: as good as the end of input */
        m->hangup = true;
    }
    free(s);
}

/* A response with result (stolen). */
static void put_result(struct mcp *m, json_t *id, json_t *result)
{
    put_message(m, json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

/* An error response; id NULL (a message whose id could not be read) leaves
 * "id" out: the schema of 2025-06-18 and later has no null id. data (stolen)
 * may be NULL. */
static void put_error(struct mcp *m, json_t *id, int code, const char *message, json_t *data)
{
    json_t *err = json_pack("{s:i,s:s}", "code", code, "message", message);
    if (!err)
        err = json_pack("{s:i,s:s}", "code", code, "message", "(message not valid UTF-8)");
    if (err && data)
        json_object_set(err, "data", data);
    json_decref(data);
    json_t *msg = json_pack("{s:s,s:o}", "jsonrpc", "2.0", "error", err);
    if (msg && id)
        json_object_set(msg, "id", id);
    put_message(m, msg);
}

/* A tools/call result: one text content, whether the call failed, and
 * the structured result (an object; NULL: none). */
static void put_call_result(struct mcp *m, json_t *id, const char *text, bool is_error,
                            const json_t *structured)
{
    json_t *content = json_pack("[{s:s,s:s}]", "type", "text", "text", text ? text : "");
    if (!content) {
        put_error(m, id, RPC_INTERNAL_ERROR, "the tool's content is not valid UTF-8", NULL);
        return;
    }
    json_t *r = json_pack("{s:o,s:b}", "content", content, "isError", is_error);
    if (r && json_is_object(structured))
        json_object_set(r, "structuredContent", (json_t *)structured);
    put_result(m, id, r);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* notifications/progress for call c: the worker's (p its progress object)
 * or, p NULL, a heartbeat. Progress must increase with each notification:
 * a heartbeat before any progress of the worker's counts the seconds the
 * call has run; after, it adds 0.001 (and, like a worker's value that
 * does not increase, carries no total). */
static void put_progress(struct mcp *m, struct mcp_call *c, const json_t *p)
{
    long long now = now_ms();
    double v = p             ? json_number_value(json_object_get(p, "progress"))
               : c->reported ? c->progress + 0.001
                             : (double)((now - c->started_ms) / 1000);
    json_t *total = p ? json_object_get(p, "total") : NULL;
    if (v <= c->progress && (c->sent_ms || v <= 0)) {
        v = c->progress + 0.001;
        total = NULL;
    }
    json_t *params = json_pack("{s:O,s:f}", "progressToken", c->progress_token, "progress", v);
    if (params && total)
        json_object_set(params, "total", total);
    char msg[64];
    if (params && p && json_object_get(p, "message"))
        json_object_set(params, "message", json_object_get(p, "message"));
    else if (params && !p) {
        snprintf(msg, sizeof(msg), "running for %lld s", (now - c->started_ms) / 1000);
        json_object_set_new(params, "message", json_string(msg));
    }
    c->progress = v;
    c->sent_ms = now;
    if (p)
        c->reported = true;
    put_message(m, json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", "notifications/progress",
                             "params", params));
}

/* Heartbeats due now; returns the ms until the next one, -1 for none. */
static int heartbeats(struct mcp *m)
{
    long long now = now_ms(), next = -1;
    for (struct mcp_call *c = m->calls; c; c = c->next) {
        if (!c->progress_token || c->cancelled || c->elicit_id)
            continue;
        long long last = c->sent_ms ? c->sent_ms : c->started_ms;
        if (now - last >= m->heartbeat_ms) {
            put_progress(m, c, NULL);
            last = now;
        }
        long long wait = last + m->heartbeat_ms - now;
        if (next < 0 || wait < next)
            next = wait;
    }
    return next < 0 ? -1 : next > 60000 ? 60000 : (int)next;
}

/* ------------------------------------------------------------------------ */
/* State */

static struct mcp_call *call_by_batch(struct mcp *m, const char *batch)
{
    struct mcp_call *c = m->calls;
    while (c && (!batch || strcmp(c->batch, batch) != 0))
        c = c->next;
    return c;
}

static struct mcp_call *call_by_id(struct mcp *m, const json_t *id)
{
    struct mcp_call *c = m->calls;
    while (c && !json_equal(c->id, id))
        c = c->next;
    return c;
}

static void call_free(struct mcp_call *c)
{
    json_decref(c->progress_token);
    json_decref(c->elicit_id);
    json_decref(c->id);
    json_decref(c->result);
    free(c->batch);
    free(c);
}

static void call_remove(struct mcp *m, struct mcp_call *c)
{
    if (c->cancelled)
        route_drop(m, c->id);
    struct mcp_call **p = &m->calls;
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    call_free(c);
}

/* The oldest tools/list waiting for its answer (removed from the queue;
 * the caller frees it), or NULL. */
static struct mcp_listing *listing_pop(struct mcp *m)
{
    struct mcp_listing *l = m->listings;
    if (l) {
        m->listings = l->next;
        if (!m->listings)
            m->listings_tail = &m->listings;
    }
    return l;
}

static void listing_free(struct mcp *m, struct mcp_listing *l)
{
    if (l->cancelled)
        route_drop(m, l->id);
    json_decref(l->id);
    free(l);
}

/* Send a request to the daemon. A failure makes the session end with
 * CLI_EXIT_CONNECT (m->lost); the caller carries on. */
static void send_daemon(struct mcp *m, json_t *req)
{
    if (m->lost)
        return;
    if (!req) {
        cli_err("mcp: out of memory");
        m->lost = CLI_EXIT_ERROR;
        return;
    }
    int rc = cli_send(m->cli, m->client, req);
    if (rc != CLI_EXIT_OK)
        m->lost = rc;
}

static void cancel_call(struct mcp *m, struct mcp_call *c)
{
    if (c->cancelled)
        return;
    c->cancelled = true;
    if (c->elicit_id)
        return; /* its batch has completed */
    json_t *req = json_pack("{s:s,s:s}", "op", "cancel", "batch", c->batch);
    send_daemon(m, req);
    json_decref(req);
}

/* The host is gone: cancel what runs. Answers owed to tools/list still go
 * out, if anyone reads them. */
static void end_of_input(struct mcp *m)
{
    m->eof = true;
    for (struct mcp_call *c = m->calls; c; c = c->next)
        cancel_call(m, c);
    /* calls waiting for the host's answer to a question have no batch */
    for (struct mcp_call *c = m->calls, *next; c; c = next) {
        next = c->next;
        if (c->elicit_id)
            call_remove(m, c);
    }
}

static void on_elicit_response(struct mcp *m, struct mcp_call *c, const json_t *msg);

/* ------------------------------------------------------------------------ */
/* Requests from the host */

static bool is_id(const json_t *id)
{
    return json_is_string(id) || json_is_number(id);
}

/* "mcp-N-ID": N counts the session's calls, so the id is unique whatever
 * the client's ids; ID (cut, odd characters as '_') lets a person reading
 * `toolexec tail` match the batch to the host's request. */
static char *batch_id_for(struct mcp *m, const json_t *id)
{
    char *text = json_is_string(id) ? strdup(json_string_value(id))
                                    : te_json_dumps(id, JSON_ENCODE_ANY, NULL);
    if (!text)
        return NULL;
    size_t n = 0;
    for (; text[n] && n < MCP_BATCH_ID_CHARS; n++) {
        char ch = text[n];
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == ':';
        if (!plain)
            text[n] = '_';
    }
    text[n] = '\0';
    char *batch = NULL;
    if (asprintf(&batch, "mcp-%llu-%s", ++m->seq, text) < 0)
        batch = NULL;
    free(text);
    return batch;
}

static void on_initialize(struct mcp *m, json_t *id, const json_t *params)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    const char *version = MCP_LATEST_VERSION;
    for (const char *const *v = supported_versions; asked && *v; v++)
        if (strcmp(asked, *v) == 0)
            version = *v;
    m->version = version;
    m->elicitation =
        json_is_object(json_object_get(json_object_get(params, "capabilities"), "elicitation"));
    put_result(m, id,
               json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s}}", "protocolVersion", version,
                         "capabilities", "tools", "listChanged", 1, "serverInfo", "name",
                         "toolexec", "version", CLI_VERSION));
}

static void on_tools_list(struct mcp *m, json_t *id)
{
    /* A cursor is accepted and ignored: the whole list comes in one page. */
    struct mcp_listing *l = calloc(1, sizeof(*l));
    /* watch: the daemon says when a reload changed its tools */
    json_t *req = json_pack("{s:s,s:s,s:b}", "op", "tools", "format", "mcp", "watch", 1);
    if (!l || !req) {
        free(l);
        json_decref(req);
        put_error(m, id, RPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    l->id = json_incref(id);
    *m->listings_tail = l;
    m->listings_tail = &l->next;
    send_daemon(m, req);
    json_decref(req);
}

static void on_tools_call(struct mcp *m, json_t *id, const json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments");
    if (!name) {
        put_error(m, id, RPC_INVALID_PARAMS, "params.name: expected the name of a tool", NULL);
        return;
    }
    if (args && !json_is_object(args) && !json_is_null(args)) {
        put_error(m, id, RPC_INVALID_PARAMS, "params.arguments: expected an object", NULL);
        return;
    }
    if (call_by_id(m, id)) {
        put_error(m, id, RPC_INVALID_REQUEST, "the request id is in use by a call in progress",
                  NULL);
        return;
    }
    struct mcp_call *c = calloc(1, sizeof(*c));
    char *batch = batch_id_for(m, id);
    json_t *req = NULL;
    if (c && batch)
        req = json_pack("{s:s,s:s,s:[{s:s,s:s,s:o}]}", "op", "run", "batch", batch, "calls", "id",
                        "c0", "name", name, "arguments",
                        json_is_object(args) ? json_incref(args) : json_object());
    if (!req) {
        free(c);
        free(batch);
        put_error(m, id, RPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    if (m->tool_timeout)
        json_object_set_new(req, "tool_timeout", json_integer(m->tool_timeout));
    c->id = json_incref(id);
    c->batch = batch;
    json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    if (is_id(token))
        c->progress_token = json_incref(token);
    c->started_ms = now_ms();
    c->next = m->calls;
    m->calls = c;
    send_daemon(m, req);
    json_decref(req);
}

static void on_cancelled(struct mcp *m, const json_t *params)
{
    json_t *id = json_object_get(params, "requestId");
    if (!is_id(id))
        return;
    struct mcp_call *c = call_by_id(m, id);
    if (c && c->elicit_id) {
        call_remove(m, c); /* its batch is over; the host's answer is ignored */
        return;
    }
    if (c) {
        cancel_call(m, c);
        return;
    }
    /* A tools/list cannot be stopped, but its answer can be kept back. */
    for (struct mcp_listing *l = m->listings; l; l = l->next)
        if (json_equal(l->id, id))
            l->cancelled = true;
    /* Otherwise it has been answered already: nothing to do. */
}

static void on_notification(struct mcp *m, const char *method, const json_t *params)
{
    if (strcmp(method, "notifications/cancelled") == 0)
        on_cancelled(m, params);
    /* notifications/initialized and any other notification: nothing to do,
     * and a notification never gets a response. */
}

static void on_request(struct mcp *m, json_t *id, const char *method, const json_t *params)
{
    /* Requests before initialize are answered all the same. */
    if (strcmp(method, "initialize") == 0) {
        on_initialize(m, id, params);
    } else if (strcmp(method, "ping") == 0) {
        put_result(m, id, json_object());
    } else if (strcmp(method, "tools/list") == 0) {
        on_tools_list(m, id);
    } else if (strcmp(method, "tools/call") == 0) {
        on_tools_call(m, id, params);
    } else {
        char msg[256];
        snprintf(msg, sizeof(msg), "Method not found: %.200s", method);
        put_error(m, id, RPC_METHOD_NOT_FOUND, msg, NULL);
    }
}

static void on_message(struct mcp *m, json_t *msg);

/* A JSON-RPC batch: MCP 2025-03-26 requires them to be accepted; 2025-06-18
 * removed them. The responses go out as one array. */
static void on_rpc_batch(struct mcp *m, json_t *msgs)
{
    if (!m->version || strcmp(m->version, "2025-03-26") != 0 || !json_array_size(msgs)) {
        put_error(m, NULL, RPC_INVALID_REQUEST,
                  json_array_size(msgs) ? "Invalid Request: batches are not supported after "
                                          "protocol revision 2025-03-26"
                                        : "Invalid Request: an empty batch",
                  NULL);
        return;
    }
    struct mcp_rpcbatch *rb = calloc(1, sizeof(*rb));
    if (!rb || !(rb->out = json_array())) {
        free(rb);
        put_error(m, NULL, RPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    rb->pending = 1; /* until every element has been read */
    size_t i;
    json_t *el;
    json_array_foreach(msgs, i, el)
    {
        json_t *id = json_object_get(el, "id");
        struct mcp_route *r = NULL;
        if (json_object_get(el, "method") && is_id(id) && (r = calloc(1, sizeof(*r)))) {
            r->id = json_incref(id);
            r->rb = rb;
            r->next = m->routes;
            m->routes = r;
            rb->pending++;
        }
        m->cur_rb = rb;
        on_message(m, json_incref(el));
        m->cur_rb = NULL;
    }
    rb_release(m, rb);
}

/* One line of input: a JSON-RPC request, notification or response. */
static void on_line(struct mcp *m, const char *line, size_t len)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        i++;
    if (i == len)
        return; /* a blank line */
    json_error_t jerr;
    json_t *msg = te_json_loadb(line, len, JSON_DECODE_ANY, &jerr);
    if (!msg) {
        char text[256];
        snprintf(text, sizeof(text), "Parse error: %s (column %d)", jerr.text, jerr.column);
        put_error(m, NULL, RPC_PARSE_ERROR, text, NULL);
        return;
    }
    if (json_is_array(msg)) {
        on_rpc_batch(m, msg);
        json_decref(msg);
        return;
    }
    on_message(m, msg);
}

/* One message (stolen). */
static void on_message(struct mcp *m, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    const char *version = json_string_value(json_object_get(msg, "jsonrpc"));
    json_t *method_v = json_object_get(msg, "method");
    const char *method = json_string_value(method_v);
    json_t *params = json_object_get(msg, "params");
    const char *bad = NULL;
    if (!json_is_object(msg))
        bad = "Invalid Request: expected a JSON object";
    else if (id && !is_id(id))
        bad = "Invalid Request: id: expected a string or a number";
    else if (!version || strcmp(version, "2.0") != 0)
        bad = "Invalid Request: jsonrpc: expected \"2.0\"";
    else if (!method_v && id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
        bad = ""; /* a response: to our elicitation/create, or stray */
    else if (!method)
        bad = "Invalid Request: method: expected a string";
    if (bad && !*bad) {
        for (struct mcp_call *c = m->calls; c; c = c->next)
            if (c->elicit_id && json_equal(c->elicit_id, id)) {
                on_elicit_response(m, c, msg);
                break;
            }
    }
    if (bad) {
        if (*bad)
            put_error(m, is_id(id) ? id : NULL, RPC_INVALID_REQUEST, bad, NULL);
        json_decref(msg);
        return;
    }
    if (!id) {
        on_notification(m, method, json_is_object(params) ? params : NULL);
    } else if (params && !json_is_object(params) && !json_is_null(params)) {
        put_error(m, id, RPC_INVALID_PARAMS, "Invalid params: expected an object", NULL);
    } else {
        on_request(m, id, method, json_is_object(params) ? params : NULL);
    }
    json_decref(msg);
}

/* Read what standard input has and handle every whole line in it. */
static void read_input(struct mcp *m)
{
    char chunk[65536];
    ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        /* a last line without its newline still counts */
        size_t len;
        const char *line = te_lines_finish(&m->in, &len);
        if (line)
            on_line(m, line, len);
        te_lines_free(&m->in);
        end_of_input(m);
        return;
    }
    const char *p = chunk;
    size_t left = (size_t)n;
    while (left) {
        size_t used;
        int rc = te_lines_feed(&m->in, p, left, &used);
        p += used;
        left -= used;
        if (rc == TE_LINES_LINE) {
            size_t len;
            const char *line = te_lines_line(&m->in, &len);
            on_line(m, line, len);
            te_lines_next(&m->in);
        } else if (rc == -EMSGSIZE) {
            put_error(m, NULL, RPC_PARSE_ERROR, "Parse error: the message is longer than 16 MiB",
                      NULL);
        } else if (rc < 0) {
            cli_err("mcp: out of memory reading standard input");
            end_of_input(m);
            return;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Events from the daemon */

static bool is_event(const json_t *ev, const char *kind)
{
    const char *k = json_string_value(json_object_get(ev, "event"));
    return k && strcmp(k, kind) == 0;
}

static bool is_failure(const json_t *result)
{
    return !result || json_object_get(result, "error") || json_object_get(result, "tool_error");
}

/* What the model reads when its tool asked the user a question that the
 * host was not asked (no elicitation) or did not put to the user. */
static void put_question(struct mcp *m, struct mcp_call *c, const char *question)
{
    char *text = NULL;
    if (asprintf(&text,
                 "[ask_user] The tool needs an answer from the user before it can go on. "
                 "Ask the user this question, then call the tool again with the answer: %s",
                 question) < 0)
        text = NULL;
    put_call_result(m, c->id, text ? text : question, false, NULL);
    free(text);
}

/* A tool's ask_user: put the question to the user through the host
 * (elicitation/create) when it can; true when the call now waits for that. */
static bool ask_host(struct mcp *m, struct mcp_call *c, const char *question)
{
    if (!m->elicitation) {
        put_question(m, c, question);
        return false;
    }
    char id[64];
    snprintf(id, sizeof(id), "toolexec-elicit-%llu", ++m->elicits);
    json_t *req = json_pack("{s:s,s:s,s:s,s:{s:s,s:{s:s,s:{s:{s:s,s:s}},s:[s]}}}", "jsonrpc", "2.0",
                            "id", id, "method", "elicitation/create", "params", "message", question,
                            "requestedSchema", "type", "object", "properties", "answer", "type",
                            "string", "title", "Answer", "required", "answer");
    if (!req) {
        put_question(m, c, question);
        return false;
    }
    c->elicit_id = json_string(id);
    put_message(m, req);
    return true;
}

/* The host's answer to our elicitation/create for call c. */
static void on_elicit_response(struct mcp *m, struct mcp_call *c, const json_t *msg)
{
    const char *question = json_string_value(json_object_get(c->result, "ask_user"));
    json_t *result = json_object_get(msg, "result");
    const char *action = json_string_value(json_object_get(result, "action"));
    json_t *answer = json_object_get(json_object_get(result, "content"), "answer");
    if (c->cancelled) {
        /* no response for a cancelled request */
    } else if (!action) {
        put_question(m, c, question ? question : "");
    } else {
        char *shown = json_is_string(answer) ? strdup(json_string_value(answer))
                      : answer               ? te_json_dumps(answer, JSON_ENCODE_ANY, NULL)
                                             : NULL;
        char *text = NULL;
        int n = strcmp(action, "accept") == 0
                    ? asprintf(&text, "The tool asked the user: %s\nThe user answered: %s",
                               question ? question : "", shown ? shown : "")
                    : asprintf(&text, "The tool asked the user: %s\nThe user did not answer (%s).",
                               question ? question : "", action);
        put_call_result(m, c->id, n < 0 ? "" : text, false, NULL);
        free(text);
        free(shown);
    }
    call_remove(m, c);
}

/* The batch's terminal event: the call's answer. */
static void finish_call(struct mcp *m, struct mcp_call *c, const json_t *ev)
{
    const char *question = json_string_value(json_object_get(c->result, "ask_user"));
    if (c->cancelled) {
        /* MCP: no response for a cancelled request */
    } else if (is_event(ev, "batch_completed") && question) {
        if (ask_host(m, c, question))
            return; /* answered when the host's response comes */
    } else if (is_event(ev, "batch_completed")) {
        json_t *msg = json_array_get(json_object_get(ev, "messages"), 0);
        put_call_result(m, c->id, json_string_value(json_object_get(msg, "content")),
                        is_failure(c->result), json_object_get(c->result, "ok"));
    } else {
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *reason = json_string_value(json_object_get(ev, "reason"));
        const char *message = json_string_value(json_object_get(ev, "message"));
        if (!message)
            message = "toolexecd refused the call";
        if (reason && strcmp(reason, "unknown_tool") == 0) {
            /* the spec (2025-06-18, 2025-11-25) lists an unknown tool as a
             * protocol error, its example -32602 */
            const char *tool =
                json_string_value(json_object_get(json_object_get(ev, "metadata"), "tool_name"));
            char text[256];
            snprintf(text, sizeof(text), "Unknown tool: %.200s", tool ? tool : "");
            put_error(m, c->id, RPC_INVALID_PARAMS, text,
                      json_pack("{s:s?,s:s?}", "type", type, "reason", reason));
        } else if (type && strcmp(type, "engine_error") == 0) {
            /* forbidden_tool: a tool error, which the model can read and act
             * on */
            put_call_result(m, c->id, message, true, NULL);
        } else {
            int code = reason && strcmp(reason, "invalid_request") == 0 ? RPC_INVALID_PARAMS
                                                                        : RPC_INTERNAL_ERROR;
            put_error(m, c->id, code, message,
                      json_pack("{s:s?,s:s?}", "type", type, "reason", reason));
        }
    }
    call_remove(m, c);
}

/* An error event that is not a batch's: a tools request's refusal. */
static void on_loose_error(struct mcp *m, const json_t *ev)
{
    const char *message = json_string_value(json_object_get(ev, "message"));
    struct mcp_listing *l = listing_pop(m);
    if (!l) {
        cli_err("mcp: toolexecd: %s", message ? message : "an error");
        return;
    }
    if (!l->cancelled)
        put_error(m, l->id, RPC_INTERNAL_ERROR, message ? message : "toolexecd refused", NULL);
    listing_free(m, l);
}

static void on_event(struct mcp *m, json_t *ev)
{
    const char *batch = json_string_value(json_object_get(ev, "batch"));
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    struct mcp_call *c;
    if (is_event(ev, "tools") && !batch) {
        struct mcp_listing *l = listing_pop(m);
        if (l && !l->cancelled)
            put_result(m, l->id, json_pack("{s:O}", "tools", json_object_get(ev, "tools")));
        if (l)
            listing_free(m, l);
    } else if (is_event(ev, "tools_changed")) {
        put_message(m, json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method",
                                 "notifications/tools/list_changed"));
    } else if (is_event(ev, "error") && reason && strcmp(reason, "unknown_batch") == 0) {
        /* our cancel crossed the batch's completion on the wire */
    } else if (is_event(ev, "error") && !batch) {
        on_loose_error(m, ev);
    } else if (!(c = call_by_batch(m, batch))) {
        /* not one of ours any more */
    } else if (is_event(ev, "tool_execution_progress")) {
        if (c->progress_token && !c->cancelled)
            put_progress(m, c, json_object_get(ev, "progress"));
    } else if (is_event(ev, "tool_execution_completed")) {
        json_decref(c->result);
        c->result = json_incref(json_object_get(ev, "result"));
    } else if (is_event(ev, "batch_completed") || is_event(ev, "error")) {
        finish_call(m, c, ev);
    }
}

/* Read one event. Returns 0, or an exit code when the connection failed. */
static int read_event(struct mcp *m)
{
    json_t *ev;
    int rc = te_client_recv(m->client, &ev);
    if (rc < 0)
        return cli_recv_failed(m->cli, rc, "the session ended");
    on_event(m, ev);
    json_decref(ev);
    return 0;
}

/* The daemon is gone: what is still owed an answer gets an error. */
static void fail_all(struct mcp *m)
{
    const char *msg = "lost the connection to toolexecd";
    while (m->calls) {
        if (!m->calls->cancelled)
            put_error(m, m->calls->id, RPC_INTERNAL_ERROR, msg, NULL);
        call_remove(m, m->calls);
    }
    struct mcp_listing *l;
    while ((l = listing_pop(m))) {
        if (!l->cancelled)
            put_error(m, l->id, RPC_INTERNAL_ERROR, msg, NULL);
        listing_free(m, l);
    }
}

/* ------------------------------------------------------------------------ */
/* The session */

static int serve(struct mcp *m)
{
    for (;;) {
        if (m->hangup && !m->eof)
            end_of_input(m);
        if (m->lost) {
            fail_all(m);
            return m->lost;
        }
        if (m->eof && !m->calls && !m->listings)
            return CLI_EXIT_OK;
        if (te_client_pending(m->client)) {
            m->lost = read_event(m);
            continue;
        }
        struct pollfd pfd[2] = {
            {.fd = te_client_fd(m->client), .events = POLLIN},
            {.fd = m->eof ? -1 : STDIN_FILENO, .events = POLLIN},
        };
        if (poll(pfd, 2, heartbeats(m)) < 0) {
            if (errno == EINTR)
                continue;
            cli_err("poll: %s", strerror(errno));
            return CLI_EXIT_ERROR;
        }
        if (pfd[0].revents)
            m->lost = read_event(m);
        if (!m->lost && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
            read_input(m);
        else if (pfd[1].revents & POLLNVAL) /* no standard input at all */
            end_of_input(m);
    }
}

enum { OPT_TIMEOUT = 256, OPT_HEARTBEAT };

int cli_cmd_mcp(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"tool-timeout", required_argument, NULL, OPT_TIMEOUT},
        {"heartbeat", required_argument, NULL, OPT_HEARTBEAT},
        {0},
    };
    struct mcp m = {.cli = cli, .heartbeat_ms = MCP_HEARTBEAT_MS};
    te_lines_init(&m.in, MCP_LINE_MAX);
    int opt;
    while ((opt = getopt_long(argc, argv, ":s:jh", opts, NULL)) != -1) {
        if (cli_common_option(cli, opt, optarg))
            continue; /* --json: the output is JSON anyway */
        if (opt == 'h')
            return cli_help("mcp");
        if (opt == OPT_HEARTBEAT) {
            json_int_t ms;
            if (!cli_parse_positive(optarg, &ms))
                return cli_usage_error("mcp", "--heartbeat: expected a positive integer, not '%s'",
                                       optarg);
            m.heartbeat_ms = ms;
            continue;
        }
        if (opt != OPT_TIMEOUT)
            return cli_bad_option("mcp", opt, argv);
        if (!cli_parse_positive(optarg, &m.tool_timeout))
            return cli_usage_error("mcp",
                                   "--tool-timeout: expected a positive integer, not "
                                   "'%s'",
                                   optarg);
    }
    if (optind < argc)
        return cli_usage_error("mcp", "unexpected '%s'", argv[optind]);
    m.client = cli_connect(cli);
    if (!m.client)
        return CLI_EXIT_CONNECT;
    if (isatty(STDIN_FILENO))
        cli_err("mcp: serving MCP on standard input and output, for an MCP host to start; "
                "Ctrl-D ends it");
    /* A host that closes standard output must not kill us mid-write. */
    signal(SIGPIPE, SIG_IGN);
    m.listings_tail = &m.listings;
    int rc = serve(&m);
    while (m.calls)
        call_remove(&m, m.calls);
    struct mcp_listing *l;
    while ((l = listing_pop(&m)))
        listing_free(&m, l);
    while (m.routes) {
        struct mcp_route *r = m.routes;
        m.routes = r->next;
        rb_release(&m, r->rb);
        json_decref(r->id);
        free(r);
    }
    te_lines_free(&m.in);
    te_client_close(m.client);
    return rc;
}
