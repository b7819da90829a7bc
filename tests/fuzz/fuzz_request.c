/*
 * fuzz_request - the daemon's request-line path: json_loadb of the line
 * exactly as daemon/serve/server.c does it (JSON_REJECT_DUPLICATES), then, for an
 * object, te_run_request_parse.
 *
 * Invariants on success: calls is the request's "calls" array and ncalls its
 * size; every call is an object with a string id, a string name and an object
 * "arguments" (normalised in place) and no other key; ids are unique; the
 * options hold legal values; parsing again (the normalised object, and its
 * serialisation re-read) succeeds with the same result.
 * On failure: -EINVAL with a non-empty, NUL-terminated, valid UTF-8 message
 * (the daemon sends it as a JSON string).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "toolexec.h"

#define ERRLEN 256 /* daemon/run/batch.c: char err[256] */

static void check_ok(json_t *req, const te_run_request *r)
{
    json_t *calls = json_object_get(req, "calls");
    CHECK(r->calls == calls && json_is_array(calls), "calls is not the request's array");
    CHECK(r->ncalls == json_array_size(calls), "ncalls %zu, array size %zu", r->ncalls,
          json_array_size(calls));
    CHECK(r->policy == TE_POLICY_CONTINUE || r->policy == TE_POLICY_HALT ||
              r->policy == TE_POLICY_ASK ||
              (r->policy == TE_POLICY_MAP && json_is_object(r->policy_map)),
          "policy %d", (int)r->policy);
    CHECK(r->tool_timeout_ms > 0, "tool_timeout_ms 0");
    json_t *tt = json_object_get(req, "tool_timeout");
    if (!tt || json_is_null(tt))
        CHECK(r->tool_timeout_ms == TE_TOOL_TIMEOUT_DEFAULT_MS, "default timeout %llu",
              (unsigned long long)r->tool_timeout_ms);
    else
        CHECK(json_is_integer(tt) && (uint64_t)json_integer_value(tt) == r->tool_timeout_ms,
              "tool_timeout %llu", (unsigned long long)r->tool_timeout_ms);
    json_t *mc = json_object_get(req, "max_concurrency");
    if (!mc || json_is_null(mc))
        CHECK(r->max_concurrency == 0, "max_concurrency %llu not given",
              (unsigned long long)r->max_concurrency);
    else
        CHECK(r->max_concurrency > 0 && json_is_integer(mc) &&
                  (uint64_t)json_integer_value(mc) == r->max_concurrency,
              "max_concurrency %llu", (unsigned long long)r->max_concurrency);
    json_t *b = json_object_get(req, "batch");
    if (r->batch)
        CHECK(json_is_string(b) && r->batch == json_string_value(b) && r->batch[0],
              "batch does not borrow a non-empty string");
    else
        CHECK(!b || json_is_null(b), "batch given but NULL");
    CHECK(r->context && r->session_id && r->request_id && r->engine, "NULL optional field");

    json_t *seen = json_object();
    CHECK(seen, "out of memory");
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call)
    {
        CHECK(json_is_object(call), "calls[%zu] not an object", i);
        json_t *id = json_object_get(call, "id"), *name = json_object_get(call, "name");
        json_t *args = json_object_get(call, "arguments");
        CHECK(json_is_string(id), "calls[%zu].id not a string", i);
        CHECK(json_is_string(name), "calls[%zu].name not a string", i);
        CHECK(json_is_object(args), "calls[%zu].arguments not an object", i);
        CHECK(json_object_size(call) == 3, "calls[%zu] has %zu keys", i, json_object_size(call));
        CHECK(!json_object_get(seen, json_string_value(id)), "calls[%zu]: duplicate id \"%s\"", i,
              json_string_value(id));
        json_object_set_new(seen, json_string_value(id), json_true());
        (void)te_tool_name_valid(json_string_value(name)); /* the daemon checks names later */
    }
    CHECK(json_object_size(seen) == r->ncalls, "%zu distinct ids for %zu calls",
          json_object_size(seen), r->ncalls);
    json_decref(seen);
}

static void same(const te_run_request *a, const te_run_request *b)
{
    CHECK(a->ncalls == b->ncalls && a->policy == b->policy &&
              a->tool_timeout_ms == b->tool_timeout_ms && a->max_concurrency == b->max_concurrency,
          "reparse differs");
    CHECK((a->batch == NULL) == (b->batch == NULL) &&
              (!a->batch || strcmp(a->batch, b->batch) == 0),
          "reparse batch differs");
    CHECK(json_equal(a->calls, b->calls) && json_equal(a->context, b->context) &&
              json_equal(a->session_id, b->session_id) &&
              json_equal(a->request_id, b->request_id) && json_equal(a->engine, b->engine),
          "reparse values differ");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *req = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!req)
        return 0;
    if (!json_is_object(req)) {
        json_decref(req);
        return 0;
    }
    (void)json_string_value(json_object_get(req, "op")); /* the daemon routes on it */

    char err[ERRLEN];
    memset(err, 0x55, sizeof(err));
    te_run_request r;
    int rc = te_run_request_parse(req, &r, err, sizeof(err));
    if (rc < 0) {
        CHECK(rc == -EINVAL || rc == -ENOMEM, "rc %d", rc);
        if (rc == -EINVAL) {
            CHECK(memchr(err, '\0', sizeof(err)) != NULL, "message not NUL-terminated");
            CHECK(err[0] != '\0', "empty message");
            CHECK(te_fuzz_utf8_ok(err), "message is not valid UTF-8: \"%s\"", err);
        }
        json_decref(req);
        return 0;
    }
    CHECK(rc == 0, "rc %d", rc);
    check_ok(req, &r);

    /* Parsing the normalised request again changes nothing. */
    json_t *before = json_deep_copy(req);
    CHECK(before, "out of memory");
    te_run_request r2;
    CHECK(te_run_request_parse(req, &r2, err, sizeof(err)) == 0, "reparse failed: %s", err);
    CHECK(json_equal(before, req), "reparse modified the request");
    same(&r, &r2);
    json_decref(before);

    /* Its serialisation, read back the way the daemon reads it, parses the same. */
    char *text = json_dumps(req, JSON_COMPACT);
    CHECK(text, "cannot serialise a valid request");
    json_t *req3 = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    CHECK(req3, "serialised request does not load: %s", jerr.text);
    te_run_request r3;
    CHECK(te_run_request_parse(req3, &r3, err, sizeof(err)) == 0, "round trip failed: %s", err);
    same(&r, &r3);
    json_decref(req3);
    free(text);

    json_decref(req);
    return 0;
}
