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
 *
 * Its parts are listed in mcp_int.h; this file holds the session.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp_int.h"

/* A longer message on standard input is refused (the daemon's own default
 * limit on a request line). */
#define MCP_LINE_MAX (16u << 20)

/* A running call whose request carried a progressToken gets a
 * notifications/progress at least this often (--heartbeat): hosts time a
 * request out after 60 s without one by default. */
#define MCP_HEARTBEAT_MS 5000

/* ------------------------------------------------------------------------ */
/* The session */

static int serve(struct mcp *m)
{
    for (;;) {
        if (m->hangup && !m->eof)
            mcp_end_of_input(m);
        if (m->lost) {
            mcp_fail_all(m);
            return m->lost;
        }
        if (m->eof && !m->calls && !m->listings)
            return CLI_EXIT_OK;
        if (te_client_pending(m->client)) {
            m->lost = mcp_read_event(m);
            continue;
        }
        struct pollfd pfd[2] = {
            {.fd = te_client_fd(m->client), .events = POLLIN},
            {.fd = m->eof ? -1 : STDIN_FILENO, .events = POLLIN},
        };
        if (poll(pfd, 2, mcp_heartbeats(m)) < 0) {
            if (errno == EINTR)
                continue;
            cli_err("poll: %s", strerror(errno));
            return CLI_EXIT_ERROR;
        }
        if (pfd[0].revents)
            m->lost = mcp_read_event(m);
        if (!m->lost && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
            mcp_read_input(m);
        else if (pfd[1].revents & POLLNVAL) /* no standard input at all */
            mcp_end_of_input(m);
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
        mcp_call_remove(&m, m.calls);
    struct mcp_listing *l;
    while ((l = mcp_listing_pop(&m)))
        mcp_listing_free(&m, l);
    while (m.routes) {
        struct mcp_route *r = m.routes;
        m.routes = r->next;
        mcp_rb_release(&m, r->rb);
        json_decref(r->id);
        free(r);
    }
    te_lines_free(&m.in);
    te_client_close(m.client);
    return rc;
}
