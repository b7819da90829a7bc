/*
 * bridge.c - toolexec-mcp-bridge: an MCP server (stdio) as a framed tool.
 *
 * The daemon runs this program as the worker of a call of an "mcp_server"
 * definition (registry.c, mcpdef.c), inside the call's sandbox: its view,
 * limits, uid, filter, proxy and timeout are the call's, and so are the
 * server's, which it starts as its child. It reads the call's request frame
 * (worker protocol, proto/PROTOCOL.md 2.2), speaks MCP to the server as a
 * client over the server's stdin and stdout (newline-delimited JSON-RPC),
 * and writes one response frame (before it, a progress frame for each of
 * the server's progress notifications and a tools_changed frame for each
 * notifications/tools/list_changed: the daemon lists its tools again):
 *
 *   toolexec-mcp-bridge call TOOL -- COMMAND...  tools/call TOOL
 *   toolexec-mcp-bridge list -- COMMAND...       tools/list (every page)
 *   toolexec-mcp-bridge attach PID IN OUT call TOOL --  (or list --): the
 *       same with a server already started, our child (bridge_attach.c)
 *
 * or, for a server at a URL (Streamable HTTP, bridge_http.c), the same
 * with --url URL in place of -- COMMAND...
 *
 * Blocking I/O is right here, as in any worker: one call, one process. No
 * timeout of its own: a server that never answers is the call's timeout,
 * which kills the call's whole process tree (the bridge, the server and
 * whatever it left running). A cancel or a timeout is said to the bridge
 * first (told_to_end), so that it can say it to the server.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "bridge_attach.h"
#include "bridge_http.h"
#include "bridge_serve.h"
#include "toolexec.h"

#define MCP_VERSION "2025-11-25"
/* the stateless revision: no initialize, each request's _meta says it */
#define MCP_MODERN "2026-07-28"
/* One JSON-RPC message from the server: a bigger one is a flood, not an
 * answer (the daemon's own frame limit is 16 MiB by default). */
#define MCP_LINE_MAX (16u << 20)
/* tools/list pages followed: a server that keeps handing out cursors is
 * looping. */
#define MCP_PAGES_MAX 100
/* Told of its call's end (below): how long the server has to read the
 * cancel, known by its answer to a ping sent after it. The daemon kills
 * the bridge 1000 ms after telling it (run/worker.c). */
#define MCP_CANCEL_WAIT_MS 400
#define MCP_PING_ID 1000000000

struct server {
    pid_t pid;
    int in, out; /* its stdin (we write), its stdout (we read) */
    int pidfd;   /* readable once it has ended; -1 where there is none */
    char *buf;
    size_t len, cap, start;
    bool modern;              /* it speaks MCP_MODERN only */
    int awaiting;             /* the tools/call in flight, its id; 0: none */
    bool ending;              /* told: the server's end is expected, not an error */
    struct bridge_http *http; /* a server at a URL: no process, no pipes */
};

static void die(struct server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void told_to_end(struct server *s) __attribute__((noreturn));

/* The daemon's word that the call is over (a stdio server's call only:
 * main()): SIGTERM cancelled, SIGUSR2 timed out. Read where the bridge
 * waits, which the signal interrupts (no SA_RESTART). */
static volatile sig_atomic_t told;

static void on_told(int sig)
{
    told = sig;
}

/* Everything that ends the call without an answer: said on stderr (the
 * call's handler_exit cause), the server killed, a non-zero exit. */
static void die(struct server *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("toolexec-mcp-bridge: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (s && s->pid > 0)
        kill(s->pid, SIGKILL);
    /* _exit: nothing of ours to flush (stderr is unbuffered, frames are
     * written whole), and a sanitizer's leak report at exit would push
     * this line out of the stderr tail the call's error quotes */
    _exit(1);
}

static void start_server(struct server *s, char **argv)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
        die(NULL, "pipe: %s", strerror(errno));
    s->pid = fork();
    if (s->pid < 0)
        die(NULL, "fork: %s", strerror(errno));
    if (s->pid == 0) {
        /* its stdin and stdout are ours to speak MCP on; its stderr is
         * the call's (logged by the daemon) */
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[0], argv);
        fprintf(stderr, "toolexec-mcp-bridge: %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* its children may keep its stdout open after it has ended (a fork
     * bomb, a daemon it left): its end is watched, not only its stdout's */
    s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
    s->in = in[1];
    s->out = out[0];
}

/* The server's end, said in words (it closed its stdout). */
static void server_gone(struct server *s, const char *when)
{
    int st = 0;
    close(s->in);
    pid_t pid = s->pid;
    s->pid = -1;
    if (s->ending)
        _exit(1);
    if (waitpid(pid, &st, 0) < 0)
        die(NULL, "the MCP server closed its stdout %s", when);
    if (WIFSIGNALED(st))
        die(NULL, "the MCP server was killed by signal %d %s", WTERMSIG(st), when);
    die(NULL, "the MCP server exited with status %d %s", WEXITSTATUS(st), when);
}

/* msg (taken) as one line on the server's stdin: 0, or -1 with errno. */
static int write_msg(struct server *s, json_t *msg)
{
    /* numbers as the call gave them (an integer beyond 64 bits, 19.99):
     * jansson's printer would send the first as a string, the second as
     * 19.989999999999998 */
    size_t n;
    char *text = te_json_dumps(msg, JSON_ENCODE_ANY, &n);
    json_decref(msg);
    if (!text) {
        errno = ENOMEM;
        return -1;
    }
    text[n++] = '\n'; /* its NUL becomes the line's end */
    for (size_t off = 0; off < n;) {
        ssize_t w = write(s->in, text + off, n - off);
        if (w < 0 && errno == EINTR && told && !s->ending) {
            free(text);
            told_to_end(s); /* a server not reading its stdin holds us here */
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            free(text);
            return -1;
        }
        off += (size_t)w;
    }
    free(text);
    return 0;
}

static void send_msg(struct server *s, json_t *msg)
{
    char err[1024];
    if (s->http && bridge_http_send(s->http, msg, err, sizeof(err)) < 0)
        die(s, "%s", err);
    if (s->http)
        return;
    if (write_msg(s, msg) < 0) {
        if (errno == ENOMEM)
            die(s, "out of memory");
        server_gone(s, "before reading its request");
    }
}

/* The server's next message (a new reference); its end or a line that is
 * not a JSON object ends the call. With timeout_ms >= 0 (a stdio server),
 * NULL once that has passed with no message. */
static json_t *next_msg_within(struct server *s, const char *when, int timeout_ms)
{
    struct timespec now, until = {0};
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    char err[1024];
    json_t *hm = s->http ? bridge_http_next(s->http, err, sizeof(err)) : NULL;
    if (s->http && !hm)
        die(s, "%s, %s", err, when);
    if (hm)
        return hm;
    for (;;) {
        if (told && !s->ending)
            told_to_end(s);
        char *nl = s->len > s->start ? memchr(s->buf + s->start, '\n', s->len - s->start) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - (s->buf + s->start));
            json_error_t jerr;
            json_t *m = te_json_loadb(s->buf + s->start, n, JSON_REJECT_DUPLICATES, &jerr);
            char *line = s->buf + s->start;
            s->start += n + 1;
            if (n == 0 || (n == 1 && line[0] == '\r'))
                continue;
            if (!json_is_object(m))
                die(s, "the MCP server wrote a line that is not a JSON-RPC message (%s): %.200s",
                    m ? "not an object" : jerr.text, line);
            return m;
        }
        if (s->start) { /* what is read stays at the front */
            memmove(s->buf, s->buf + s->start, s->len - s->start);
            s->len -= s->start;
            s->start = 0;
        }
        if (s->len >= MCP_LINE_MAX)
            die(s, "the MCP server wrote a message over %u bytes", MCP_LINE_MAX);
        if (s->cap - s->len < 65536) {
            size_t cap = s->cap ? s->cap * 2 : 131072;
            char *b = realloc(s->buf, cap);
            if (!b)
                die(s, "out of memory");
            s->buf = b;
            s->cap = cap;
        }
        int wait = -1;
        if (timeout_ms >= 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            long long left =
                (until.tv_sec - now.tv_sec) * 1000LL + (until.tv_nsec - now.tv_nsec) / 1000000L;
            if (left <= 0)
                return NULL;
            wait = (int)left;
        }
        if (s->pidfd >= 0 || wait >= 0) {
            struct pollfd p[2] = {{.fd = s->out, .events = POLLIN},
                                  {.fd = s->pidfd, .events = POLLIN}};
            int n = poll(p, s->pidfd >= 0 ? 2 : 1, wait);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                die(s, "poll: %s", strerror(errno));
            }
            if (n == 0)
                continue; /* the time is up: said at the loop's top */
            /* what it wrote before it ended is read first */
            if (!p[0].revents && p[1].revents)
                server_gone(s, when);
        }
        ssize_t r = read(s->out, s->buf + s->len, s->cap - s->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            server_gone(s, when);
        s->len += (size_t)r;
    }
}

static json_t *next_msg(struct server *s, const char *when)
{
    return next_msg_within(s, when, -1);
}

/* The call is over (cancelled or timed out: the daemon's signal, on_told):
 * the server is told, as an MCP client cancels a request
 * (notifications/cancelled), so a server that acts outside its sandbox
 * (a remote job, a transaction) can stop it; a ping after it, answered,
 * says the server has read it (a stdio server reads its lines in order).
 * Then the bridge ends, and with it the call's processes (its init). */
static void told_to_end(struct server *s)
{
    s->ending = true;
    bool cancelled = told == SIGTERM;
    if (s->awaiting > 0 && s->in >= 0) {
        /* a server that does not read its stdin cannot hold us */
        fcntl(s->in, F_SETFL, fcntl(s->in, F_GETFL) | O_NONBLOCK);
        json_t *params = json_pack("{s:i,s:s}", "requestId", s->awaiting, "reason",
                                   cancelled ? "the call was cancelled" : "the call timed out");
        if (s->modern)
            json_object_set_new(
                params, "_meta",
                json_pack("{s:s}", "io.modelcontextprotocol/protocolVersion", MCP_MODERN));
        if (write_msg(s, json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method",
                                   "notifications/cancelled", "params", params)) == 0 &&
            write_msg(s, json_pack("{s:s,s:i,s:s,s:{}}", "jsonrpc", "2.0", "id", MCP_PING_ID,
                                   "method", "ping", "params")) == 0) {
            json_t *m;
            while ((m = next_msg_within(s, "after its cancel", MCP_CANCEL_WAIT_MS))) {
                json_t *id = json_object_get(m, "id");
                bool pong = json_is_integer(id) && json_integer_value(id) == MCP_PING_ID &&
                            !json_object_get(m, "method");
                json_decref(m);
                if (pong)
                    break;
            }
        }
    }
    fprintf(stderr, "toolexec-mcp-bridge: %s %s\n", cancelled ? "cancelled" : "timed out",
            s->awaiting > 0 ? "during the call: the MCP server was told (notifications/cancelled)"
                            : "before the call reached the MCP server");
    if (s->pid > 0)
        kill(s->pid, SIGKILL);
    _exit(1);
}

static void send_request(struct server *s, int id, const char *method, json_t *params)
{
    if (s->modern && params) {
        json_t *meta = json_object_get(params, "_meta");
        if (!meta)
            json_object_set_new(params, "_meta", meta = json_object());
        json_object_set_new(meta, "io.modelcontextprotocol/protocolVersion",
                            json_string(MCP_MODERN));
        json_object_set_new(meta, "io.modelcontextprotocol/clientCapabilities", json_object());
    }
    send_msg(s, json_pack("{s:s,s:i,s:s,s:o}", "jsonrpc", "2.0", "id", id, "method", method,
                          "params", params ? params : json_object()));
}

/* A request of the server's to us (ping, sampling, roots, elicitation): a
 * tool call offers none of those, so all but ping are refused. */
static void answer_server(struct server *s, json_t *m)
{
    json_t *id = json_object_get(m, "id");
    const char *method = json_string_value(json_object_get(m, "method"));
    if (method && strcmp(method, "ping") == 0)
        send_msg(s, json_pack("{s:s,s:O,s:{}}", "jsonrpc", "2.0", "id", id, "result"));
    else
        send_msg(s, json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                              -32601, "message", "not offered by toolexecd's MCP client"));
}

/* Our progress token's notification, as a progress frame. */
static void forward_progress(struct server *s, json_t *params)
{
    json_t *p = json_object_get(params, "progress");
    json_t *t = json_object_get(params, "total");
    if (!json_is_number(p))
        return;
    if (te_worker_progress(1, json_number_value(p), json_is_number(t) ? json_number_value(t) : -1,
                           json_string_value(json_object_get(params, "message"))) < 0)
        die(s, "writing progress: %s", strerror(errno));
}

/* The response to request id (a new reference): notifications and the
 * server's own requests meanwhile are dealt with. */
static json_t *await(struct server *s, int id, const char *when)
{
    for (;;) {
        json_t *m = next_msg(s, when);
        json_t *mid = json_object_get(m, "id");
        const char *method = json_string_value(json_object_get(m, "method"));
        if (method && mid) {
            answer_server(s, m);
        } else if (method) {
            if (strcmp(method, "notifications/progress") == 0 &&
                te_json_text_value(
                    json_object_get(json_object_get(m, "params"), "progressToken")) &&
                strcmp(json_string_value(
                           json_object_get(json_object_get(m, "params"), "progressToken")),
                       "toolexec") == 0)
                forward_progress(s, json_object_get(m, "params"));
            else if (strcmp(method, "notifications/tools/list_changed") == 0 &&
                     te_worker_tools_changed(1) < 0)
                die(s, "writing a tools_changed frame: %s", strerror(errno));
        } else if (json_is_integer(mid) && json_integer_value(mid) == id) {
            return m;
        }
        json_decref(m);
    }
}

static void initialize(struct server *s)
{
    send_request(s, 1, "initialize",
                 json_pack("{s:s,s:{},s:{s:s,s:s}}", "protocolVersion", MCP_VERSION, "capabilities",
                           "clientInfo", "name", "toolexecd", "version", "1"));
    json_t *m = await(s, 1, "before answering initialize");
    if (json_is_object(json_object_get(m, "result"))) {
        json_decref(m);
        send_msg(s,
                 json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", "notifications/initialized"));
        return;
    }
    /* Refused: a server of the stateless revision alone says so in
     * server/discover (a legacy one never gets that far, so it costs
     * them nothing) */
    char *why = json_dumps(json_object_get(m, "error"), JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(m);
    send_request(s, 1, "server/discover", json_object());
    m = await(s, 1, "before answering server/discover");
    json_t *v, *vs = json_object_get(json_object_get(m, "result"), "supportedVersions");
    size_t i;
    json_array_foreach(vs, i, v) s->modern |=
        te_json_text_value(v) && strcmp(json_string_value(v), MCP_MODERN) == 0;
    json_decref(m);
    if (!s->modern)
        die(s, "the MCP server refused initialize: %.400s", why ? why : "");
    free(why);
}

/* What a failed call (isError) gives the model: the text of its content
 * when all of it is text, else the content blocks as they are. */
static json_t *error_value(json_t *res)
{
    json_t *content = json_object_get(res, "content"), *c;
    size_t i;
    bool text = json_is_array(content) && json_array_size(content) > 0;
    json_array_foreach(content, i, c)
    {
        const char *type = json_string_value(json_object_get(c, "type"));
        text =
            text && type && strcmp(type, "text") == 0 && json_is_string(json_object_get(c, "text"));
    }
    if (!text)
        return content ? json_incref(content) : json_array();
    size_t n = 0;
    json_array_foreach(content, i, c) n += json_string_length(json_object_get(c, "text")) + 1;
    char *all = malloc(n + 1), *p = all;
    if (!all)
        return NULL;
    json_array_foreach(content, i, c)
    {
        json_t *t = json_object_get(c, "text");
        if (i)
            *p++ = '\n';
        memcpy(p, json_string_value(t), json_string_length(t));
        p += json_string_length(t);
    }
    json_t *v = json_stringn(all, (size_t)(p - all));
    free(all);
    return v;
}

/* What a call's result gives: the server's content as MCP has it,
 * {"content": [blocks], "structuredContent"?: {...}}, whole (images,
 * audio, embedded resources), which the tool's definition says it returns
 * ("mcp": {"content": "blocks"}, mcpdef.c) so toolexec mcp hands the blocks
 * on as they came. */
static json_t *ok_value(json_t *res)
{
    json_t *content = json_object_get(res, "content");
    json_t *sc = json_object_get(res, "structuredContent");
    json_t *v =
        json_pack("{s:o}", "content", json_is_array(content) ? json_incref(content) : json_array());
    if (v && sc && !json_is_null(sc))
        json_object_set(v, "structuredContent", sc);
    return v;
}

static json_t *call_tool(struct server *s, const char *tool, json_t *args)
{
    send_request(s, 2, "tools/call",
                 json_pack("{s:s,s:O,s:{s:s}}", "name", tool, "arguments",
                           args ? args : json_object(), "_meta", "progressToken", "toolexec"));
    s->awaiting = 2;
    json_t *m = await(s, 2, "before answering the call");
    s->awaiting = 0;
    json_t *res = json_object_get(m, "result"), *err = json_object_get(m, "error"), *out;
    if (json_is_object(res)) {
        bool failed = json_is_true(json_object_get(res, "isError"));
        json_t *v = failed ? error_value(res) : ok_value(res);
        if (!v)
            die(s, "out of memory");
        out = failed ? te_error(v) : te_ok(v);
    } else if (json_is_object(err)) {
        /* a protocol error (an unknown tool, arguments it refuses): the
         * server's own failure, as it said it */
        out = te_error(json_incref(err));
    } else {
        die(s, "the MCP server answered the call with neither result nor error");
    }
    json_decref(m);
    return out;
}

static json_t *list_tools(struct server *s)
{
    json_t *tools = json_array();
    json_t *cursor = NULL;
    for (int page = 0; page < MCP_PAGES_MAX; page++) {
        json_t *params = cursor ? json_pack("{s:O}", "cursor", cursor) : json_object();
        json_decref(cursor);
        cursor = NULL;
        send_request(s, 2 + page, "tools/list", params);
        json_t *m = await(s, 2 + page, "before listing its tools");
        json_t *res = json_object_get(m, "result");
        if (!json_is_object(res) || !json_is_array(json_object_get(res, "tools")))
            die(s, "the MCP server's tools/list answer has no tools: %.400s",
                json_dumps(m, JSON_COMPACT));
        json_array_extend(tools, json_object_get(res, "tools"));
        cursor = json_incref(json_object_get(res, "nextCursor"));
        json_decref(m);
        if (!json_is_string(cursor))
            return te_ok(json_pack("{s:o}", "tools", tools));
    }
    die(s, "the MCP server's tools/list goes on past %d pages", MCP_PAGES_MAX);
}

static void usage(void)
{
    fputs("usage: toolexec-mcp-bridge call TOOL -- COMMAND...\n"
          "       toolexec-mcp-bridge list -- COMMAND...\n"
          "       toolexec-mcp-bridge attach PID IN OUT call TOOL --\n"
          "       toolexec-mcp-bridge call TOOL --url URL [--param-header NAME=POINTER]...\n"
          "       toolexec-mcp-bridge list --url URL\n"
          "A worker of toolexecd: started by the daemon for an \"mcp_server\" definition.\n",
          stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    struct server s = {0};
    /* attach PID IN OUT: the server is started already (bridge_attach.c),
     * so no command follows "--" */
    int attached = bridge_attach(argc, argv, &s.pid, &s.in, &s.out, &s.pidfd);
    argc -= attached;
    argv += attached;
    int cmd = attached ? 0 : 1;
    bool list = argc >= 3 + cmd && strcmp(argv[1], "list") == 0;
    bool call = argc >= 4 + cmd && strcmp(argv[1], "call") == 0;
    char **rest = argv + (list ? 2 : 3); /* "--" COMMAND... or "--url" URL */
    bool url = !attached && (list || call) && strcmp(rest[0], "--url") == 0 && rest[1];
    if ((!list && !call) || (!url && strcmp(rest[0], "--") != 0))
        usage();
    signal(SIGPIPE, SIG_IGN); /* a dead server is its exit status, not ours */
    if (!url) {               /* at a URL, the default: the bridge's end closes the stream */
        struct sigaction sa = {.sa_handler = on_told}; /* no SA_RESTART: waits end */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGUSR2, &sa, NULL);
    }
    json_t *req = NULL;
    if (te_worker_read_request(0, &req) < 0)
        die(&s, "no request frame on stdin");
    char err[1024];
    if (url && !(s.http = bridge_http_open(rest[1], rest + 2, err, sizeof(err))))
        die(&s, "%s", err);
    if (!url && !attached)
        start_server(&s, rest + 1);
    initialize(&s);
    if (call && json_is_true(json_object_get(req, "serve"))) {
        bridge_serve(&s, argv[2], call_tool); /* an instance: a call per frame */
        if (s.pid > 0)
            kill(s.pid, SIGKILL);
        _exit(0);
    }
    json_t *out = list ? list_tools(&s) : call_tool(&s, argv[2], json_object_get(req, "arguments"));
    /* its session ended first: the response frame ends the call, and the
     * bridge with it */
    if (s.http)
        bridge_http_end(s.http);
    if (!out || te_worker_write_response(1, out) < 0)
        die(&s, "writing the response: %s", out ? strerror(errno) : "out of memory");
    /* the call is over: so is its server (its leftovers die with the call) */
    if (s.pid > 0)
        kill(s.pid, SIGKILL);
    _exit(0); /* as die(): a one-call process leaves its memory to the kernel */
}
