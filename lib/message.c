/*
 * message.c - protocol messages: the closed set of tool-error reasons, the
 * validation of worker responses, tool-error objects, content encoding and
 * the validation of "run" requests. Pure functions over jansson values; no
 * I/O, so everything here is unit-tested directly.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolexec.h"

static const char *const reason_names[TE_REASON_COUNT] = {
    [TE_HANDLER_RAISED] = "handler_raised",
    [TE_HANDLER_EXIT] = "handler_exit",
    [TE_TIMEOUT] = "timeout",
    [TE_INVALID_RETURN] = "invalid_return",
    [TE_NOT_FOUND] = "not_found",
    [TE_ENCODING_FAILED] = "encoding_failed",
};

const char *te_reason_name(te_reason r)
{
    return (unsigned)r < TE_REASON_COUNT ? reason_names[r] : "unknown";
}

int te_reason_parse(const char *name)
{
    for (int i = 0; i < TE_REASON_COUNT; i++)
        if (name && strcmp(name, reason_names[i]) == 0)
            return i;
    return -EINVAL;
}

bool te_halt_reason_reserved(const char *reason)
{
    static const char *const reserved[] = {"ask_user",   "max_turns", "halt_when",
                                           "tool_error", "cancelled", "completed"};
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (strcmp(reason, reserved[i]) == 0)
            return true;
    return false;
}

bool te_tool_name_valid(const char *name)
{
    size_t n = 0;
    for (const char *p = name; *p; p++, n++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return n >= 1 && n <= TE_TOOL_NAME_MAX;
}

/* Messages quote what they reject; they must stay valid UTF-8 (they go out
 * in JSON) even when the quoted text was not, or was cut mid-character. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        te_utf8_repair(err);
    }
    return -EINVAL;
}

/* The key of obj other than the allowed ones, if any. */
static const char *extra_key(const json_t *obj, const char *const *allowed, size_t nallowed)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i;
        for (i = 0; i < nallowed; i++)
            if (strcmp(key, allowed[i]) == 0)
                break;
        if (i == nallowed)
            return key;
    }
    return NULL;
}

#define EXTRA_KEY(obj, ...)                                                                        \
    extra_key((obj), (const char *const[]){__VA_ARGS__},                                           \
              sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

int te_result_kind_of(const json_t *r)
{
    if (!json_is_object(r) || json_object_size(r) == 0)
        return -EINVAL;
    if (json_object_get(r, "ok"))
        return TE_RESULT_OK;
    if (json_object_get(r, "error"))
        return TE_RESULT_ERROR;
    if (json_object_get(r, "ask_user"))
        return TE_RESULT_ASK_USER;
    if (json_object_get(r, "halt"))
        return TE_RESULT_HALT;
    if (json_object_get(r, "raised"))
        return TE_RESULT_RAISED;
    if (json_object_get(r, "tool_error"))
        return TE_RESULT_TOOL_ERROR;
    return -EINVAL;
}

int te_response_check(json_t *resp, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!json_is_object(resp))
        return fail(err, errlen, "response is not a JSON object");
    json_t *v;
    const char *extra;
    if ((v = json_object_get(resp, "ok"))) {
        if ((extra = EXTRA_KEY(resp, "ok")))
            return fail(err, errlen, "unexpected key \"%s\" beside \"ok\"", extra);
        *out = json_incref(resp);
        return TE_RESULT_OK;
    }
    if ((v = json_object_get(resp, "error"))) {
        if ((extra = EXTRA_KEY(resp, "error")))
            return fail(err, errlen, "unexpected key \"%s\" beside \"error\"", extra);
        *out = json_incref(resp);
        return TE_RESULT_ERROR;
    }
    if ((v = json_object_get(resp, "ask_user"))) {
        if ((extra = EXTRA_KEY(resp, "ask_user", "opts")))
            return fail(err, errlen, "unexpected key \"%s\" beside \"ask_user\"", extra);
        if (!te_json_is_text(v))
            return fail(err, errlen, "\"ask_user\" question is not a string");
        json_t *opts = json_object_get(resp, "opts");
        if (opts && !json_is_object(opts))
            return fail(err, errlen, "\"ask_user\" opts is not an object");
        *out =
            json_pack("{s:O,s:o}", "ask_user", v, "opts", opts ? json_incref(opts) : json_object());
        return *out ? TE_RESULT_ASK_USER : -ENOMEM;
    }
    if ((v = json_object_get(resp, "halt"))) {
        if ((extra = EXTRA_KEY(resp, "halt", "result")))
            return fail(err, errlen, "unexpected key \"%s\" beside \"halt\"", extra);
        if (!te_json_is_text(v))
            return fail(err, errlen, "\"halt\" reason is not a string");
        if (!json_object_get(resp, "result"))
            return fail(err, errlen, "\"halt\" without \"result\"");
        *out = json_incref(resp);
        return TE_RESULT_HALT;
    }
    if ((v = json_object_get(resp, "raised"))) {
        if ((extra = EXTRA_KEY(resp, "raised")))
            return fail(err, errlen, "unexpected key \"%s\" beside \"raised\"", extra);
        if (!json_is_object(v))
            return fail(err, errlen, "\"raised\" is not an object");
        *out = json_incref(resp);
        return TE_RESULT_RAISED;
    }
    const char *key = json_object_size(resp) ? json_object_iter_key(json_object_iter(resp)) : NULL;
    if (key)
        return fail(err, errlen,
                    "unknown key \"%s\" (expected ok, error, ask_user, halt or raised)", key);
    return fail(err, errlen, "empty response object");
}

bool te_tools_changed_frame(const char *body, size_t len)
{
    /* An MCP server's every response frame passes here too: a body longer
     * than the notice with room for white space is not one, and is not
     * parsed (a 16 MiB result is parsed once, as the response). */
    if (len > 64)
        return false;
    /* nor is one whose first key is another (a call's short answer,
     * {"ok": ...}): parsed only when it may be the notice */
    size_t i = 0;
    while (i < len && strchr(" \t\r\n{", body[i]) && body[i])
        i++;
    if (len - i < 15 || memcmp(body + i, "\"tools_changed\"", 15) != 0)
        return false;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    bool is = json_is_object(v) && json_object_size(v) == 1 &&
              json_is_true(json_object_get(v, "tools_changed"));
    json_decref(v);
    return is;
}

int te_response_parse(const char *buf, size_t len, json_t **out, char *err, size_t errlen)
{
    json_error_t jerr;
    *out = NULL;
    json_t *resp = te_json_loadb(buf, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (!resp)
        return fail(err, errlen, "invalid JSON at byte %d: %s", jerr.position, jerr.text);
    int rc = te_response_check(resp, out, err, errlen);
    json_decref(resp);
    return rc;
}

json_t *te_tool_error_new(te_reason reason, const char *tool_name, const char *call_id,
                          const char *detail, json_t *cause, json_t *metadata)
{
    const char *rname = te_reason_name(reason);
    size_t n = strlen(tool_name) + strlen(rname) + (detail ? strlen(detail) + 2 : 0) + 32;
    char *msg = malloc(n);
    json_t *te = NULL;
    if (msg) {
        snprintf(msg, n, "tool error (%s): %s%s%s", tool_name, rname, detail ? ": " : "",
                 detail ? detail : "");
        te_utf8_repair(msg);
        te =
            json_pack("{s:{s:s,s:s,s:s,s:s,s:o,s:o}}", "tool_error", "reason", rname, "message",
                      msg, "tool_name", tool_name, "tool_call_id", call_id, "cause",
                      cause ? cause : json_null(), "metadata", metadata ? metadata : json_object());
        free(msg);
        return te;
    }
    json_decref(cause);
    json_decref(metadata);
    return NULL;
}

static char *dump_limited(const json_t *v, size_t limit, size_t *len, int *rc)
{
    char *s = te_json_dumps(v, JSON_ENCODE_ANY, NULL);
    if (!s) {
        *rc = -ENOMEM;
        return NULL;
    }
    size_t n = strlen(s);
    if (n > limit) {
        free(s);
        *rc = -E2BIG;
        return NULL;
    }
    *len = n;
    *rc = 0;
    return s;
}

char *te_content_of_value(const json_t *v, size_t limit, size_t *len, int *rc)
{
    if (!v) {
        *rc = -EINVAL;
        return NULL;
    }
    if (te_json_is_text(v)) {
        size_t n = json_string_length(v);
        if (n > limit) {
            *rc = -E2BIG;
            return NULL;
        }
        char *s = malloc(n + 1);
        if (!s) {
            *rc = -ENOMEM;
            return NULL;
        }
        memcpy(s, json_string_value(v), n);
        s[n] = '\0';
        *len = n;
        *rc = 0;
        return s;
    }
    return dump_limited(v, limit, len, rc);
}

/* {"error": TEXT}: a reason that is not a string as its JSON text (a number
 * past a double's range, held as a marked string, included) */
static char *encode_error_text(const json_t *reason, size_t limit, size_t *len, int *rc)
{
    json_t *text;
    if (te_json_is_text(reason)) {
        text = json_incref((json_t *)reason);
    } else {
        char *s = te_json_dumps(reason, JSON_ENCODE_ANY, NULL);
        text = s ? json_string(s) : NULL;
        free(s);
    }
    json_t *obj = text ? json_pack("{s:o}", "error", text) : NULL;
    if (!obj) {
        *rc = -ENOMEM;
        return NULL;
    }
    char *out = dump_limited(obj, limit, len, rc);
    json_decref(obj);
    return out;
}

#define TE_AWAITING "<awaiting user response>"

char *te_content_encode(const json_t *result, size_t limit, size_t *len, int *rc)
{
    *rc = -EINVAL;
    switch (te_result_kind_of(result)) {
    case TE_RESULT_OK:
        return te_content_of_value(json_object_get(result, "ok"), limit, len, rc);
    case TE_RESULT_HALT:
        return te_content_of_value(json_object_get(result, "result"), limit, len, rc);
    case TE_RESULT_ERROR:
        return encode_error_text(json_object_get(result, "error"), limit, len, rc);
    case TE_RESULT_TOOL_ERROR: {
        json_t *msg = json_object_get(json_object_get(result, "tool_error"), "message");
        return msg ? encode_error_text(msg, limit, len, rc) : NULL;
    }
    case TE_RESULT_ASK_USER: {
        json_t *s = json_string(TE_AWAITING);
        char *out = s ? te_content_of_value(s, limit, len, rc) : NULL;
        json_decref(s);
        return out;
    }
    default:
        return NULL;
    }
}

static bool positive_int(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static json_t *or_null(json_t *v)
{
    return v ? v : json_null();
}

int te_decision_check(const json_t *d)
{
    const char *s = json_string_value(d);
    if (s)
        return strcmp(s, "continue") == 0 ? TE_DECIDE_CONTINUE
               : strcmp(s, "halt") == 0   ? TE_DECIDE_HALT
                                          : -EINVAL;
    if (json_is_object(d) && json_object_size(d) == 1 && json_object_get(d, "continue_with"))
        return TE_DECIDE_CONTINUE_WITH;
    return -EINVAL;
}

/* Arguments that came as JSON text (OpenAI): parsed here; text that does
 * not parse, or is not an object, does not sink the batch: the call keeps
 * the text and the reason, and completes with a handler-style error. */
static void parse_arguments_text(json_t *call, const char *text)
{
    json_error_t jerr;
    /* any JSON value parses, so a non-object is named as such */
    json_t *v = te_json_loads(text, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    char why[320];
    if (json_is_object(v)) {
        json_object_set_new(call, "arguments", v);
        return;
    }
    if (!v)
        snprintf(why, sizeof(why), "invalid arguments: %s (line %d, column %d)", jerr.text,
                 jerr.line, jerr.column);
    else
        snprintf(why, sizeof(why), "invalid arguments: expected a JSON object, got %s",
                 json_is_array(v)                            ? "an array"
                 : te_json_is_text(v)                        ? "a string"
                 : json_is_number(v) || te_json_is_rawnum(v) ? "a number"
                 : json_is_boolean(v)                        ? "a boolean"
                                                             : "null");
    json_decref(v);
    te_utf8_repair(why);
    json_object_set_new(call, "arguments", json_string(text));
    json_object_set_new(call, TE_ARGUMENTS_ERROR, json_string(why));
}

/* Tool calls exactly as LLM APIs emit them, rewritten in place to the
 * native {"id", "name", "arguments"} (plus "shape", and TE_ARGUMENTS_ERROR
 * when the arguments text did not parse). Keys the APIs add (status, ...)
 * are ignored. */
/* An OpenAI custom (free-text) tool call: Chat Completions'
 * {"type": "custom", "id", "custom": {"name", "input"}} or a Responses
 * {"type": "custom_tool_call", "call_id", "name", "input"} item. It is that
 * call's error, not the batch's: toolexecd tools take JSON arguments.
 * 1 when call is one (rewritten like an LLM call), 0 when not, -EINVAL. */
static int normalize_custom_call(json_t *call, size_t i, char *err, size_t errlen)
{
    const char *type = json_string_value(json_object_get(call, "type"));
    bool chat = type && strcmp(type, "custom") == 0;
    if (!chat && !(type && strcmp(type, "custom_tool_call") == 0))
        return 0;
    const char *id_key = chat ? "id" : "call_id";
    json_t *fn = chat ? json_object_get(call, "custom") : call;
    json_t *id = json_object_get(call, id_key), *name = json_object_get(fn, "name");
    json_t *input = json_object_get(fn, "input");
    if (!json_is_object(fn))
        return fail(err, errlen, "calls[%zu].custom: expected an object", i);
    if (!te_json_is_text(id))
        return fail(err, errlen, "calls[%zu].%s: expected a string", i, id_key);
    if (!te_json_is_text(name))
        return fail(err, errlen, "calls[%zu]%s.name: expected a string", i, chat ? ".custom" : "");
    json_incref(id);
    json_incref(name);
    json_t *text = te_json_is_text(input) ? json_incref(input) : json_string("");
    json_object_clear(call);
    json_object_set_new(call, "id", id);
    json_object_set_new(call, "name", name);
    json_object_set_new(
        call, "shape",
        json_string(te_format_name(chat ? TE_FORMAT_OPENAI : TE_FORMAT_OPENAI_RESPONSES)));
    json_object_set_new(call, "arguments", text);
    json_object_set_new(call, TE_CUSTOM_CALL, json_true());
    json_object_set_new(call, TE_ARGUMENTS_ERROR,
                        json_string("custom tool calls are not supported: toolexecd tools take "
                                    "JSON arguments (declare them as functions)"));
    return 1;
}

static int normalize_llm_call(json_t *call, size_t i, char *err, size_t errlen)
{
    json_t *id, *name, *args;
    int custom = normalize_custom_call(call, i, err, errlen);
    if (custom)
        return custom < 0 ? custom : 0;
    int shape = te_call_shape(call); /* the API the call came from */
    if (shape < 0)
        return fail(err, errlen,
                    "calls[%zu].type: expected \"function\", \"function_call\" or \"tool_use\"", i);
    if (shape == TE_FORMAT_OPENAI && !json_is_object(json_object_get(call, "function")))
        return fail(err, errlen, "calls[%zu].function: expected an object", i);
    te_call_fields(call, (te_result_format)shape, &id, &name, &args);
    if (!te_json_is_text(id))
        return fail(err, errlen, "calls[%zu].%s: expected a string", i,
                    te_call_id_key((te_result_format)shape));
    if (!te_json_is_text(name))
        return fail(err, errlen, "calls[%zu]%s.name: expected a string", i,
                    shape == TE_FORMAT_OPENAI ? ".function" : "");
    if (shape == TE_FORMAT_ANTHROPIC && args && !json_is_null(args) && !json_is_object(args))
        return fail(err, errlen, "calls[%zu].input: expected an object", i);
    if (args && !json_is_null(args) && !json_is_object(args) && !te_json_is_text(args))
        return fail(err, errlen, "calls[%zu]: arguments: expected an object or JSON text", i);
    json_incref(id);
    json_incref(name);
    json_incref(args);
    json_object_clear(call);
    json_object_set_new(call, "id", id);
    json_object_set_new(call, "name", name);
    json_object_set_new(call, "shape", json_string(te_format_name((te_result_format)shape)));
    if (te_json_is_text(args))
        parse_arguments_text(call, json_string_value(args));
    else
        json_object_set(call, "arguments", json_is_object(args) ? args : json_null());
    json_decref(args);
    return 0;
}

bool te_subject_valid(const char *s, size_t len)
{
    if (len == 0 || len > TE_SUBJECT_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < 0x21 || s[i] > 0x7e) /* a NUL inside too */
            return false;
    return true;
}

int te_run_request_parse(json_t *req, te_run_request *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const char *extra =
        EXTRA_KEY(req, "op", "batch", "calls", "on_tool_error", "tool_timeout", "max_concurrency",
                  "context", "session_id", "request_id", "engine", "result_format",
                  "max_content_bytes", "unknown_tool", "policy", "subject");
    if (extra)
        return fail(err, errlen, "unknown key \"%s\" in run request", extra);
    json_t *unknown = json_object_get(req, "unknown_tool");
    if (unknown && !json_is_null(unknown)) {
        const char *u = json_string_value(unknown);
        if (!u || (strcmp(u, "refuse") != 0 && strcmp(u, "error") != 0))
            return fail(err, errlen, "unknown_tool: expected \"refuse\" or \"error\"");
        out->unknown_tool_error = strcmp(u, "error") == 0;
    }

    json_t *v = json_object_get(req, "batch");
    if (v && !json_is_null(v)) {
        if (!te_json_is_text(v) || json_string_length(v) == 0)
            return fail(err, errlen, "batch: expected a non-empty string");
        out->batch = json_string_value(v);
    }
    v = json_object_get(req, "subject");
    if (v && !json_is_null(v)) {
        if (!te_json_is_text(v) || !te_subject_valid(json_string_value(v), json_string_length(v)))
            return fail(err, errlen,
                        "subject: expected 1 to %d bytes of printable ASCII without spaces",
                        TE_SUBJECT_MAX);
        out->subject = json_string_value(v);
    }
    out->policy = TE_POLICY_CONTINUE;
    v = json_object_get(req, "on_tool_error");
    if (v && !json_is_null(v)) {
        const char *s = json_string_value(v);
        if (s && strcmp(s, "continue") == 0)
            out->policy = TE_POLICY_CONTINUE;
        else if (s && strcmp(s, "halt") == 0)
            out->policy = TE_POLICY_HALT;
        else if (s && strcmp(s, "ask") == 0)
            out->policy = TE_POLICY_ASK;
        else if (json_is_object(v)) {
            const char *key;
            json_t *d;
            json_object_foreach(v, key, d)
            {
                if (strcmp(key, "default") && strcmp(key, "handler_error") &&
                    te_reason_parse(key) < 0)
                    return fail(err, errlen,
                                "on_tool_error.%s: not a tool-error reason, \"handler_error\" "
                                "or \"default\"",
                                key);
                if (te_decision_check(d) < 0)
                    return fail(err, errlen,
                                "on_tool_error.%s: expected \"continue\", \"halt\" or "
                                "{\"continue_with\": value}",
                                key);
            }
            out->policy = TE_POLICY_MAP;
            out->policy_map = v;
        } else
            return fail(err, errlen,
                        "on_tool_error: expected \"continue\", \"halt\", \"ask\", an object "
                        "of decisions, or null");
    }
    out->format = TE_FORMAT_OPENAI;
    v = json_object_get(req, "result_format");
    if (v && !json_is_null(v)) {
        int k = te_format_parse(json_string_value(v));
        if (k < 0)
            return fail(err, errlen,
                        "result_format: expected \"openai\", \"openai_responses\" "
                        "or \"anthropic\"");
        out->format = (te_result_format)k;
    }
    v = json_object_get(req, "max_content_bytes");
    if (v && !json_is_null(v) && !positive_int(v, &out->max_content_bytes))
        return fail(err, errlen, "max_content_bytes: expected a positive integer");
    out->tool_timeout_ms = TE_TOOL_TIMEOUT_DEFAULT_MS;
    v = json_object_get(req, "tool_timeout");
    if (v && !json_is_null(v) && !positive_int(v, &out->tool_timeout_ms))
        return fail(err, errlen, "tool_timeout: expected a positive integer (milliseconds)");
    out->tool_timeout_given = v && !json_is_null(v);
    v = json_object_get(req, "max_concurrency");
    if (v && !json_is_null(v) && !positive_int(v, &out->max_concurrency))
        return fail(err, errlen, "max_concurrency: expected a positive integer");

    v = json_object_get(req, "policy");
    if (v && !json_is_null(v) && !json_is_object(v))
        return fail(err, errlen, "policy: expected an object");
    out->narrow = json_is_object(v) ? v : NULL;

    json_t *calls = json_object_get(req, "calls");
    if (!json_is_array(calls))
        return fail(err, errlen, calls ? "calls: expected an array" : "calls: missing");
    json_t *seen = json_object();
    if (!seen)
        return -ENOMEM;
    size_t i;
    json_t *call;
    int rc = 0;
    json_array_foreach(calls, i, call)
    {
        if (!json_is_object(call)) {
            rc = fail(err, errlen, "calls[%zu]: expected an object", i);
            break;
        }
        if (json_object_get(call, "type")) {
            json_t *keep = json_incref(json_object_get(call, "policy"));
            rc = normalize_llm_call(call, i, err, errlen);
            if (keep)
                json_object_set(call, "policy", keep);
            json_decref(keep);
            if (rc < 0)
                break;
        } else if ((extra = EXTRA_KEY(call, "id", "name", "arguments", "policy"))) {
            rc = fail(err, errlen, "calls[%zu]: unknown key \"%s\"", i, extra);
            break;
        }
        json_t *id = json_object_get(call, "id"), *name = json_object_get(call, "name");
        if (!te_json_is_text(id)) {
            rc = fail(err, errlen, "calls[%zu].id: expected a string", i);
            break;
        }
        if (!te_json_is_text(name)) {
            rc = fail(err, errlen, "calls[%zu].name: expected a string", i);
            break;
        }
        json_t *pol = json_object_get(call, "policy");
        if (pol && !json_is_null(pol) && !json_is_object(pol)) {
            rc = fail(err, errlen, "calls[%zu].policy: expected an object", i);
            break;
        }
        json_t *args = json_object_get(call, "arguments");
        bool bad_text = json_object_get(call, TE_ARGUMENTS_ERROR) != NULL;
        if (args && !bad_text && !json_is_null(args) && !json_is_object(args)) {
            rc = fail(err, errlen, "calls[%zu].arguments: expected an object or null", i);
            break;
        }
        if (json_object_get(seen, json_string_value(id))) {
            rc = fail(err, errlen, "calls[%zu].id: duplicate call id \"%s\"", i,
                      json_string_value(id));
            break;
        }
        json_object_set(seen, json_string_value(id), json_true());
        if (!args || json_is_null(args))
            json_object_set_new(call, "arguments", json_object());
    }
    json_decref(seen);
    if (rc)
        return rc;
    out->calls = calls;
    out->ncalls = json_array_size(calls);
    out->context = or_null(json_object_get(req, "context"));
    out->session_id = or_null(json_object_get(req, "session_id"));
    out->request_id = or_null(json_object_get(req, "request_id"));
    out->engine = or_null(json_object_get(req, "engine"));
    return 0;
}
