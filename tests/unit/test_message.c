/* Unit tests of protocol messages: worker-response validation (the five
 * shapes and everything else), tool errors, content encoding, run-request
 * validation, tool names and the reserved halt reasons. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "toolexec.h"

static int parse(const char *text, char **normalised, char *why, size_t whylen)
{
    json_t *out = NULL;
    int rc = te_response_parse(text, strlen(text), &out, why, whylen);
    *normalised = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    return rc;
}

static void responses(void)
{
    static const struct {
        const char *in;
        int kind;
        const char *normalised; /* or the start of the error message */
    } cases[] = {
        {"{\"ok\":{\"x\":1}}", TE_RESULT_OK, "{\"ok\":{\"x\":1}}"},
        {"{\"ok\":null}", TE_RESULT_OK, "{\"ok\":null}"},
        {"{\"error\":\"boom\"}", TE_RESULT_ERROR, "{\"error\":\"boom\"}"},
        {"{\"error\":{\"code\":7}}", TE_RESULT_ERROR, "{\"error\":{\"code\":7}}"},
        {"{\"ask_user\":\"city?\"}", TE_RESULT_ASK_USER, "{\"ask_user\":\"city?\",\"opts\":{}}"},
        {"{\"ask_user\":\"q\",\"opts\":{\"a\":1}}", TE_RESULT_ASK_USER,
         "{\"ask_user\":\"q\",\"opts\":{\"a\":1}}"},
        {"{\"halt\":\"done\",\"result\":[1]}", TE_RESULT_HALT,
         "{\"halt\":\"done\",\"result\":[1]}"},
        {"{\"halt\":\"ask_user\",\"result\":1}", TE_RESULT_HALT, NULL}, /* caller's decision */
        {"{\"raised\":{\"type\":\"E\",\"message\":\"m\"}}", TE_RESULT_RAISED, NULL},
        {"not json", -EINVAL, "invalid JSON"},
        {"[1,2]", -EINVAL, "response is not a JSON object"},
        {"\"ok\"", -EINVAL, "response is not a JSON object"},
        {"{}", -EINVAL, "empty response object"},
        {"{\"okay\":1}", -EINVAL, "unknown key \"okay\""},
        {"{\"ok\":1,\"extra\":2}", -EINVAL, "unexpected key \"extra\""},
        {"{\"ask_user\":5}", -EINVAL, "\"ask_user\" question is not a string"},
        {"{\"ask_user\":\"q\",\"opts\":[]}", -EINVAL, "\"ask_user\" opts is not an object"},
        {"{\"halt\":7,\"result\":1}", -EINVAL, "\"halt\" reason is not a string"},
        /* a number past a double's range is kept as a marked string inside:
         * still no string */
        {"{\"ask_user\":5e1021}", -EINVAL, "\"ask_user\" question is not a string"},
        {"{\"halt\":5e1021,\"result\":1}", -EINVAL, "\"halt\" reason is not a string"},
        {"{\"halt\":\"x\"}", -EINVAL, "\"halt\" without \"result\""},
        {"{\"raised\":\"oops\"}", -EINVAL, "\"raised\" is not an object"},
        {"{\"ok\":1,\"ok\":2}", -EINVAL, "invalid JSON"}, /* duplicate keys */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[256] = "";
        char *norm = NULL;
        int rc = parse(cases[i].in, &norm, why, sizeof(why));
        if (rc != cases[i].kind)
            fprintf(stderr, "case %zu (%s): rc %d, why %s\n", i, cases[i].in, rc, why);
        CHECK(rc == cases[i].kind);
        if (rc >= 0 && cases[i].normalised)
            CHECK_STR(norm, cases[i].normalised);
        if (rc < 0)
            CHECK(strncmp(why, cases[i].normalised, strlen(cases[i].normalised)) == 0);
        free(norm);
    }
    /* deeply nested JSON is refused, not a stack overflow */
    size_t depth = 100000;
    char *deep = malloc(depth * 2 + 16);
    strcpy(deep, "{\"ok\":");
    size_t p = strlen(deep);
    memset(deep + p, '[', depth);
    memset(deep + p + depth, ']', depth);
    strcpy(deep + p + 2 * depth, "}");
    char why[256];
    char *norm = NULL;
    CHECK(parse(deep, &norm, why, sizeof(why)) == -EINVAL);
    free(norm);
    free(deep);
}

static char *encode(const char *result_json, size_t limit, int *rc)
{
    json_t *r = json_loads(result_json, 0, NULL);
    size_t len = 0;
    char *s = te_content_encode(r, limit, &len, rc);
    if (s)
        CHECK(len == strlen(s));
    json_decref(r);
    return s;
}

static void content(void)
{
    static const struct {
        const char *result, *content;
    } cases[] = {
        {"{\"ok\":\"plain text\"}", "plain text"},
        {"{\"ok\":{\"x\":1,\"y\":[true,null]}}", "{\"x\":1,\"y\":[true,null]}"},
        {"{\"ok\":42}", "42"},
        {"{\"ok\":null}", "null"},
        {"{\"ok\":\"\"}", ""},
        {"{\"error\":\"boom\"}", "{\"error\":\"boom\"}"},
        {"{\"error\":{\"code\":7}}", "{\"error\":\"{\\\"code\\\":7}\"}"},
        {"{\"ask_user\":\"q\",\"opts\":{}}", "<awaiting user response>"},
        {"{\"halt\":\"plan\",\"result\":\"the plan\"}", "the plan"},
        {"{\"halt\":\"plan\",\"result\":{\"a\":1}}", "{\"a\":1}"},
        {"{\"tool_error\":{\"reason\":\"timeout\",\"message\":\"tool error (t): timeout\"}}",
         "{\"error\":\"tool error (t): timeout\"}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc;
        char *s = encode(cases[i].result, 1 << 20, &rc);
        CHECK(rc == 0);
        CHECK_STR(s, cases[i].content);
        free(s);
    }
    int rc;
    char *at_limit = encode("{\"ok\":\"0123456789\"}", 10, &rc);
    CHECK(at_limit != NULL);
    free(at_limit);
    CHECK(encode("{\"ok\":\"0123456789x\"}", 10, &rc) == NULL && rc == -E2BIG);
    CHECK(encode("{\"ok\":[1,2,3,4,5,6]}", 5, &rc) == NULL && rc == -E2BIG);
    CHECK(encode("{\"nothing\":1}", 100, &rc) == NULL && rc == -EINVAL);
}

static void tool_errors(void)
{
    json_t *te = te_tool_error_new(TE_HANDLER_EXIT, "echo", "c0", "exited with status 3",
                                   json_pack("{s:i}", "exit_status", 3), NULL);
    json_t *inner = json_object_get(te, "tool_error");
    CHECK_STR(json_string_value(json_object_get(inner, "reason")), "handler_exit");
    CHECK_STR(json_string_value(json_object_get(inner, "message")),
              "tool error (echo): handler_exit: exited with status 3");
    CHECK_STR(json_string_value(json_object_get(inner, "tool_name")), "echo");
    CHECK_STR(json_string_value(json_object_get(inner, "tool_call_id")), "c0");
    CHECK(json_integer_value(json_object_get(json_object_get(inner, "cause"), "exit_status")) == 3);
    CHECK(json_is_object(json_object_get(inner, "metadata")));
    CHECK(te_result_kind_of(te) == TE_RESULT_TOOL_ERROR);
    json_decref(te);

    te = te_tool_error_new(TE_NOT_FOUND, "m", "c1", NULL, NULL, NULL);
    inner = json_object_get(te, "tool_error");
    CHECK_STR(json_string_value(json_object_get(inner, "message")), "tool error (m): not_found");
    CHECK(json_is_null(json_object_get(inner, "cause")));
    json_decref(te);

    for (int r = 0; r < TE_REASON_COUNT; r++)
        CHECK(te_reason_parse(te_reason_name(r)) == r);
    CHECK(te_reason_parse("crashed") == -EINVAL);
    CHECK_STR(te_reason_name(TE_ENCODING_FAILED), "encoding_failed");
}

static void names_and_halts(void)
{
    CHECK(te_tool_name_valid("echo"));
    CHECK(te_tool_name_valid("a.b-c_D9"));
    CHECK(!te_tool_name_valid(""));
    CHECK(!te_tool_name_valid("has space"));
    CHECK(!te_tool_name_valid("slash/x"));
    char long_name[66];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    CHECK(!te_tool_name_valid(long_name));
    long_name[64] = '\0';
    CHECK(te_tool_name_valid(long_name));
    const char *reserved[] = {"ask_user",   "max_turns", "halt_when",
                              "tool_error", "cancelled", "completed"};
    for (size_t i = 0; i < 6; i++)
        CHECK(te_halt_reason_reserved(reserved[i]));
    CHECK(!te_halt_reason_reserved("plan_submitted"));
    CHECK(!te_halt_reason_reserved("ask_user2"));
}

static int run_parse(const char *text, te_run_request *r, char *why, json_t **keep)
{
    json_t *req = json_loads(text, 0, NULL);
    CHECK(req != NULL);
    int rc = te_run_request_parse(req, r, why, 256);
    *keep = req;
    return rc;
}

/* As the daemon reads a request (te_json_loads: numbers past a double's
 * range kept as written, as marked strings), where a string is wanted a
 * number is refused, however large. */
static void run_requests_raw_numbers(void)
{
    static const struct {
        const char *req, *error;
    } cases[] = {
        {"{\"op\":\"run\",\"calls\":[{\"id\":6e1021,\"name\":\"t\"}]}",
         "calls[0].id: expected a string"},
        {"{\"op\":\"run\",\"calls\":[{\"id\":\"a\",\"name\":1e999}]}",
         "calls[0].name: expected a string"},
        {"{\"op\":\"run\",\"calls\":[],\"batch\":5e1021}", "batch:"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_error_t jerr;
        json_t *req = te_json_loads(cases[i].req, 0, &jerr);
        CHECK(req != NULL);
        te_run_request r;
        char why[256] = "";
        CHECK(req && te_run_request_parse(req, &r, why, sizeof(why)) == -EINVAL);
        if (strncmp(why, cases[i].error, strlen(cases[i].error)) != 0) {
            fprintf(stderr, "  %s: got \"%s\"\n", cases[i].req, why);
            CHECK(0);
        }
        json_decref(req);
    }
}

static void run_requests(void)
{
    static const struct {
        const char *req, *error; /* NULL: valid */
    } cases[] = {
        {"{\"op\":\"run\",\"calls\":[]}", NULL},
        {"{\"op\":\"run\",\"calls\":[{\"id\":\"a\",\"name\":\"t\"}],\"on_tool_error\":null}", NULL},
        {"{\"op\":\"run\"}", "calls: missing"},
        {"{\"op\":\"run\",\"calls\":{}}", "calls: expected an array"},
        {"{\"op\":\"run\",\"calls\":[1]}", "calls[0]: expected an object"},
        {"{\"op\":\"run\",\"calls\":[{\"name\":\"t\"}]}", "calls[0].id: expected a string"},
        {"{\"op\":\"run\",\"calls\":[{\"id\":1,\"name\":\"t\"}]}",
         "calls[0].id: expected a string"},
        {"{\"op\":\"run\",\"calls\":[{\"id\":\"a\"}]}", "calls[0].name: expected a string"},
        {"{\"op\":\"run\",\"calls\":[{\"id\":\"a\",\"name\":\"t\",\"arguments\":[1]}]}",
         "calls[0].arguments: expected an object or null"},
        {"{\"op\":\"run\",\"calls\":[{\"id\":\"a\",\"name\":\"t\"},{\"id\":\"a\",\"name\":\"u\"}]}",
         "calls[1].id: duplicate call id \"a\""},
        {"{\"op\":\"run\",\"calls\":[],\"on_tool_error\":\"explode\"}", "on_tool_error:"},
        {"{\"op\":\"run\",\"calls\":[],\"max_concurrency\":0}", "max_concurrency:"},
        {"{\"op\":\"run\",\"calls\":[],\"max_concurrency\":1.5}", "max_concurrency:"},
        {"{\"op\":\"run\",\"calls\":[],\"max_concurrency\":\"2\"}", "max_concurrency:"},
        {"{\"op\":\"run\",\"calls\":[],\"tool_timeout\":-1}", "tool_timeout:"},
        {"{\"op\":\"run\",\"calls\":[],\"batch\":7}", "batch:"},
        {"{\"op\":\"run\",\"calls\":[],\"colls\":[]}", "unknown key \"colls\""},
        {"{\"op\":\"run\",\"calls\":[],\"subject\":\"auth0|u-1@example.org\"}", NULL},
        {"{\"op\":\"run\",\"calls\":[],\"subject\":null}", NULL},
        {"{\"op\":\"run\",\"calls\":[],\"subject\":\"\"}", "subject: expected 1 to 255"},
        {"{\"op\":\"run\",\"calls\":[],\"subject\":\"a b\"}", "subject: expected"},
        {"{\"op\":\"run\",\"calls\":[],\"subject\":\"\\u00e9\"}", "subject: expected"},
        {"{\"op\":\"run\",\"calls\":[],\"subject\":7}", "subject: expected"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        te_run_request r;
        char why[256] = "";
        json_t *req;
        int rc = run_parse(cases[i].req, &r, why, &req);
        if (!cases[i].error) {
            CHECK(rc == 0);
        } else {
            CHECK(rc == -EINVAL);
            if (strncmp(why, cases[i].error, strlen(cases[i].error)) != 0)
                fprintf(stderr, "case %zu: got \"%s\", want \"%s...\"\n", i, why, cases[i].error);
            CHECK(strncmp(why, cases[i].error, strlen(cases[i].error)) == 0);
        }
        json_decref(req);
    }

    /* defaults and normalisation */
    te_run_request r;
    char why[256];
    json_t *req;
    CHECK(run_parse("{\"op\":\"run\",\"batch\":\"b\",\"calls\":[{\"id\":\"a\",\"name\":\"t\","
                    "\"arguments\":null},{\"id\":\"b\",\"name\":\"t\"}],"
                    "\"on_tool_error\":\"halt\",\"max_concurrency\":3,\"context\":{\"k\":1}}",
                    &r, why, &req) == 0);
    CHECK_STR(r.batch, "b");
    CHECK(r.ncalls == 2);
    CHECK(r.policy == TE_POLICY_HALT);
    CHECK(r.max_concurrency == 3);
    CHECK(r.tool_timeout_ms == TE_TOOL_TIMEOUT_DEFAULT_MS && !r.tool_timeout_given);
    CHECK(json_is_object(json_object_get(json_array_get(r.calls, 0), "arguments")));
    CHECK(json_is_object(json_object_get(json_array_get(r.calls, 1), "arguments")));
    CHECK(json_is_object(r.context));
    CHECK(json_is_null(r.session_id) && json_is_null(r.engine));
    json_decref(req);
    /* a subject at the bound is one, a byte more is refused */
    char big[TE_SUBJECT_MAX + 64];
    for (int extra = 0; extra <= 1; extra++) {
        int n = snprintf(big, sizeof(big), "{\"op\":\"run\",\"calls\":[],\"subject\":\"");
        memset(big + n, 'x', TE_SUBJECT_MAX + extra);
        snprintf(big + n + TE_SUBJECT_MAX + extra, sizeof(big) - (n + TE_SUBJECT_MAX + extra),
                 "\"}");
        CHECK(run_parse(big, &r, why, &req) == (extra ? -EINVAL : 0));
        CHECK(extra || (r.subject && strlen(r.subject) == TE_SUBJECT_MAX));
        json_decref(req);
    }
    CHECK(run_parse("{\"op\":\"run\",\"calls\":[]}", &r, why, &req) == 0 && !r.subject);
    json_decref(req);
    /* a tool_timeout the client set is told apart from the default */
    CHECK(run_parse("{\"op\":\"run\",\"calls\":[],\"tool_timeout\":30000}", &r, why, &req) == 0);
    CHECK(r.tool_timeout_ms == 30000 && r.tool_timeout_given);
    json_decref(req);
}

/* jansson quotes the bytes near a parse error as they came and may cut a
 * UTF-8 sequence in half ("invalid escape near '"\\\xc3'"): te_json_loadb's
 * error text is valid UTF-8, since it goes back into JSON. */
static void error_text_utf8(void)
{
    static const char bad[] = "{\"ok\":\"\\\xc3\xa9\"}";
    json_error_t jerr;
    CHECK(te_json_loadb(bad, sizeof(bad) - 1, 0, &jerr) == NULL);
    CHECK(strstr(jerr.text, "invalid escape near") != NULL);
    json_t *s = json_string(jerr.text);
    CHECK(s != NULL);
    json_decref(s);
}

/* An MCP server's worker's notice is exactly {"tools_changed": true}:
 * anything else is no notice (the daemon takes it as the response). */
static void tools_changed_frames(void)
{
    static const char *const yes[] = {"{\"tools_changed\":true}",
                                      " { \"tools_changed\" : true }\n"};
    static const char *const no[] = {
        "{\"tools_changed\":1}",
        "{\"tools_changed\":\"true\"}",
        "{\"tools_changed\":false}",
        "{\"tools_changed\":true,\"x\":1}",
        "{\"tools_changed\":true,\"tools_changed\":true}",
        "[\"tools_changed\"]",
        "{\"ok\":true}",
        "{\"tools_changed\":true",
        "",
        "{\"tools_changed\":true}                                                        "};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        CHECK(te_tools_changed_frame(yes[i], strlen(yes[i])));
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        CHECK(!te_tools_changed_frame(no[i], strlen(no[i])));
}

int main(void)
{
    tools_changed_frames();
    error_text_utf8();
    responses();
    content();
    tool_errors();
    names_and_halts();
    run_requests();
    run_requests_raw_numbers();
    CHECK_DONE();
}
