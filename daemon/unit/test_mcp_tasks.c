/*
 * test_mcp_tasks - the MCP core's tasks (daemon/cli/mcp_tasks.c) driven as
 * a transport drives it (mcp_int.h), with subjects stdio cannot give: a
 * handle is bound to the subject whose call made it, and any other
 * subject's tasks/get, tasks/update or tasks/cancel finds nothing, exactly
 * as for a handle never issued. The daemon connection is
 * mcp_fake_daemon.h's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "mcp_fake_daemon.h"

static json_t *out; /* fake_out */
static struct mcp m;
static struct cli cli;

static int setup(void **state)
{
    *state = &m;
    memset(&m, 0, sizeof(m));
    m.task_after_ms = -1; /* every call of a client with the extension is a task */
    fake_core_start(&m, &cli);
    out = fake_out;
    return 0;
}

/* Feed a modern request from subject (NULL: none, as stdio); its answer. */
static json_t *ask(const char *subject, const char *method, json_t *params)
{
    static int n;
    json_object_set_new(params, "_meta",
                        json_pack("{s:s,s:{s:{s:{}}}}", MCP_META_VERSION, MCP_MODERN_VERSION,
                                  MCP_META_CAPS, "extensions", MCP_EXT_TASKS));
    json_array_clear(out);
    struct mcp_origin o = {.subject = subject};
    mcp_feed(&m,
             json_pack("{s:s,s:i,s:s,s:o}", "jsonrpc", "2.0", "id", ++n, "method", method, "params",
                       params),
             &o);
    if (strcmp(method, "tools/call") == 0)
        mcp_daemon_readable(&m); /* the tools listed: the call goes on (mcp_toolinfo.c) */
    assert_int_equal(json_array_size(out), 1);
    return json_incref(json_array_get(out, 0));
}

static char *start_task(const char *subject)
{
    json_t *r = ask(subject, "tools/call", json_pack("{s:s,s:{}}", "name", "t", "arguments"));
    const char *rt = json_string_value(json_object_get(json_object_get(r, "result"), "resultType"));
    assert_non_null(rt);
    assert_string_equal(rt, "task");
    const char *id = json_string_value(json_object_get(json_object_get(r, "result"), "taskId"));
    assert_non_null(id);
    assert_int_equal(strlen(id), 32); /* 128 bits, hex */
    char *copy = strdup(id);
    json_decref(r);
    return copy;
}

/* The status tasks/get reports to subject, or NULL when "no such task". */
static const char *status_for(const char *subject, const char *id)
{
    static char status[32];
    json_t *r = ask(subject, "tasks/get", json_pack("{s:s}", "taskId", id));
    json_t *err = json_object_get(r, "error");
    const char *s = json_string_value(json_object_get(json_object_get(r, "result"), "status"));
    if (err) {
        assert_int_equal(json_integer_value(json_object_get(err, "code")), RPC_INVALID_PARAMS);
        assert_string_equal(json_string_value(json_object_get(err, "message")),
                            "Invalid params: taskId: no such task");
        assert_null(json_object_get(err, "data"));
    }
    snprintf(status, sizeof(status), "%s", s ? s : "");
    json_decref(r);
    return err ? NULL : status;
}

static void test_another_subject_finds_nothing(void **state)
{
    (void)state;
    char *id = start_task("alice");
    assert_string_equal(status_for("alice", id), "working");
    assert_null(status_for("bob", id));
    assert_null(status_for(NULL, id));
    assert_null(status_for("alic", id));

    /* bob can neither cancel nor answer it: the same "no such task" */
    json_t *r = ask("bob", "tasks/cancel", json_pack("{s:s}", "taskId", id));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
                     RPC_INVALID_PARAMS);
    json_decref(r);
    r = ask("bob", "tasks/update", json_pack("{s:s,s:{}}", "taskId", id, "inputResponses"));
    assert_non_null(json_object_get(r, "error"));
    json_decref(r);
    assert_string_equal(status_for("alice", id), "working");

    /* the daemon finishes the call: alice sees the result, bob still nothing */
    json_array_append_new(fake_events,
                          json_pack("{s:s,s:s,s:{s:s}}", "event", "tool_execution_completed",
                                    "batch", last_batch, "result", "ok", "done"));
    json_array_append_new(fake_events,
                          json_pack("{s:s,s:s,s:[{s:s}]}", "event", "batch_completed", "batch",
                                    last_batch, "messages", "content", "done"));
    json_array_clear(out);
    mcp_daemon_readable(&m);
    assert_int_equal(json_array_size(out), 0); /* kept in the task, not sent */
    assert_string_equal(status_for("alice", id), "completed");
    assert_null(status_for("bob", id));
    free(id);
}

static void test_handles_differ_and_cancel_is_the_owners(void **state)
{
    (void)state;
    char *a = start_task("alice"), *b = start_task("bob");
    assert_string_not_equal(a, b);
    json_t *r = ask("bob", "tasks/cancel", json_pack("{s:s}", "taskId", b));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r, "result"), "resultType")), "complete");
    json_decref(r);
    assert_string_equal(status_for("bob", b), "cancelled");
    assert_string_equal(status_for("alice", a), "working");
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_another_subject_finds_nothing, setup, fake_core_end),
        cmocka_unit_test_setup_teardown(test_handles_differ_and_cancel_is_the_owners, setup,
                                        fake_core_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
