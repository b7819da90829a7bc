/* Unit tests of on_tool_error routing (policy.c), with policies parsed from
 * real "run" requests and results built as the daemon builds them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy.h"

/* The route of result under the on_tool_error of a run request. */
static enum td_route route(const char *on_tool_error, bool cancelled, json_t *result,
                           json_t **with_copy)
{
    char text[512], err[256];
    snprintf(text, sizeof(text),
             "{\"op\":\"run\",\"calls\":[{\"id\":\"c1\",\"name\":\"t\",\"arguments\":{}}],"
             "\"on_tool_error\":%s}",
             on_tool_error);
    json_t *req = json_loads(text, 0, NULL);
    assert_non_null(req);
    te_run_request r;
    if (te_run_request_parse(req, &r, err, sizeof(err)) < 0)
        fail_msg("%s: %s", on_tool_error, err);
    const json_t *with = NULL;
    enum td_route rt = td_policy_route(r.policy, r.policy_map, cancelled, result, &with);
    if (with_copy)
        *with_copy = with ? json_deep_copy(with) : NULL;
    else
        assert_null(with);
    json_decref(req);
    json_decref(result);
    return rt;
}

static json_t *ok(void)
{
    return json_pack("{s:s}", "ok", "fine");
}

static json_t *handler_error(void)
{
    return json_pack("{s:s}", "error", "bad input");
}

static json_t *tool_error(te_reason reason)
{
    return te_tool_error_new(reason, "t", "c1", "detail", NULL, NULL);
}

static void test_ok_always_continues(void **state)
{
    const char *policies[] = {"null", "\"continue\"", "\"halt\"", "\"ask\"",
                              "{\"default\":\"halt\"}"};
    for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
        assert_int_equal(route(policies[i], false, ok(), NULL), TD_ROUTE_CONTINUE);
        assert_int_equal(
            route(policies[i], false, json_pack("{s:s,s:n}", "halt", "done", "result"), NULL),
            TD_ROUTE_CONTINUE); /* a halt of the tool's own is not an error */
    }
}

static void test_simple_policies(void **state)
{
    assert_int_equal(route("null", false, handler_error(), NULL), TD_ROUTE_CONTINUE);
    assert_int_equal(route("\"continue\"", false, tool_error(TE_TIMEOUT), NULL), TD_ROUTE_CONTINUE);
    assert_int_equal(route("\"halt\"", false, handler_error(), NULL), TD_ROUTE_HALT);
    assert_int_equal(route("\"halt\"", false, tool_error(TE_HANDLER_EXIT), NULL), TD_ROUTE_HALT);
    assert_int_equal(route("\"ask\"", false, tool_error(TE_TIMEOUT), NULL), TD_ROUTE_ASK);
    assert_int_equal(route("\"ask\"", false, handler_error(), NULL), TD_ROUTE_ASK);
}

/* A cancelled batch has no one to ask: the error is the call's content. */
static void test_ask_cancelled(void **state)
{
    assert_int_equal(route("\"ask\"", true, tool_error(TE_TIMEOUT), NULL), TD_ROUTE_CONTINUE);
    /* cancelling changes nothing for the others */
    assert_int_equal(route("\"halt\"", true, tool_error(TE_TIMEOUT), NULL), TD_ROUTE_HALT);
}

static void test_map_by_reason(void **state)
{
    const char *map = "{\"timeout\":\"halt\",\"handler_error\":{\"continue_with\":[1,2]},"
                      "\"not_found\":\"continue\",\"default\":\"halt\"}";
    json_t *with = NULL;
    assert_int_equal(route(map, false, tool_error(TE_TIMEOUT), NULL), TD_ROUTE_HALT);
    assert_int_equal(route(map, false, tool_error(TE_NOT_FOUND), NULL), TD_ROUTE_CONTINUE);
    /* "handler_error" is the key of {"error": ...} */
    assert_int_equal(route(map, false, handler_error(), &with), TD_ROUTE_REPLACE);
    json_t *want = json_pack("[i,i]", 1, 2);
    assert_true(json_equal(with, want));
    json_decref(want);
    json_decref(with);
    /* no key for the reason: the default */
    assert_int_equal(route(map, false, tool_error(TE_INVALID_RETURN), NULL), TD_ROUTE_HALT);
}

static void test_map_without_default(void **state)
{
    const char *map = "{\"timeout\":\"halt\"}";
    assert_int_equal(route(map, false, tool_error(TE_TIMEOUT), NULL), TD_ROUTE_HALT);
    assert_int_equal(route(map, false, tool_error(TE_HANDLER_EXIT), NULL), TD_ROUTE_CONTINUE);
    assert_int_equal(route(map, false, handler_error(), NULL), TD_ROUTE_CONTINUE);
    /* a cancelled batch still follows its map */
    assert_int_equal(route(map, true, tool_error(TE_TIMEOUT), NULL), TD_ROUTE_HALT);
}

/* A client's decision (on_tool_error "ask"). */
static void test_decision(void **state)
{
    const json_t *with = NULL;
    json_t *d = json_string("continue");
    assert_int_equal(td_policy_decision(d, &with), TD_ROUTE_CONTINUE);
    assert_null(with);
    json_decref(d);
    d = json_string("halt");
    assert_int_equal(td_policy_decision(d, &with), TD_ROUTE_HALT);
    json_decref(d);
    d = json_pack("{s:s}", "continue_with", "instead");
    assert_int_equal(td_policy_decision(d, &with), TD_ROUTE_REPLACE);
    assert_ptr_equal(with, json_object_get(d, "continue_with"));
    json_decref(d);
    /* anything else halts */
    with = NULL;
    d = json_pack("{s:s,s:i}", "continue_with", "x", "extra", 1);
    assert_int_equal(td_policy_decision(d, &with), TD_ROUTE_HALT);
    assert_null(with);
    json_decref(d);
    d = json_string("maybe");
    assert_int_equal(td_policy_decision(d, &with), TD_ROUTE_HALT);
    json_decref(d);
    assert_int_equal(td_policy_decision(NULL, &with), TD_ROUTE_HALT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ok_always_continues), cmocka_unit_test(test_simple_policies),
        cmocka_unit_test(test_ask_cancelled),       cmocka_unit_test(test_map_by_reason),
        cmocka_unit_test(test_map_without_default), cmocka_unit_test(test_decision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
