/*
 * test_mcp_content - a tool's own MCP content (daemon/cli/mcp_content.c):
 * the block checker on every kind of block and on what a hostile tool may
 * return instead, and the core's result for a tool with and without
 * "mcp": {"content": "blocks"} (the daemon connection is
 * mcp_fake_daemon.h's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mcp_fake_daemon.h"

#define PNG                                                                                        \
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJg" \
    "gg=="

/* The checker's verdict on the JSON text v; why is its reason. */
static char why[512];
static int check(const char *v)
{
    json_error_t e;
    json_t *ok = json_loads(v, JSON_ALLOW_NUL, &e);
    assert_non_null(ok);
    why[0] = '\0';
    int rc = mcp_content_check(ok, why, sizeof(why));
    json_decref(ok);
    return rc;
}

static void refused(const char *v, const char *says)
{
    if (check(v) != -1)
        fail_msg("passed: %s", v);
    if (!strstr(why, says))
        fail_msg("for %s: expected a reason with \"%s\", got \"%s\"", v, says, why);
}

static void test_valid_blocks(void **state)
{
    (void)state;
    assert_int_equal(check("{\"content\": []}"), 0);
    assert_int_equal(check("{\"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}"), 0);
    assert_int_equal(
        check("{\"content\": [{\"type\": \"image\", \"data\": \"" PNG "\", \"mimeType\": "
              "\"image/png\", \"annotations\": {\"audience\": [\"user\"], \"priority\": 0.5, "
              "\"lastModified\": \"2025-01-12T15:00:58Z\"}}]}"),
        0);
    assert_int_equal(check("{\"content\": [{\"type\": \"audio\", \"data\": \"UklGRg==\", "
                           "\"mimeType\": \"audio/wav\", \"_meta\": {\"any\": [1, {}]}}]}"),
                     0);
    assert_int_equal(check("{\"content\": [{\"type\": \"resource_link\", \"uri\": "
                           "\"file:///srv/a.txt\", \"name\": \"a.txt\", \"title\": \"A\", "
                           "\"description\": \"d\", \"mimeType\": \"text/plain\", \"size\": 3}]}"),
                     0);
    assert_int_equal(
        check("{\"content\": [{\"type\": \"resource\", \"resource\": {\"uri\": "
              "\"test://r\", \"mimeType\": \"text/plain; charset=utf-8\", \"text\": "
              "\"x\"}}, {\"type\": \"resource\", \"resource\": {\"uri\": \"test://b\", "
              "\"mimeType\": \"application/octet-stream\", \"blob\": \"AAEC\"}}], "
              "\"structuredContent\": {\"n\": 1}}"),
        0);
}

static void test_refused_shapes(void **state)
{
    (void)state;
    refused("[1]", "not an object");
    refused("{}", "content: missing");
    refused("{\"content\": {\"type\": \"text\"}}", "content: expected an array");
    refused("{\"content\": [], \"note\": 1}", "the value.note: unknown key");
    refused("{\"content\": [], \"structuredContent\": [1]}",
            "structuredContent: expected an object");
    refused("{\"content\": [\"text\"]}", "content[0]: expected an object");
    refused("{\"content\": [{\"text\": \"x\"}]}", "content[0].type: expected");
    refused("{\"content\": [{\"type\": \"video\", \"data\": \"AA==\"}]}",
            "content[0].type: \"video\" is not");
    refused("{\"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": "
            "\"b\", \"extra\": {\"nested\": [[[{}]]]}}]}",
            "content[1].extra: unknown key");
    refused("{\"content\": [{\"type\": \"text\", \"text\": {\"nested\": [1, [2]]}}]}",
            "content[0].text: expected a string");
    refused("{\"content\": [{\"type\": \"text\", \"text\": \"a\\u0000b\"}]}", "NUL");
    /* a key cut mid-character in the reason: still valid UTF-8 */
    refused(
        "{\"content\": [{\"type\": \"text\", \"text\": \"a\", \"a\u00e9\u00e9\u00e9\u00e9\u00e9"
        "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
        "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\": "
        "1}]}",
        "unknown key");
    json_t *said = json_string(why);
    assert_non_null(said);
    json_decref(said);
    refused("{\"content\": [{\"type\": \"text\", \"text\": \"a\", \"_meta\": 1}]}",
            "content[0]._meta: expected an object");
}

static void test_refused_media(void **state)
{
    (void)state;
    refused("{\"content\": [{\"type\": \"image\", \"mimeType\": \"image/png\"}]}",
            "content[0].data: missing");
    refused("{\"content\": [{\"type\": \"image\", \"data\": \"" PNG "\"}]}",
            "content[0].mimeType: missing");
    refused("{\"content\": [{\"type\": \"image\", \"data\": \"" PNG "\", \"mimeType\": "
            "\"text/html\"}]}",
            "of image");
    refused("{\"content\": [{\"type\": \"audio\", \"data\": \"AAAA\", \"mimeType\": \"wav\"}]}",
            "content[0].mimeType: expected a media type");
    refused("{\"content\": [{\"type\": \"image\", \"data\": \"AAAA\", \"mimeType\": "
            "\"image/png\\n\"}]}",
            "mimeType");
    /* base64: a foreign character, white space, a short group, padding
     * mid-way, empty */
    const char *bad[] = {"AA*A", "AA A", "AAA", "QQ==QQ==", "", "AA\\nA", "=AAA"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char v[256];
        snprintf(v, sizeof(v),
                 "{\"content\": [{\"type\": \"image\", \"data\": \"%s\", \"mimeType\": "
                 "\"image/png\"}]}",
                 bad[i]);
        refused(v, "content[0].data: not base64");
    }
    refused("{\"content\": [{\"type\": \"image\", \"data\": \"AAAA\", \"mimeType\": \"image/png\", "
            "\"annotations\": {\"audience\": [\"robot\"]}}]}",
            "annotations.audience[0]");
    refused("{\"content\": [{\"type\": \"text\", \"text\": \"a\", \"annotations\": {\"priority\": "
            "2}}]}",
            "annotations.priority");
    refused("{\"content\": [{\"type\": \"text\", \"text\": \"a\", \"annotations\": {\"color\": "
            "1}}]}",
            "annotations.color: unknown key");
}

static void test_refused_resources(void **state)
{
    (void)state;
    refused("{\"content\": [{\"type\": \"resource\"}]}", "content[0].resource: missing");
    refused("{\"content\": [{\"type\": \"resource\", \"resource\": {\"uri\": \"a://b\", "
            "\"mimeType\": \"text/plain\", \"text\": \"x\", \"blob\": \"AAAA\"}}]}",
            "either \"text\" or \"blob\"");
    refused("{\"content\": [{\"type\": \"resource\", \"resource\": {\"uri\": \"a://b\", "
            "\"mimeType\": \"text/plain\"}}]}",
            "either \"text\" or \"blob\"");
    refused("{\"content\": [{\"type\": \"resource\", \"resource\": {\"uri\": \"a://b\", "
            "\"text\": \"x\"}}]}",
            "content[0].resource.mimeType: missing");
    refused("{\"content\": [{\"type\": \"resource\", \"resource\": {\"uri\": \"a://b\", "
            "\"mimeType\": \"text/plain\", \"blob\": \"A===\"}}]}",
            "content[0].resource.blob: not base64");
    refused("{\"content\": [{\"type\": \"resource\", \"resource\": {\"uri\": \"no scheme\", "
            "\"mimeType\": \"text/plain\", \"text\": \"x\"}}]}",
            "content[0].resource.uri: expected an absolute URI");
    refused("{\"content\": [{\"type\": \"resource\", \"resource\": {\"uri\": \"a://b\", "
            "\"mimeType\": \"text/plain\", \"text\": \"x\", \"name\": \"n\"}}]}",
            "content[0].resource.name: unknown key");
    refused("{\"content\": [{\"type\": \"resource_link\", \"uri\": \"a://b\"}]}",
            "content[0].name: missing");
    refused("{\"content\": [{\"type\": \"resource_link\", \"uri\": \"a://b\", \"name\": \"n\", "
            "\"size\": -1}]}",
            "content[0].size");
}

static void test_bounds(void **state)
{
    (void)state;
    /* one block over the count */
    json_t *content = json_array();
    for (unsigned i = 0; i <= MCP_CONTENT_MAX_BLOCKS; i++)
        json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", "x"));
    json_t *ok = json_pack("{s:o}", "content", content);
    assert_int_equal(mcp_content_check(ok, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "blocks, over the"));
    json_array_remove(content, 0);
    assert_int_equal(mcp_content_check(ok, why, sizeof(why)), 0);
    json_decref(ok);

    /* huge base64: refused by its size, before anything is decoded */
    size_t n = MCP_CONTENT_MAX_BYTES;
    char *data = malloc(n + 1);
    assert_non_null(data);
    memset(data, 'A', n);
    data[n] = '\0';
    ok = json_pack("{s:[{s:s,s:s,s:s}]}", "content", "type", "image", "data", data, "mimeType",
                   "image/png");
    free(data);
    assert_int_equal(mcp_content_check(ok, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "bytes of JSON, over the"));
    json_decref(ok);
}

/* ------------------------------------------------------------------------ */
/* Through the core: the listing says which tools are blocks */

static json_t *out; /* fake_out */
static struct mcp m;
static struct cli cli;

static int setup(void **state)
{
    *state = &m;
    memset(&m, 0, sizeof(m));
    fake_core_start(&m, &cli);
    fake_tools = json_pack("[{s:s,s:{s:s}},{s:s},{s:s,s:{s:s}}]", "name", "blocks", "_meta",
                           "toolexecd/content", "blocks", "name", "plain", "name", "job", "_meta",
                           "toolexecd/taskSupport", "required");
    out = fake_out;
    return 0;
}

/* tools/call of name (a 2025 request), the daemon answering with the
 * listing (asked at the first call), then ok; the result. */
static json_t *call(const char *name, json_t *ok, const char *content)
{
    static int id;
    json_array_clear(out);
    mcp_feed(&m,
             json_pack("{s:s,s:i,s:s,s:{s:s,s:{}}}", "jsonrpc", "2.0", "id", ++id, "method",
                       "tools/call", "params", "name", name, "arguments"),
             NULL);
    if (id == 1) {
        assert_int_equal(json_array_size(out), 0); /* held until the tools are known */
        mcp_daemon_readable(&m);
    }
    json_array_append_new(fake_events,
                          json_pack("{s:s,s:s,s:s,s:{s:o}}", "event", "tool_execution_completed",
                                    "batch", last_batch, "name", name, "result", "ok", ok));
    json_array_append_new(fake_events,
                          json_pack("{s:s,s:s,s:[{s:s}]}", "event", "batch_completed", "batch",
                                    last_batch, "messages", "content", content));
    mcp_daemon_readable(&m);
    assert_int_equal(json_array_size(out), 1);
    return json_incref(json_object_get(json_array_get(out, 0), "result"));
}

static void test_core_results(void **state)
{
    (void)state;
    json_t *blocks = json_pack("{s:[{s:s,s:s,s:s}],s:{s:i}}", "content", "type", "image", "data",
                               PNG, "mimeType", "image/png", "structuredContent", "n", 1);
    /* the tool with the key: its blocks as the content */
    json_t *r = call("blocks", json_incref(blocks), "(the value as text)");
    assert_true(json_equal(json_object_get(r, "content"), json_object_get(blocks, "content")));
    assert_true(json_equal(json_object_get(r, "structuredContent"),
                           json_object_get(blocks, "structuredContent")));
    assert_true(json_is_false(json_object_get(r, "isError")));
    json_decref(r);

    /* without it: the value's text, and the object as structuredContent */
    r = call("plain", json_incref(blocks), "(the value as text)");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(r, "content"), 0), "text")),
                        "(the value as text)");
    assert_true(json_equal(json_object_get(r, "structuredContent"), blocks));
    json_decref(r);

    /* a broken shape: isError, saying what is wrong, never the blocks */
    r = call("blocks",
             json_pack("{s:[{s:s,s:s,s:s}]}", "content", "type", "image", "data",
                       "A*==", "mimeType", "image/png"),
             "x");
    assert_true(json_is_true(json_object_get(r, "isError")));
    const char *text = json_string_value(
        json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    assert_non_null(text);
    assert_non_null(strstr(text, "content[0].data: not base64"));
    assert_int_equal(json_array_size(json_object_get(r, "content")), 1);
    assert_null(json_object_get(r, "structuredContent"));
    json_decref(r);
    json_decref(blocks);
}

/* A modern request (tasks: the client declared the extension); every
 * message it got. */
static json_t *modern(const char *method, json_t *params, bool tasks)
{
    static int id = 100;
    json_object_set_new(params, "_meta",
                        json_pack("{s:s,s:{s:{s:{}}}}", MCP_META_VERSION, MCP_MODERN_VERSION,
                                  MCP_META_CAPS, "extensions", tasks ? MCP_EXT_TASKS : "other"));
    json_array_clear(out);
    mcp_feed(&m,
             json_pack("{s:s,s:i,s:s,s:o}", "jsonrpc", "2.0", "id", ++id, "method", method,
                       "params", params),
             NULL);
    if (te_client_pending(NULL))
        mcp_daemon_readable(&m); /* the listing, the first time */
    return json_incref(out);
}

/* "mcp": {"task_support": "required"}: a client without the tasks
 * extension is refused before anything runs; one with it gets a task at
 * once (not after --task-after); the list says so as execution. */
static void test_task_support(void **state)
{
    (void)state;
    last_batch[0] = '\0';
    json_t *o = modern("tools/call", json_pack("{s:s,s:{}}", "name", "job", "arguments"), false);
    assert_int_equal(json_array_size(o), 1);
    json_t *err = json_object_get(json_array_get(o, 0), "error");
    assert_int_equal(json_integer_value(json_object_get(err, "code")), -32021);
    assert_non_null(json_object_get(
        json_object_get(json_object_get(json_object_get(err, "data"), "requiredCapabilities"),
                        "extensions"),
        MCP_EXT_TASKS));
    assert_string_equal(last_batch, ""); /* never ran */
    json_decref(o);

    o = modern("tools/call", json_pack("{s:s,s:{}}", "name", "job", "arguments"), true);
    assert_int_equal(json_array_size(o), 1);
    json_t *r = json_object_get(json_array_get(o, 0), "result");
    assert_string_equal(json_string_value(json_object_get(r, "resultType")), "task");
    assert_string_not_equal(last_batch, "");
    json_decref(o);

    /* a tool without it stays a call (the default --task-after is not 0) */
    o = modern("tools/call", json_pack("{s:s,s:{}}", "name", "plain", "arguments"), true);
    assert_int_equal(json_array_size(o), 0);
    json_decref(o);

    o = modern("tools/list", json_object(), false);
    json_t *tools = json_object_get(json_object_get(json_array_get(o, 0), "result"), "tools");
    assert_int_equal(json_array_size(tools), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(tools, 2), "execution"), "taskSupport")),
                        "required");
    assert_null(json_object_get(json_array_get(tools, 1), "execution"));
    json_decref(o);
}

/* A call cancelled while it waits for the listing never runs, and gets no
 * response. */
static void test_held_call_cancelled(void **state)
{
    (void)state;
    last_batch[0] = '\0';
    json_array_clear(out);
    mcp_feed(&m,
             json_pack("{s:s,s:i,s:s,s:{s:s,s:{}}}", "jsonrpc", "2.0", "id", 7, "method",
                       "tools/call", "params", "name", "plain", "arguments"),
             NULL);
    mcp_feed(&m,
             json_pack("{s:s,s:s,s:{s:i}}", "jsonrpc", "2.0", "method", "notifications/cancelled",
                       "params", "requestId", 7),
             NULL);
    assert_false(mcp_idle(&m));
    mcp_daemon_readable(&m);
    assert_string_equal(last_batch, "");
    assert_int_equal(json_array_size(out), 0);
    assert_true(mcp_idle(&m));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_blocks),
        cmocka_unit_test(test_refused_shapes),
        cmocka_unit_test(test_refused_media),
        cmocka_unit_test(test_refused_resources),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test_setup_teardown(test_core_results, setup, fake_core_end),
        cmocka_unit_test_setup_teardown(test_task_support, setup, fake_core_end),
        cmocka_unit_test_setup_teardown(test_held_call_cancelled, setup, fake_core_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
