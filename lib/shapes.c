/*
 * shapes.c - the LLM APIs' message shapes, in one place: how OpenAI Chat
 * Completions, OpenAI Responses and Anthropic write a tool call and take a
 * tool result back, and how they (and MCP) declare a tool. A new API is a
 * new row here. No I/O.
 */
#include <errno.h>
#include <string.h>

#include "toolexec.h"

/* Indexed by te_result_format. */
static const struct {
    const char *name;      /* its result_format */
    const char *call_type; /* "type" of its tool call items */
    const char *id_key;    /* the call's id */
    const char *fn_key;    /* an object holding name and arguments, or NULL */
    const char *args_key;  /* the call's arguments */
} apis[] = {
    [TE_FORMAT_OPENAI] = {"openai", "function", "id", "function", "arguments"},
    [TE_FORMAT_OPENAI_RESPONSES] = {"openai_responses", "function_call", "call_id", NULL,
                                    "arguments"},
    [TE_FORMAT_ANTHROPIC] = {"anthropic", "tool_use", "id", NULL, "input"},
};
#define NAPIS (sizeof(apis) / sizeof(apis[0]))

const char *te_format_name(te_result_format f)
{
    return (size_t)f < NAPIS ? apis[f].name : NULL;
}

int te_format_parse(const char *name)
{
    for (size_t k = 0; name && k < NAPIS; k++)
        if (strcmp(name, apis[k].name) == 0)
            return (int)k;
    return -EINVAL;
}

int te_call_shape(const json_t *call)
{
    const char *type = json_string_value(json_object_get(call, "type"));
    for (size_t k = 0; type && k < NAPIS; k++)
        if (strcmp(type, apis[k].call_type) == 0)
            return (int)k;
    return -EINVAL;
}

void te_call_fields(const json_t *call, te_result_format shape, json_t **id, json_t **name,
                    json_t **args)
{
    const json_t *fn = apis[shape].fn_key ? json_object_get(call, apis[shape].fn_key) : call;
    *id = json_object_get(call, apis[shape].id_key);
    *name = json_object_get(fn, "name");
    *args = json_object_get(fn, apis[shape].args_key);
}

const char *te_call_id_key(te_result_format shape)
{
    return apis[shape].id_key;
}

json_t *te_result_message(te_result_format f, const char *call_id, json_t *content, bool is_error)
{
    switch (f) {
    case TE_FORMAT_OPENAI_RESPONSES:
        return json_pack("{s:s,s:s,s:O}", "type", "function_call_output", "call_id", call_id,
                         "output", content);
    case TE_FORMAT_ANTHROPIC:
        return json_pack("{s:s,s:s,s:O,s:b}", "type", "tool_result", "tool_use_id", call_id,
                         "content", content, "is_error", is_error);
    default:
        return json_pack("{s:s,s:s,s:O}", "role", "tool", "tool_call_id", call_id, "content",
                         content);
    }
}

json_t *te_tool_declaration(const char *format, const char *name, const char *description,
                            json_t *schema)
{
    if (strcmp(format, "openai") == 0)
        return json_pack("{s:s,s:{s:s,s:s,s:O}}", "type", "function", "function", "name", name,
                         "description", description, "parameters", schema);
    if (strcmp(format, "openai_responses") == 0)
        /* strict: required by the SDK's type; absent, the Responses API
         * forces strict mode on the schema */
        return json_pack("{s:s,s:s,s:s,s:O,s:b}", "type", "function", "name", name, "description",
                         description, "parameters", schema, "strict", 0);
    if (strcmp(format, "anthropic") == 0)
        return json_pack("{s:s,s:s,s:O}", "name", name, "description", description, "input_schema",
                         schema);
    if (strcmp(format, "mcp") == 0)
        return json_pack("{s:s,s:s,s:O}", "name", name, "description", description, "inputSchema",
                         schema);
    return NULL;
}

bool te_tool_format_valid(const char *format)
{
    return te_format_parse(format) >= 0 || strcmp(format, "mcp") == 0;
}
