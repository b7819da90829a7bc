/*
 * mcp_fake_daemon.h - the daemon connection of the MCP core (daemon/cli/
 * mcp_int.h) for programs that drive the core without a daemon: the unit
 * test test_mcp_tasks and the fuzz target fuzz_mcp. Included once, by the
 * program's one source file: it defines the client functions the core
 * calls. Events are queued in fake_events; last_batch is the batch of the
 * latest run request the core sent, fake_runs how many it sent, and
 * fake_cancels how many cancels; with fake_cancel_answers, a cancel
 * request is answered as the daemon answers it (the batch's error event);
 * with fake_tools_answers, a tools request with fake_tools (NULL: none);
 * with fake_full, every request finds the connection's queue full
 * (-ENOBUFS, as a non-blocking client past its bound).
 */
#ifndef MCP_FAKE_DAEMON_H
#define MCP_FAKE_DAEMON_H

#include <errno.h>
#include <string.h>

#include "mcp_int.h"

static json_t *fake_events; /* queued daemon events */
static char last_batch[256];
static bool fake_cancel_answers;
static bool fake_tools_answers;
static json_t *fake_tools;
static unsigned fake_runs, fake_cancels;
static bool fake_full;

int te_client_recv(te_client *c, json_t **event)
{
    (void)c;
    if (!json_array_size(fake_events))
        return -ENODATA;
    *event = json_incref(json_array_get(fake_events, 0));
    json_array_remove(fake_events, 0);
    return 0;
}

int te_client_fd(const te_client *c)
{
    (void)c;
    return -1;
}

bool te_client_pending(const te_client *c)
{
    (void)c;
    return json_array_size(fake_events) > 0;
}

void cli_err(const char *fmt, ...)
{
    (void)fmt;
}

int te_client_send(te_client *c, const json_t *req)
{
    (void)c;
    if (fake_full)
        return -ENOBUFS;
    const char *batch = json_string_value(json_object_get(req, "batch"));
    const char *op = json_string_value(json_object_get(req, "op"));
    if (batch && op && strcmp(op, "run") == 0) {
        snprintf(last_batch, sizeof(last_batch), "%s", batch);
        fake_runs++;
    }
    if (op && strcmp(op, "cancel") == 0)
        fake_cancels++;
    if (fake_tools_answers && op && strcmp(op, "tools") == 0)
        json_array_append_new(fake_events,
                              json_pack("{s:s,s:o}", "event", "tools", "tools",
                                        fake_tools ? json_incref(fake_tools) : json_array()));
    if (fake_cancel_answers && batch && op && strcmp(op, "cancel") == 0)
        json_array_append_new(fake_events, json_pack("{s:s,s:s,s:s}", "event", "error", "batch",
                                                     batch, "message", "cancelled"));
    return 0;
}

int cli_send_failed(const struct cli *cli, int rc)
{
    (void)cli;
    (void)rc;
    return CLI_EXIT_CONNECT;
}

int cli_recv_failed(const struct cli *cli, int rc, const char *what)
{
    (void)cli;
    (void)rc;
    (void)what;
    return CLI_EXIT_CONNECT;
}

/* The unit tests' core (m, its settings set): every message it sends goes
 * to fake_out; the daemon answers cancels and listings (fake_tools). */
static json_t *fake_out;

__attribute__((unused)) static void fake_sink_send(void *ctx, json_t *msg,
                                                   const struct mcp_reqctx *req, bool final)
{
    (void)ctx;
    (void)req;
    (void) final;
    json_array_append_new(fake_out, msg);
}

__attribute__((unused)) static void fake_core_start(struct mcp *m, struct cli *cli)
{
    static const struct mcp_sink_ops sink = {.send = fake_sink_send};
    fake_cancel_answers = fake_tools_answers = true;
    fake_events = json_array();
    fake_out = json_array();
    mcp_core_init(m, cli, NULL, &sink, NULL);
}

/* The end of input, then the core freed with what the fake held; as
 * cmocka's teardown, *state is the core. */
__attribute__((unused)) static int fake_core_end(void **state)
{
    struct mcp *m = *state;
    mcp_end_of_input(m);
    mcp_daemon_readable(m);
    mcp_core_free(m);
    json_decref(fake_events);
    json_decref(fake_tools);
    json_decref(fake_out);
    fake_tools = fake_out = NULL;
    return 0;
}

#endif
