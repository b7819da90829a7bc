/*
 * input.c - what `toolexec run` accepts, turned into one run request:
 *
 *   - a run request: {"op": "run", "calls": [...], ...} ("op" may be left out);
 *   - a bare calls array: [{"id", "name", "arguments"}, ...];
 *   - tool calls as LLM APIs emit them, in an array or in the message that
 *     carries them, so a model's reply can be piped in unchanged:
 *       OpenAI chat       {"id", "type": "function", "function": {"name", "arguments"}}
 *                         (or the assistant message: {"role", "tool_calls": [...]})
 *       OpenAI responses  {"type": "function_call", "call_id", "name", "arguments"}
 *                         (or the response: {"output": [...]})
 *       Anthropic         {"type": "tool_use", "id", "name", "input"}
 *                         (or the message: {"role", "content": [...]})
 *       Gemini            {"functionCall": {"id"?, "name", "args"}}
 *     The daemon understands the first three itself; they pass through as
 *     they are, and the batch's messages come back in the same API's shape
 *     (result_format) unless the request says otherwise. Gemini calls are
 *     rewritten to the native shape. Items of those arrays that are not tool
 *     calls (text, thinking, reasoning, messages) are skipped.
 *
 * Anything else about the request (unknown keys, missing ids, ...) is left
 * to the daemon: its error event is what the user should see, in the same
 * words socat users get.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Array items that carry no call: skipped rather than refused. */
static bool is_non_call_block(const json_t *item)
{
    static const char *const skip[] = {"text", "thinking", "redacted_thinking", "reasoning",
                                       "message"};
    const char *type = json_string_value(json_object_get(item, "type"));
    for (size_t i = 0; type && i < sizeof(skip) / sizeof(skip[0]); i++)
        if (strcmp(type, skip[i]) == 0)
            return true;
    return false;
}

/* Gemini: ids are optional there, the daemon wants one. */
static json_t *call_from_gemini(const json_t *fc, size_t i)
{
    json_t *id = json_object_get(fc, "id");
    json_t *call = json_object();
    json_object_set_new(call, "id", id ? json_incref(id) : json_sprintf("call-%zu", i));
    json_t *name = json_object_get(fc, "name");
    json_object_set(call, "name", name ? name : json_null());
    json_t *args = json_object_get(fc, "args");
    if (args)
        json_object_set(call, "arguments", args);
    return call;
}

/* The result_format matching a call's API shape, or NULL for a native call. */
static const char *format_of(const json_t *call)
{
    int shape = te_call_shape(call);
    return shape < 0 ? NULL : te_format_name((te_result_format)shape);
}

void cli_call_identity(const json_t *call, const char **id, const char **name)
{
    const char *type = json_string_value(json_object_get(call, "type"));
    json_t *fn = json_object_get(call, "function");
    bool responses = type && strcmp(type, "function_call") == 0;
    *id = json_string_value(json_object_get(call, responses ? "call_id" : "id"));
    *name = json_string_value(json_object_get(json_is_object(fn) ? fn : call, "name"));
}

static json_t *calls_from_array(json_t *arr)
{
    json_t *calls = json_array();
    size_t i;
    json_t *item, *fc;
    json_array_foreach(arr, i, item)
    {
        if (is_non_call_block(item))
            continue;
        if (json_is_object(fc = json_object_get(item, "functionCall")))
            json_array_append_new(calls, call_from_gemini(fc, json_array_size(calls)));
        else
            json_array_append(calls, item); /* the daemon's business */
    }
    return calls;
}

/* A run request for LLM-shaped calls; their messages come back in the same
 * API's shape when all of them come from one API. */
static json_t *request_with_calls(json_t *arr)
{
    json_t *calls = calls_from_array(arr);
    json_t *req = json_pack("{s:s,s:o}", "op", "run", "calls", calls);
    const char *format = NULL;
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call)
    {
        const char *f = format_of(call);
        if (!f || (format && strcmp(f, format) != 0)) {
            format = NULL;
            break;
        }
        format = f;
    }
    if (req && format)
        json_object_set_new(req, "result_format", json_string(format));
    return req;
}

json_t *cli_input_to_request(json_t *in, char *err, size_t errlen)
{
    if (json_is_array(in))
        return request_with_calls(in);
    if (!json_is_object(in)) {
        snprintf(err, errlen, "expected a JSON object or array");
        return NULL;
    }
    json_t *op = json_object_get(in, "op");
    if (op || json_object_get(in, "calls")) {
        if (op && !(json_is_string(op) && strcmp(json_string_value(op), "run") == 0)) {
            snprintf(err, errlen, "op: expected \"run\" (this command only sends batches)");
            return NULL;
        }
        json_t *req = json_deep_copy(in);
        if (req && !op)
            json_object_set_new(req, "op", json_string("run"));
        return req;
    }
    /* A whole model message or response. */
    json_t *arr = json_object_get(in, "tool_calls");
    if (!json_is_array(arr))
        arr = json_object_get(in, "output");
    if (!json_is_array(arr) && json_object_get(in, "role"))
        arr = json_object_get(in, "content");
    if (json_is_array(arr))
        return request_with_calls(arr);
    snprintf(err, errlen,
             "expected a run request (an object with \"calls\"), an array of calls, "
             "or tool calls as an LLM API emits them");
    return NULL;
}

json_t *cli_input_load(const char *path, char *err, size_t errlen)
{
    bool std = !path || strcmp(path, "-") == 0;
    const char *name = std ? "standard input" : path;
    /* Any value, so that a string or a number gets the message saying what
     * is expected rather than a parser's complaint. */
    int flags = JSON_REJECT_DUPLICATES | JSON_DECODE_ANY;
    json_error_t jerr;
    json_t *in;
    if (std) {
        in = cli_json_loadf(stdin, flags, &jerr);
    } else {
        FILE *f = fopen(path, "r");
        if (!f) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return NULL;
        }
        in = cli_json_loadf(f, flags, &jerr);
        fclose(f);
    }
    if (!in) {
        snprintf(err, errlen, "%s: not valid JSON (line %d, column %d): %s", name, jerr.line,
                 jerr.column, jerr.text);
        return NULL;
    }
    char why[512];
    json_t *req = cli_input_to_request(in, why, sizeof(why));
    json_decref(in);
    if (!req)
        snprintf(err, errlen, "%s: %s", name, why);
    return req;
}
