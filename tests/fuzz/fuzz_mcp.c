/*
 * fuzz_mcp - the MCP core of `toolexec mcp` (daemon/cli/mcp_*.c) fed what a
 * client and the daemon send, as any transport would (mcp_int.h), stdio's
 * or the Streamable HTTP front's, which puts it in reach of the network.
 *
 * Input: lines, each a command by its first byte:
 *   C<d><json>  a client message (parsed; a line that is not JSON is
 *               skipped: parse errors are the transport's) on stream d
 *               ('0'..'3'; '0' is stdio's NULL); "taskId": "@" is replaced
 *               by the latest task handle the core gave (handles are
 *               random); calls of a client with the tasks extension become
 *               tasks at once, two at most
 *   D<json>     an event from the daemon; "batch": "@" is replaced by the
 *               batch of the latest run request the core sent
 *   G<d>        stream d's reader went away
 *   E           the end of input
 *   H           heartbeats due now
 *   L           the daemon connection is lost
 *   F           the connection's send queue is full, or (again) no longer
 *
 * The core runs two batches at once (max_batches): the calls past them are
 * held until one ends.
 *
 * Invariants: every message out is a JSON-RPC 2.0 object (or, for a
 * 2025-03-26 batch, an array of them) that is exactly one of a request, a
 * notification, a result or an error; final is set exactly for responses;
 * a result of a 2026-07-28 request carries resultType and the server's
 * identity; an error's code is an integer and its message a string; the
 * batches the core counts running are its calls marked running, never more
 * than two; after the end of input and the core freed, nothing leaks
 * (LeakSanitizer).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"

/* ---- the daemon connection, from the input --------------------------- */

#include "mcp_fake_daemon.h"

static char last_task[128];

/* ---- the sink ----------------------------------------------------------- */

static void check_one(const json_t *msg, const struct mcp_reqctx *req, bool final)
{
    CHECK(json_is_object(msg), "a message that is not an object");
    const char *v = json_string_value(json_object_get(msg, "jsonrpc"));
    CHECK(v && strcmp(v, "2.0") == 0, "jsonrpc is not \"2.0\"");
    json_t *method = json_object_get(msg, "method"), *result = json_object_get(msg, "result"),
           *error = json_object_get(msg, "error");
    const char *task = json_string_value(json_object_get(result, "taskId"));
    if (task)
        snprintf(last_task, sizeof(last_task), "%s", task);
    CHECK((method != NULL) + (result != NULL) + (error != NULL) == 1,
          "not exactly one of method, result, error");
    if (method)
        CHECK(json_is_string(method), "method not a string");
    if (result) {
        CHECK(json_is_object(result), "result not an object");
        CHECK(json_object_get(msg, "id"), "a result without an id");
        if (req && req->modern) {
            CHECK(json_is_string(json_object_get(result, "resultType")), "no resultType");
            CHECK(json_object_get(json_object_get(result, "_meta"), MCP_META_SERVERINFO),
                  "no serverInfo");
        }
    }
    if (error) {
        CHECK(json_is_integer(json_object_get(error, "code")), "error code not an integer");
        CHECK(json_is_string(json_object_get(error, "message")), "error message not a string");
    }
    (void) final;
}

static void sink_send(void *ctx, json_t *msg, const struct mcp_reqctx *req, bool final)
{
    (void)ctx;
    bool response = false;
    if (json_is_array(msg)) {
        CHECK(json_array_size(msg) > 0, "an empty batch answer");
        size_t i;
        json_t *el;
        json_array_foreach(msg, i, el) check_one(el, NULL, true);
        response = true;
    } else {
        check_one(msg, req, final);
        response = json_object_get(msg, "result") || json_object_get(msg, "error");
    }
    CHECK(final == response, "final %d for a message that is %sa response", final,
          response ? "" : "not ");
    json_decref(msg);
}

static void sink_dropped(void *ctx, const struct mcp_reqctx *req)
{
    (void)ctx;
    CHECK(req != NULL, "dropped without a request");
}

static const struct mcp_sink_ops sink = {.send = sink_send, .dropped = sink_dropped};

/* ---- the commands ------------------------------------------------------- */

static void *stream_of(char d)
{
    return d >= '1' && d <= '3' ? (void *)(uintptr_t)(d - '0') : NULL;
}

static void daemon_event(struct mcp *m, const char *text, size_t len)
{
    json_t *ev = json_loadb(text, len, 0, NULL);
    if (!json_is_object(ev)) {
        json_decref(ev);
        return;
    }
    const char *b = json_string_value(json_object_get(ev, "batch"));
    if (b && strcmp(b, "@") == 0)
        json_object_set_new(ev, "batch", json_string(last_batch));
    json_array_append_new(fake_events, ev);
    mcp_daemon_readable(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cli cli;
    memset(&cli, 0, sizeof(cli));
    struct mcp m = {.heartbeat_ms = 1, .task_after_ms = -1, .max_tasks = 2, .max_batches = 2};
    fake_events = json_array();
    /* the daemon answers the core's own listing (mcp_toolinfo.c) with a
     * blocks tool and a task-only one */
    fake_tools_answers = true;
    fake_tools =
        json_pack("[{s:s,s:{s:s}},{s:s,s:{s:s}}]", "name", "img", "_meta", "toolexecd/content",
                  "blocks", "name", "job", "_meta", "toolexecd/taskSupport", "required");
    fake_full = false;
    last_batch[0] = last_task[0] = '\0';
    mcp_core_init(&m, &cli, NULL, &sink, NULL);
    const char *p = (const char *)data, *end = p + size;
    while (p < end && !m.lost) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)((nl ? nl : end) - p);
        if (len >= 2 && p[0] == 'C') {
            json_t *msg = json_loadb(p + 2, len - 2, JSON_DECODE_ANY, NULL);
            struct mcp_origin o = {.stream = stream_of(p[1]), .subject = "fuzz"};
            json_t *params = json_object_get(msg, "params");
            const char *tid = json_string_value(json_object_get(params, "taskId"));
            if (tid && strcmp(tid, "@") == 0)
                json_object_set_new(params, "taskId", json_string(last_task));
            if (msg && !m.eof)
                mcp_feed(&m, msg, &o);
            else
                json_decref(msg);
            if (te_client_pending(NULL) && !m.lost)
                mcp_daemon_readable(&m); /* what the daemon answers at once */
        } else if (len >= 1 && p[0] == 'D') {
            daemon_event(&m, p + 1, len - 1);
        } else if (len >= 2 && p[0] == 'G') {
            mcp_stream_gone(&m, stream_of(p[1]));
        } else if (len >= 1 && p[0] == 'E' && !m.eof) {
            mcp_end_of_input(&m);
        } else if (len >= 1 && p[0] == 'H') {
            mcp_heartbeats(&m);
        } else if (len >= 1 && p[0] == 'L') {
            m.lost = CLI_EXIT_CONNECT;
        } else if (len >= 1 && p[0] == 'F') {
            fake_full = !fake_full;
        }
        unsigned running = 0;
        for (const struct mcp_call *c = m.calls; c; c = c->next)
            running += c->running;
        CHECK(running == m.nbatches && m.nbatches <= 2, "the batches counted running");
        p += len + (nl ? 1 : 0);
    }
    if (m.lost)
        mcp_fail_all(&m);
    else if (!m.eof)
        mcp_end_of_input(&m);
    mcp_core_free(&m);
    CHECK(!m.calls && !m.listings && !m.subs && !m.routes && !m.tasks && !m.ntasks,
          "the core kept something");
    json_decref(fake_events);
    json_decref(fake_tools);
    fake_tools = NULL;
    return 0;
}
