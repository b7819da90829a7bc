/*
 * input.c - what `toolexec run` accepts, turned into one run request:
 *
 *   - a run request: {"op": "run", "calls": [...], ...} ("op" may be left out);
 *   - a bare calls array: [{"id", "name", "arguments"}, ...];
 *   - tool calls as LLM APIs emit them, in an array or in the message that
 *     carries them, so a model's reply can be piped in unchanged:
 *       OpenAI chat       {"id", "type": "function", "function": {"name", "arguments": "JSON"}}
 *                         (or the assistant message: {"role", "tool_calls": [...]})
 *       OpenAI responses  {"type": "function_call", "call_id", "name", "arguments": "JSON"}
 *                         (or the response: {"output": [...]})
 *       Anthropic         {"type": "tool_use", "id", "name", "input"}
 *                         (or the message: {"role", "content": [...]})
 *       Gemini            {"functionCall": {"id"?, "name", "args"}}
 *     Items of those arrays that are not tool calls (text, thinking,
 *     reasoning, messages) are skipped.
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

/* OpenAI sends arguments as a string of JSON; the daemon wants an object. */
static json_t *decode_arguments(json_t *args, size_t i, const char *where, char *err,
                                size_t errlen)
{
    if (!json_is_string(args))
        return json_incref(args); /* an object, null or absent: as given */
    json_error_t jerr;
    json_t *v = json_loads(json_string_value(args), JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!v)
        snprintf(err, errlen, "calls[%zu].%s: not valid JSON (column %d): %s", i, where,
                 jerr.column, jerr.text);
    return v;
}

static json_t *make_call(json_t *id, json_t *name, json_t *args)
{
    json_t *call = json_object();
    json_object_set(call, "id", id ? id : json_null());
    json_object_set(call, "name", name ? name : json_null());
    if (args)
        json_object_set(call, "arguments", args);
    return call;
}

/* One array item as a toolexecd call (new reference), NULL on error. */
static json_t *call_from_item(json_t *item, size_t i, char *err, size_t errlen)
{
    const char *type = json_string_value(json_object_get(item, "type"));
    json_t *fn = json_object_get(item, "function");
    json_t *gem = json_object_get(item, "functionCall");
    json_t *args = NULL, *call;

    if (json_is_object(fn)) { /* OpenAI chat completions */
        args = decode_arguments(json_object_get(fn, "arguments"), i, "function.arguments", err,
                                errlen);
        if (!args && json_object_get(fn, "arguments"))
            return NULL;
        call = make_call(json_object_get(item, "id"), json_object_get(fn, "name"), args);
    } else if (type && strcmp(type, "function_call") == 0) { /* OpenAI responses */
        args = decode_arguments(json_object_get(item, "arguments"), i, "arguments", err, errlen);
        if (!args && json_object_get(item, "arguments"))
            return NULL;
        json_t *id = json_object_get(item, "call_id");
        call = make_call(id ? id : json_object_get(item, "id"), json_object_get(item, "name"),
                         args);
    } else if (type && strcmp(type, "tool_use") == 0) { /* Anthropic */
        call = make_call(json_object_get(item, "id"), json_object_get(item, "name"),
                         json_object_get(item, "input"));
    } else if (json_is_object(gem)) { /* Gemini: ids are optional there */
        json_t *id = json_object_get(gem, "id");
        json_t *gen = id ? NULL : json_sprintf("call-%zu", i);
        call = make_call(id ? id : gen, json_object_get(gem, "name"),
                         json_object_get(gem, "args"));
        json_decref(gen);
    } else {
        return json_incref(item); /* toolexecd's own shape, or for it to refuse */
    }
    json_decref(args);
    return call;
}

static json_t *calls_from_array(json_t *arr, char *err, size_t errlen)
{
    json_t *calls = json_array();
    size_t i;
    json_t *item;
    json_array_foreach(arr, i, item)
    {
        if (is_non_call_block(item))
            continue;
        json_t *call = call_from_item(item, json_array_size(calls), err, errlen);
        if (!call) {
            json_decref(calls);
            return NULL;
        }
        json_array_append_new(calls, call);
    }
    return calls;
}

static json_t *request_with_calls(json_t *arr, char *err, size_t errlen)
{
    json_t *calls = calls_from_array(arr, err, errlen);
    return calls ? json_pack("{s:s,s:o}", "op", "run", "calls", calls) : NULL;
}

json_t *te_input_to_request(json_t *in, char *err, size_t errlen)
{
    if (json_is_array(in))
        return request_with_calls(in, err, errlen);
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
        return request_with_calls(arr, err, errlen);
    snprintf(err, errlen, "expected a run request (an object with \"calls\"), an array of calls, "
                          "or tool calls as an LLM API emits them");
    return NULL;
}

json_t *te_input_load(const char *path, char *err, size_t errlen)
{
    bool std = !path || strcmp(path, "-") == 0;
    const char *name = std ? "standard input" : path;
    json_error_t jerr;
    json_t *in;
    if (std) {
        in = json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr);
    } else {
        FILE *f = fopen(path, "r");
        if (!f) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return NULL;
        }
        in = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
        fclose(f);
    }
    if (!in) {
        snprintf(err, errlen, "%s: not valid JSON (line %d, column %d): %s", name, jerr.line,
                 jerr.column, jerr.text);
        return NULL;
    }
    char why[512];
    json_t *req = te_input_to_request(in, why, sizeof(why));
    json_decref(in);
    if (!req)
        snprintf(err, errlen, "%s: %s", name, why);
    return req;
}
