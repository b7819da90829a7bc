/*
 * fuzz_response - te_response_parse on arbitrary frame bodies, then what the
 * daemon does with the result (daemon/run/worker.c on_frame, daemon/run/batch.c):
 *
 *   success: te_result_kind_of(out) == kind, the normalised shape holds, and
 *            te_content_encode(out, limit) either succeeds with len <= limit
 *            (a NUL-terminated string of len bytes) or fails with -E2BIG,
 *            for several limits; a raised result is wrapped in a
 *            handler_raised tool error (te_tool_error_new, detail built as
 *            the daemon builds it), which must encode as {"error": message}.
 *   failure: -EINVAL with a message; the message becomes the detail of an
 *            invalid_return tool error, which must be buildable.
 *   notices: te_tools_changed_frame (an MCP server's worker's notice) holds
 *            only for {"tools_changed": true}, never for a response.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "toolexec.h"

#define ERRLEN 256 /* daemon/run/worker.c: char why[256] */

/* te_content_encode with limit: success with len <= limit or -E2BIG. The
 * content, when it fits, must be the unlimited content. */
static void encode_at(const json_t *res, size_t limit, const char *full, size_t flen)
{
    size_t len = (size_t)-1;
    int rc = 12345;
    char *s = te_content_encode(res, limit, &len, &rc);
    if (s) {
        CHECK(rc == 0, "content with rc %d", rc);
        CHECK(len <= limit, "content of %zu bytes over limit %zu", len, limit);
        CHECK(s[len] == '\0' && strlen(s) == len, "content length %zu, strlen %zu", len, strlen(s));
        CHECK(full && len == flen && memcmp(s, full, len) == 0, "content depends on the limit");
        free(s);
    } else {
        CHECK(rc == -E2BIG, "limit %zu: rc %d", limit, rc);
        CHECK(!full || flen > limit, "-E2BIG at limit %zu for %zu bytes", limit, flen);
    }
}

/* Encode without a limit, then around the content's length. */
static char *encode_all(const json_t *res, size_t *flen, uint32_t salt)
{
    int rc = 12345;
    size_t len = (size_t)-1;
    char *full = te_content_encode(res, SIZE_MAX, &len, &rc);
    CHECK(full, "unlimited encode failed: rc %d", rc);
    CHECK(rc == 0 && full[len] == '\0' && strlen(full) == len, "bad unlimited content");
    encode_at(res, len, full, len);
    if (len)
        encode_at(res, len - 1, full, len);
    encode_at(res, 0, full, len);
    encode_at(res, salt % (len + 2), full, len);
    *flen = len;
    return full;
}

/* The content of an error / tool_error: {"error": TEXT}. */
static void check_error_content(const char *s, size_t len, const char *want_text)
{
    json_error_t jerr;
    json_t *j = json_loadb(s, len, 0, &jerr);
    CHECK(j, "error content is not JSON: %s", jerr.text);
    CHECK(json_is_object(j) && json_object_size(j) == 1 &&
              json_is_string(json_object_get(j, "error")),
          "error content is not {\"error\": string}: %s", s);
    if (want_text)
        CHECK(strcmp(json_string_value(json_object_get(j, "error")), want_text) == 0,
              "error text differs");
    json_decref(j);
}

static void check_tool_error(json_t *te, const char *detail, uint32_t salt)
{
    if (!te && !TE_FUZZ_STRICT_UTF8 && !te_fuzz_valid_utf8(detail))
        return; /* te_tool_error_new refuses a detail that is not UTF-8 */
    CHECK(te, "te_tool_error_new failed for detail \"%s\"", detail);
    CHECK(te_result_kind_of(te) == TE_RESULT_TOOL_ERROR, "tool error kind %d",
          te_result_kind_of(te));
    json_t *body = json_object_get(te, "tool_error");
    const char *msg = json_string_value(json_object_get(body, "message"));
    CHECK(msg, "tool error without a message");
    /* the message carries the detail, repaired to valid UTF-8 */
    char *fixed = strdup(detail);
    CHECK(fixed, "out of memory");
    te_utf8_repair(fixed);
    CHECK(strstr(msg, fixed) != NULL, "message \"%s\" lacks the detail", msg);
    free(fixed);
    size_t len;
    char *s = encode_all(te, &len, salt);
    check_error_content(s, len, msg);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t salt = 2166136261u; /* FNV-1a of the input picks an extra limit */
    for (size_t i = 0; i < size; i++)
        salt = (salt ^ data[i]) * 16777619u;

    /* te_result_kind_of / te_content_encode on any value (the daemon also
     * encodes results it built itself): a kind or -EINVAL; content within
     * the limit, or -E2BIG / -EINVAL. */
    json_t *any = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (any) {
        int k = te_result_kind_of(any);
        CHECK(k == -EINVAL || (k >= TE_RESULT_OK && k <= TE_RESULT_TOOL_ERROR), "kind %d", k);
        CHECK(k == -EINVAL || json_is_object(any), "kind %d of a non-object", k);
        size_t limit = salt % 256, len = (size_t)-1;
        int rc = 12345;
        char *s = te_content_encode(any, limit, &len, &rc);
        if (s)
            CHECK(k >= 0 && rc == 0 && len <= limit && strlen(s) == len, "content rc %d len %zu",
                  rc, len);
        else /* -ENOMEM too: {"halt": "x"} (not normalised, no "result")
              * gets -ENOMEM from json_dumps(NULL), not -EINVAL */
            CHECK(rc == -E2BIG || rc == -EINVAL || rc == -ENOMEM, "content rc %d", rc);
        free(s);
        json_decref(any);
    }

    /* An MCP server's notice (daemon/run/worker_output.c) is read before
     * the response: it must never be a response, and it is exactly
     * {"tools_changed": true}. */
    bool notice = te_tools_changed_frame((const char *)data, size);
    if (notice) {
        json_t *v = json_loadb((const char *)data, size, 0, NULL);
        json_t *want = json_pack("{s:b}", "tools_changed", 1);
        CHECK(json_equal(v, want), "a tools_changed notice of another shape");
        json_decref(v);
        json_decref(want);
    }

    char err[ERRLEN];
    memset(err, 0x55, sizeof(err));
    json_t *out = (json_t *)1;
    int kind = te_response_parse((const char *)data, size, &out, err, sizeof(err));
    CHECK(!(notice && kind >= 0), "a tools_changed notice is also a response");
    if (kind < 0) {
        CHECK(kind == -EINVAL || kind == -ENOMEM, "rc %d", kind);
        CHECK(out == NULL, "failure left *out set");
        if (kind == -EINVAL) {
            CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0], "empty/unterminated message");
            CHECK(te_fuzz_utf8_ok(err), "message is not valid UTF-8: \"%s\"", err);
            json_t *te =
                te_tool_error_new(TE_INVALID_RETURN, "fuzz.tool", "call-1", err, NULL, NULL);
            check_tool_error(te, err, salt);
            json_decref(te);
        }
        return 0;
    }
    CHECK(out && json_is_object(out), "success without a result object");
    CHECK(kind >= TE_RESULT_OK && kind <= TE_RESULT_RAISED, "kind %d", kind);
    CHECK(te_result_kind_of(out) == kind, "te_result_kind_of %d, parse %d", te_result_kind_of(out),
          kind);

    /* The result is a valid response again (normalisation is stable). */
    json_t *again = NULL;
    CHECK(te_response_check(out, &again, err, sizeof(err)) == kind,
          "normalised result rejected: %s", err);
    CHECK(json_equal(again, out), "normalisation not idempotent");
    json_decref(again);

    size_t len;
    char *s;
    switch (kind) {
    case TE_RESULT_OK: {
        json_t *v = json_object_get(out, "ok");
        CHECK(json_object_size(out) == 1, "ok with extra keys");
        s = encode_all(out, &len, salt);
        /* a number past what jansson holds (te_json_rawnum) is a string
         * inside, but its content is the number as written */
        if (te_json_is_rawnum(v)) {
            const char *num = te_json_rawnum_text(v);
            CHECK(num && len == strlen(num) && memcmp(s, num, len) == 0,
                  "raw number ok content differs");
        } else if (json_is_string(v))
            CHECK(len == json_string_length(v) && memcmp(s, json_string_value(v), len) == 0,
                  "string ok content differs");
        free(s);
        break;
    }
    case TE_RESULT_ERROR:
        CHECK(json_object_size(out) == 1, "error with extra keys");
        s = encode_all(out, &len, salt);
        /* a reason that is no string is its JSON text: a raw number's as written */
        check_error_content(s, len,
                            te_json_is_rawnum(json_object_get(out, "error"))
                                ? te_json_rawnum_text(json_object_get(out, "error"))
                                : json_string_value(json_object_get(out, "error")));
        free(s);
        break;
    case TE_RESULT_ASK_USER:
        CHECK(json_object_size(out) == 2 && json_is_string(json_object_get(out, "ask_user")) &&
                  json_is_object(json_object_get(out, "opts")),
              "ask_user not normalised");
        s = encode_all(out, &len, salt);
        CHECK(strcmp(s, "<awaiting user response>") == 0, "ask_user content \"%s\"", s);
        free(s);
        break;
    case TE_RESULT_HALT: {
        const char *reason = json_string_value(json_object_get(out, "halt"));
        CHECK(json_object_size(out) == 2 && reason && json_object_get(out, "result"),
              "halt not normalised");
        (void)te_halt_reason_reserved(reason);
        int r = te_reason_parse(reason);
        CHECK(r == -EINVAL ||
                  (r >= 0 && r < TE_REASON_COUNT && strcmp(te_reason_name(r), reason) == 0),
              "te_reason_parse(\"%s\") = %d", reason, r);
        s = encode_all(out, &len, salt);
        free(s);
        break;
    }
    case TE_RESULT_RAISED: {
        CHECK(json_object_size(out) == 1 && json_is_object(json_object_get(out, "raised")),
              "raised not normalised");
        int rc = 0;
        CHECK(te_content_encode(out, SIZE_MAX, &len, &rc) == NULL && rc == -EINVAL,
              "raised encoded directly (rc %d)", rc);
        /* daemon/run/worker.c on_frame */
        json_t *raised = json_deep_copy(json_object_get(out, "raised"));
        CHECK(raised, "out of memory");
        const char *type = json_string_value(json_object_get(raised, "type"));
        const char *msg = json_string_value(json_object_get(raised, "message"));
        char detail[512];
        snprintf(detail, sizeof(detail), "%s%s%s", type ? type : "raised", msg ? ": " : "",
                 msg ? msg : "");
        json_object_set_new(raised, "stderr", json_string(""));
        json_t *te =
            te_tool_error_new(TE_HANDLER_RAISED, "fuzz.tool", "call-1", detail, raised, NULL);
        check_tool_error(te, detail, salt);
        json_decref(te);
        break;
    }
    }
    json_decref(out);
    return 0;
}
