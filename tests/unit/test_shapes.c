/* Unit tests of the LLM API shapes (lib/shapes.c): format names, which API a
 * call comes from and where its fields are, result messages and tool
 * declarations, each compared with the API's own shape. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "toolexec.h"

static void check_json(json_t *got, const char *want)
{
    json_error_t jerr;
    json_t *w = json_loads(want, 0, &jerr);
    CHECK(w != NULL);
    if (!got || !json_equal(got, w)) {
        char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        fprintf(stderr, "got %s, want %s\n", g ? g : "NULL", want);
        free(g);
        check_failures++;
    }
    json_decref(w);
    json_decref(got);
}

static void names(void)
{
    static const char *const n[] = {"openai", "openai_responses", "anthropic"};
    for (int f = 0; f < 3; f++) {
        CHECK_STR(te_format_name((te_result_format)f), n[f]);
        CHECK(te_format_parse(n[f]) == f);
    }
    CHECK(te_format_name((te_result_format)3) == NULL);
    CHECK(te_format_parse("mcp") == -EINVAL);
    CHECK(te_format_parse(NULL) == -EINVAL);
    CHECK(te_format_parse("OpenAI") == -EINVAL);
    CHECK(te_tool_format_valid("mcp") && te_tool_format_valid("anthropic"));
    CHECK(!te_tool_format_valid("gemini"));
}

static void calls(void)
{
    static const struct {
        const char *call;
        int shape;
        const char *id_key;
    } cases[] = {
        {"{\"type\":\"function\",\"id\":\"c1\",\"function\":{\"name\":\"t\",\"arguments\":\"{}\"}}",
         TE_FORMAT_OPENAI, "id"},
        {"{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"t\",\"arguments\":\"{}\"}",
         TE_FORMAT_OPENAI_RESPONSES, "call_id"},
        {"{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"t\",\"input\":\"{}\"}",
         TE_FORMAT_ANTHROPIC, "id"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        json_t *c = json_loads(cases[k].call, 0, NULL);
        CHECK(te_call_shape(c) == cases[k].shape);
        CHECK_STR(te_call_id_key((te_result_format)cases[k].shape), cases[k].id_key);
        json_t *id, *name, *args;
        te_call_fields(c, (te_result_format)cases[k].shape, &id, &name, &args);
        CHECK_STR(json_string_value(id), "c1");
        CHECK_STR(json_string_value(name), "t");
        CHECK_STR(json_string_value(args), "{}");
        json_decref(c);
    }
    json_t *native = json_pack("{s:s,s:s}", "id", "c1", "name", "t");
    CHECK(te_call_shape(native) == -EINVAL);
    json_decref(native);
    json_t *gemini = json_pack("{s:s}", "type", "functionCall");
    CHECK(te_call_shape(gemini) == -EINVAL);
    json_decref(gemini);
}

static void results(void)
{
    json_t *content = json_string("42");
    check_json(te_result_message(TE_FORMAT_OPENAI, "c1", content, true),
               "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}");
    check_json(te_result_message(TE_FORMAT_OPENAI_RESPONSES, "c1", content, true),
               "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"42\"}");
    check_json(te_result_message(TE_FORMAT_ANTHROPIC, "c1", content, true),
               "{\"type\":\"tool_result\",\"tool_use_id\":\"c1\",\"content\":\"42\","
               "\"is_error\":true}");
    check_json(te_result_message(TE_FORMAT_ANTHROPIC, "c1", content, false),
               "{\"type\":\"tool_result\",\"tool_use_id\":\"c1\",\"content\":\"42\","
               "\"is_error\":false}");
    CHECK(content->refcount == 1); /* borrowed, not stolen */
    json_decref(content);
}

static void declarations(void)
{
    json_t *schema = json_pack("{s:s}", "type", "object");
    check_json(te_tool_declaration("openai", "t", "d", schema),
               "{\"type\":\"function\",\"function\":{\"name\":\"t\",\"description\":\"d\","
               "\"parameters\":{\"type\":\"object\"}}}");
    check_json(te_tool_declaration("openai_responses", "t", "d", schema),
               "{\"type\":\"function\",\"name\":\"t\",\"description\":\"d\","
               "\"parameters\":{\"type\":\"object\"},\"strict\":false}");
    check_json(te_tool_declaration("anthropic", "t", "d", schema),
               "{\"name\":\"t\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}}");
    check_json(te_tool_declaration("mcp", "t", "d", schema),
               "{\"name\":\"t\",\"description\":\"d\",\"inputSchema\":{\"type\":\"object\"}}");
    CHECK(te_tool_declaration("gemini", "t", "d", schema) == NULL);
    CHECK(schema->refcount == 1);
    json_decref(schema);
}

int main(void)
{
    names();
    calls();
    results();
    declarations();
    CHECK_DONE();
}
