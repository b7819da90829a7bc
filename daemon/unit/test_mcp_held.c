/*
 * test_mcp_held - the MCP core's bound on the batches it runs at once on
 * its daemon connection (max_batches, --daemon-batches; the daemon refuses
 * a connection's batch past its --max-client-batches): the calls past it
 * are held, not sent; a batch's end starts the oldest held one; a held
 * call whose client went away is dropped without a word to the daemon.
 * A daemon that never answers the core's tool listing: the calls held for
 * it fail once they have waited --tools-wait, each with an error naming
 * the listing, and the listing that comes late finds none.
 * The daemon connection is mcp_fake_daemon.h's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "mcp_fake_daemon.h"

static json_t *out;
static unsigned dropped;

static void sink_send(void *ctx, json_t *msg, const struct mcp_reqctx *req, bool final)
{
    (void)ctx;
    (void)req;
    (void) final;
    json_array_append_new(out, msg);
}

static void sink_dropped(void *ctx, const struct mcp_reqctx *req)
{
    (void)ctx;
    (void)req;
    dropped++;
}

static const struct mcp_sink_ops sink = {.send = sink_send, .dropped = sink_dropped};
static struct mcp m;
static struct cli cli;
static int streams[4]; /* each call's stream cookie */

static void call(int i)
{
    struct mcp_origin o = {.stream = &streams[i]};
    mcp_feed(&m,
             json_pack("{s:s,s:i,s:s,s:{s:s,s:{}}}", "jsonrpc", "2.0", "id", i, "method",
                       "tools/call", "params", "name", "t", "arguments"),
             &o);
    mcp_heartbeats(&m);
}

/* The daemon ends the batch of call i (its id is in the batch's name). */
static void complete(int i)
{
    char batch[64] = "";
    for (struct mcp_call *c = m.calls; c; c = c->next)
        if (json_integer_value(c->req.id) == i)
            snprintf(batch, sizeof(batch), "%s", c->batch);
    json_array_append_new(fake_events, json_pack("{s:s,s:s,s:[{s:s}]}", "event", "batch_completed",
                                                 "batch", batch, "messages", "content", "done"));
    mcp_daemon_readable(&m);
    mcp_heartbeats(&m);
}

/* The ids answered so far, in order, as digits. */
static const char *answered(void)
{
    static char ids[16];
    size_t n = 0, i;
    json_t *msg;
    json_array_foreach(out, i, msg) if (n + 1 < sizeof(ids)) ids[n++] =
        (char)('0' + json_integer_value(json_object_get(msg, "id")));
    ids[n] = '\0';
    return ids;
}

/* m afresh; tools_answers: whether the fake daemon answers listings. */
static void core_start(bool tools_answers)
{
    memset(&m, 0, sizeof(m));
    fake_events = json_array();
    out = json_array();
    fake_runs = fake_cancels = dropped = 0;
    fake_tools_answers = tools_answers;
    mcp_core_init(&m, &cli, NULL, &sink, NULL);
}

static void test_held_past_the_bound(void **state)
{
    (void)state;
    core_start(true); /* the core's own listing (mcp_toolinfo.c): no tools */
    m.max_batches = 2;
    call(0);
    mcp_daemon_readable(&m); /* the listing: 0 was held until it came */
    call(1);
    call(2);
    call(3);
    assert_int_equal(fake_runs, 2); /* 2 and 3 held */
    assert_int_equal(m.nbatches, 2);
    /* 2's client goes away: dropped, never sent, no cancel */
    mcp_stream_gone(&m, &streams[2]);
    mcp_heartbeats(&m);
    assert_int_equal(fake_cancels, 0);
    assert_int_equal(dropped, 1);
    assert_int_equal(fake_runs, 2);
    /* 0 ends: 3 (the oldest held left) is sent */
    complete(0);
    assert_string_equal(answered(), "0");
    assert_int_equal(fake_runs, 3);
    assert_int_equal(m.nbatches, 2);
    complete(1);
    complete(3);
    assert_string_equal(answered(), "013");
    assert_int_equal(m.nbatches, 0);
    assert_null(m.calls);
    mcp_core_free(&m);
    json_decref(fake_events);
    json_decref(out);
}

static void test_listing_never_comes(void **state)
{
    (void)state;
    core_start(false); /* the listing is asked, never answered */
    m.tools_wait_ms = 5000;
    call(0);
    call(1);
    assert_int_equal(fake_runs, 0);
    /* the wait is what is due next */
    int due = mcp_heartbeats(&m);
    assert_true(due > 0 && due <= 5000);
    assert_string_equal(answered(), "");
    /* 0 has waited its time (its start moved back; 1 has not) */
    for (struct mcp_call *c = m.calls; c; c = c->next)
        if (json_integer_value(c->req.id) == 0)
            c->started_ms -= 5000;
    mcp_heartbeats(&m);
    assert_string_equal(answered(), "0");
    json_t *err = json_object_get(json_array_get(out, 0), "error");
    assert_int_equal(json_integer_value(json_object_get(err, "code")), -32603);
    assert_non_null(strstr(json_string_value(json_object_get(err, "message")),
                           "did not answer the request for its tool listing within 5 s"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(err, "data"), "reason")),
                        "daemon_tools_listing_timeout");
    for (struct mcp_call *c = m.calls; c; c = c->next)
        c->started_ms -= 5000;
    assert_int_equal(mcp_heartbeats(&m), -1); /* none held: nothing due */
    assert_string_equal(answered(), "01");
    assert_null(m.calls);
    assert_int_equal(fake_runs, 0); /* neither ran */
    /* the listing comes at last: nothing is held for it, and the next
     * call runs at once */
    json_array_append_new(fake_events, json_pack("{s:s,s:[]}", "event", "tools", "tools"));
    mcp_daemon_readable(&m);
    call(2);
    assert_int_equal(fake_runs, 1);
    mcp_core_free(&m);
    json_decref(fake_events);
    json_decref(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_held_past_the_bound),
                                       cmocka_unit_test(test_listing_never_comes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
