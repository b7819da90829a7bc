/*
 * mcp.c - `toolexec mcp`: a Model Context Protocol server over stdio that
 * forwards to the daemon, so any MCP host can call toolexecd's tools.
 *
 * MCP's stdio transport: one JSON-RPC 2.0 message per line on standard input
 * and output; standard output carries nothing else, messages for people go
 * to standard error. One daemon connection carries the whole session:
 *
 *   initialize                the server's capabilities (tools, logging)
 *   ping                      {}
 *   logging/setLevel          {}: the session's calls log from that level
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
 *
 * Its parts are listed in mcp_int.h; this file holds the session.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp_auth.h"
#include "mcp_http.h"
#include "mcp_int.h"

/* A longer message on standard input is refused (the daemon's own default
 * limit on a request line). */
#define MCP_LINE_MAX (16u << 20)

/* A running call whose request carried a progressToken gets a
 * notifications/progress at least this often (--heartbeat): hosts time a
 * request out after 60 s without one by default. */
#define MCP_HEARTBEAT_MS 5000

/* ------------------------------------------------------------------------ */
/* The stdio transport */

struct mcp_stdio {
    struct mcp *m;
    te_lines in; /* the line of standard input being read */
    bool hangup; /* writing to standard output failed */
};

/* The sink: each message a line on standard output, whatever it answers. */
static void stdio_send(void *ctx, json_t *msg, const struct mcp_reqctx *req, bool final)
{
    struct mcp_stdio *io = ctx;
    (void)req;
    (void) final;
    char *s = te_json_dumps(msg, 0, NULL);
    json_decref(msg);
    if (!s) {
        cli_err("mcp: out of memory; a response is lost");
        return;
    }
    if (!io->hangup && (fputs(s, stdout) == EOF || putchar('\n') == EOF || fflush(stdout) == EOF)) {
        /* the host closed its end: as good as the end of input */
        io->hangup = true;
    }
    free(s);
}

static const struct mcp_sink_ops stdio_sink = {.send = stdio_send};

/* One line of input: a JSON-RPC message or a batch of them. */
static void on_line(struct mcp_stdio *io, const char *line, size_t len)
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
        mcp_put_error(io->m, NULL, RPC_PARSE_ERROR, text, NULL);
        return;
    }
    mcp_feed(io->m, msg, NULL);
}

/* Read what standard input has and handle every whole line in it. */
static void read_input(struct mcp_stdio *io)
{
    char chunk[65536];
    ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        /* a last line without its newline still counts */
        size_t len;
        const char *line = te_lines_finish(&io->in, &len);
        if (line)
            on_line(io, line, len);
        te_lines_free(&io->in);
        mcp_end_of_input(io->m);
        return;
    }
    const char *p = chunk;
    size_t left = (size_t)n;
    while (left) {
        size_t used;
        int rc = te_lines_feed(&io->in, p, left, &used);
        p += used;
        left -= used;
        if (rc == TE_LINES_LINE) {
            size_t len;
            const char *line = te_lines_line(&io->in, &len);
            on_line(io, line, len);
            te_lines_next(&io->in);
        } else if (rc == -EMSGSIZE) {
            mcp_put_error(io->m, NULL, RPC_PARSE_ERROR,
                          "Parse error: the message is longer than 16 MiB", NULL);
        } else if (rc < 0) {
            cli_err("mcp: out of memory reading standard input");
            mcp_end_of_input(io->m);
            return;
        }
    }
}

static int serve(struct mcp_stdio *io)
{
    struct mcp *m = io->m;
    for (;;) {
        if (io->hangup && !m->eof)
            mcp_end_of_input(m);
        if (m->lost) {
            mcp_fail_all(m);
            return m->lost;
        }
        if (m->eof && mcp_idle(m))
            return CLI_EXIT_OK;
        struct pollfd pfd[2] = {
            {.fd = mcp_daemon_fd(m), .events = POLLIN},
            {.fd = m->eof ? -1 : STDIN_FILENO, .events = POLLIN},
        };
        if (poll(pfd, 2, mcp_heartbeats(m)) < 0) {
            if (errno == EINTR)
                continue;
            cli_err("poll: %s", strerror(errno));
            return CLI_EXIT_ERROR;
        }
        if (pfd[0].revents)
            mcp_daemon_readable(m);
        if (!m->lost && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
            read_input(io);
        else if (pfd[1].revents & POLLNVAL) /* no standard input at all */
            mcp_end_of_input(m);
    }
}

enum {
    OPT_TIMEOUT = 256,
    OPT_HEARTBEAT,
    OPT_LISTEN,
    OPT_LISTEN_REMOTE,
    OPT_ALLOW_ORIGIN,
    OPT_MAX_BODY,
    OPT_MAX_HEADER,
    OPT_CONNECTIONS,
    OPT_HTTP_TIMEOUT,
    OPT_SESSIONS,
    OPT_SESSION_IDLE,
    OPT_KEEPALIVE,
    OPT_DRAIN_TIMEOUT,
    OPT_DAEMON_BATCHES,
    OPT_TOOLS_WAIT,
    OPT_RESOURCE,
    OPT_OAUTH_ISSUER,
    OPT_OAUTH_CA,
    OPT_BEARER_TOKENS,
};

/* --resource and what goes with it: true when opt was one of them. */
static bool auth_option(struct mcp_auth_cfg *a, int opt, const char *arg)
{
    if (opt == OPT_RESOURCE)
        a->resource = arg;
    else if (opt == OPT_OAUTH_ISSUER)
        a->issuer = arg;
    else if (opt == OPT_OAUTH_CA)
        a->ca_file = arg;
    else if (opt == OPT_BEARER_TOKENS)
        a->tokens_dir = arg;
    else
        return false;
    return true;
}

/* The --listen options that take a positive number, and where it goes. */
static bool http_number(struct mcp_http_opts *o, int opt, const char *arg, const char **bad)
{
    static const struct {
        int opt;
        const char *name;
    } names[] = {{OPT_MAX_BODY, "--max-body"},       {OPT_MAX_HEADER, "--max-header"},
                 {OPT_CONNECTIONS, "--connections"}, {OPT_HTTP_TIMEOUT, "--http-timeout"},
                 {OPT_SESSIONS, "--sessions"},       {OPT_SESSION_IDLE, "--session-idle"},
                 {OPT_KEEPALIVE, "--keepalive"}};
    const char *name = NULL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].opt == opt)
            name = names[i].name;
    if (!name)
        return false;
    json_int_t v;
    if (!cli_parse_positive(arg, &v) || v > 1 << 30) {
        *bad = name;
        return true;
    }
    if (opt == OPT_MAX_BODY)
        o->body_max = (size_t)v;
    else if (opt == OPT_MAX_HEADER)
        o->header_max = (size_t)v;
    else if (opt == OPT_CONNECTIONS)
        o->conn_max = (unsigned)v;
    else if (opt == OPT_HTTP_TIMEOUT)
        o->timeout_s = (unsigned)v;
    else if (opt == OPT_SESSIONS)
        o->sessions_max = (unsigned)v;
    else if (opt == OPT_SESSION_IDLE)
        o->session_idle_s = (unsigned)v;
    else
        o->keepalive_ms = v > 86400 ? 86400000u : (unsigned)v * 1000; /* a day at most */
    return true;
}

int cli_cmd_mcp(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"tool-timeout", required_argument, NULL, OPT_TIMEOUT},
        {"heartbeat", required_argument, NULL, OPT_HEARTBEAT},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"listen-remote", no_argument, NULL, OPT_LISTEN_REMOTE},
        {"allow-origin", required_argument, NULL, OPT_ALLOW_ORIGIN},
        {"max-body", required_argument, NULL, OPT_MAX_BODY},
        {"max-header", required_argument, NULL, OPT_MAX_HEADER},
        {"connections", required_argument, NULL, OPT_CONNECTIONS},
        {"http-timeout", required_argument, NULL, OPT_HTTP_TIMEOUT},
        {"sessions", required_argument, NULL, OPT_SESSIONS},
        {"session-idle", required_argument, NULL, OPT_SESSION_IDLE},
        {"keepalive", required_argument, NULL, OPT_KEEPALIVE},
        {"drain-timeout", required_argument, NULL, OPT_DRAIN_TIMEOUT},
        {"daemon-batches", required_argument, NULL, OPT_DAEMON_BATCHES},
        {"tools-wait", required_argument, NULL, OPT_TOOLS_WAIT},
        MCP_TASK_OPTIONS,
        {"resource", required_argument, NULL, OPT_RESOURCE},
        {"oauth-issuer", required_argument, NULL, OPT_OAUTH_ISSUER},
        {"oauth-ca", required_argument, NULL, OPT_OAUTH_CA},
        {"bearer-tokens", required_argument, NULL, OPT_BEARER_TOKENS},
        {0},
    };
    struct mcp m = {.heartbeat_ms = MCP_HEARTBEAT_MS}; /* max_batches 0: not given */
    struct mcp_stdio io = {.m = &m};
    struct mcp_http_opts http = {
        .body_max = MCP_HTTP_BODY_MAX,
        .header_max = MCP_HTTP_HEADER_MAX,
        .conn_max = MCP_HTTP_CONN_MAX,
        .timeout_s = MCP_HTTP_TIMEOUT_S,
        .sessions_max = MCP_HTTP_SESSIONS_MAX,
        .session_idle_s = MCP_HTTP_SESSION_IDLE_S,
        .keepalive_ms = MCP_HTTP_KEEPALIVE_MS,
        .drain_s = MCP_HTTP_DRAIN_S,
    };
    bool drain_set = false;
    struct mcp_auth_cfg auth = {0};
    const char *origins[17] = {0};
    size_t norigins = 0;
    const char *bad = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, ":s:jh", opts, NULL)) != -1) {
        if (cli_common_option(cli, opt, optarg))
            continue; /* --json: the output is JSON anyway */
        if (opt == 'h')
            return cli_help("mcp");
        int taken = mcp_tasks_option(&m, opt, optarg);
        if (taken < 0)
            return CLI_EXIT_ERROR;
        if (taken == 0)
            continue;
        if (http_number(&http, opt, optarg, &bad)) {
            if (bad)
                return cli_usage_error("mcp", "%s: expected a positive integer, not '%s'", bad,
                                       optarg);
            continue;
        }
        if (auth_option(&auth, opt, optarg))
            continue;
        if (opt == OPT_LISTEN) {
            http.listen = optarg;
            continue;
        }
        if (opt == OPT_DRAIN_TIMEOUT) {
            /* 0 is meaningful: SIGTERM exits at once */
            json_int_t v = 0;
            if (strcmp(optarg, "0") != 0 && (!cli_parse_positive(optarg, &v) || v > 86400))
                return cli_usage_error(
                    "mcp", "--drain-timeout: expected seconds, 0 to 86400, not '%s'", optarg);
            http.drain_s = (unsigned)v;
            drain_set = true;
            continue;
        }
        if (opt == OPT_LISTEN_REMOTE) {
            http.allow_remote = true;
            continue;
        }
        if (opt == OPT_ALLOW_ORIGIN) {
            if (norigins + 1 >= sizeof(origins) / sizeof(origins[0]))
                return cli_usage_error("mcp", "--allow-origin: at most 16");
            origins[norigins++] = optarg;
            continue;
        }
        if (opt == OPT_DAEMON_BATCHES) {
            json_int_t v;
            if (!cli_parse_positive(optarg, &v) || v > 1000000)
                return cli_usage_error("mcp", "--daemon-batches: expected 1 to 1000000, not '%s'",
                                       optarg);
            m.max_batches = (unsigned)v;
            continue;
        }
        if (opt == OPT_TOOLS_WAIT) {
            json_int_t s;
            if (!cli_parse_positive(optarg, &s) || s > 86400)
                return cli_usage_error(
                    "mcp", "--tools-wait: expected seconds, 1 to 86400, not '%s'", optarg);
            m.tools_wait_ms = s * 1000;
            continue;
        }
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
    if (!http.listen && (http.allow_remote || norigins || drain_set))
        return cli_usage_error(
            "mcp", "--listen-remote, --allow-origin and --drain-timeout go with --listen");
    bool authn = auth.resource || auth.issuer || auth.ca_file || auth.tokens_dir;
    if (!http.listen && authn)
        return cli_usage_error(
            "mcp", "--resource, --oauth-issuer, --oauth-ca and --bearer-tokens go with --listen");
    if (authn && !auth.resource)
        return cli_usage_error("mcp", "--oauth-issuer, --oauth-ca and --bearer-tokens need "
                                      "--resource (this server's URL, which tokens must name)");
    if (auth.ca_file && !auth.issuer)
        return cli_usage_error("mcp", "--oauth-ca goes with --oauth-issuer");
    http.origins = origins;
    if (http.listen) /* the front learns the daemon's bound when not given */
        return mcp_http_serve_module(cli, &http, &m, auth.resource ? &auth : NULL);
    if (!m.max_batches)
        m.max_batches = MCP_DAEMON_BATCHES;
    te_client *client = cli_connect(cli);
    if (!client)
        return CLI_EXIT_CONNECT;
    mcp_core_init(&m, cli, client, &stdio_sink, &io);
    te_lines_init(&io.in, MCP_LINE_MAX);
    if (isatty(STDIN_FILENO))
        cli_err("mcp: serving MCP on standard input and output, for an MCP host to start; "
                "Ctrl-D ends it");
    /* A host that closes standard output must not kill us mid-write. */
    signal(SIGPIPE, SIG_IGN);
    int rc = serve(&io);
    mcp_core_free(&m);
    te_lines_free(&io.in);
    te_client_close(client);
    return rc;
}
