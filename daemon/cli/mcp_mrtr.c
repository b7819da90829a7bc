/*
 * mcp_mrtr.c - a tool's question to the user under MCP 2026-07-28 (multi
 * round-trip requests, mcp_int.h): the tools/call is answered with an
 * InputRequiredResult asking the client to elicit the answer, and the
 * retry, carrying inputResponses and our requestState, is answered with
 * what the user said, as a 2025 client's elicitation is.
 *
 * The server keeps nothing between the two: requestState carries the
 * question, an expiry and a digest binding it to the caller and the call
 * (tool and arguments), signed with HMAC-SHA256 under a key drawn when the
 * process starts. A state that fails any check is refused, so a client
 * cannot put words in a tool's mouth nor replay the answer to another call.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nettle/base64.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "mcp_int.h"
#include "randhex.h"
#include "sha256hex.h"

/* The user has this long to answer. */
#define MCP_STATE_TTL_S 3600

/* The key: without one no state is issued, and the question goes to the
 * model as text instead. */
void mcp_state_init(struct mcp *m)
{
    if (te_random_bytes(m->state_key, sizeof(m->state_key)) < 0) {
        cli_err("mcp: getrandom failed; tools' questions go to the model as text");
        return;
    }
    m->state_ok = true;
}

/* What a call's state is bound to: who asks (the transport's subject),
 * the tool, its arguments (keys sorted). */
char *mcp_call_bind(const char *subject, const char *name, const json_t *args)
{
    json_t *a = json_is_object(args) ? json_incref((json_t *)args) : json_object();
    /* jansson's own dump: it sorts keys, so the retry's order does not
     * matter */
    char *text = a ? json_dumps(a, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    json_decref(a);
    char *all = NULL;
    if (!text || asprintf(&all, "%s\n%s\n%s", subject ? subject : "", name, text) < 0)
        all = NULL;
    free(text);
    char *hex = all ? malloc(2 * 32 + 1) : NULL;
    if (hex)
        te_sha256_hex(all, strlen(all), hex);
    free(all);
    return hex;
}

static char *b64(const uint8_t *p, size_t n)
{
    struct base64_encode_ctx e;
    char *out = malloc(BASE64_ENCODE_LENGTH(n) + BASE64_ENCODE_FINAL_LENGTH + 1);
    if (!out)
        return NULL;
    base64url_encode_init(&e);
    size_t done = base64_encode_update(&e, out, n, p);
    done += base64_encode_final(&e, out + done);
    out[done] = '\0';
    return out;
}

static void mac(const struct mcp *m, const char *p, size_t n, uint8_t out[SHA256_DIGEST_SIZE])
{
    struct hmac_sha256_ctx h;
    hmac_sha256_set_key(&h, sizeof(m->state_key), m->state_key);
    hmac_sha256_update(&h, n, (const uint8_t *)p);
    hmac_sha256_digest(&h, SHA256_DIGEST_SIZE, out);
}

/* "payload.mac", both base64url; payload the JSON of bind, question,
 * expiry. */
static char *state_make(const struct mcp *m, const char *bind, const char *question)
{
    json_t *o = json_pack("{s:s,s:s,s:I}", "b", bind, "q", question, "e",
                          (json_int_t)time(NULL) + MCP_STATE_TTL_S);
    char *text = o ? te_json_dumps(o, JSON_COMPACT, NULL) : NULL;
    json_decref(o);
    char *payload = text ? b64((const uint8_t *)text, strlen(text)) : NULL;
    free(text);
    uint8_t d[SHA256_DIGEST_SIZE];
    char *sig = NULL, *state = NULL;
    if (payload) {
        mac(m, payload, strlen(payload), d);
        sig = b64(d, sizeof(d));
    }
    if (sig && asprintf(&state, "%s.%s", payload, sig) < 0)
        state = NULL;
    free(payload);
    free(sig);
    return state;
}

/* The question of a state this process issued for this bind and not yet
 * expired (a new string), or NULL. */
static char *state_check(const struct mcp *m, const char *state, const char *bind)
{
    const char *dot = state ? strchr(state, '.') : NULL;
    if (!m->state_ok || !dot || !bind)
        return NULL;
    size_t plen = (size_t)(dot - state), slen = strlen(dot + 1);
    uint8_t want[SHA256_DIGEST_SIZE], got[BASE64_DECODE_LENGTH(64)];
    mac(m, state, plen, want);
    struct base64_decode_ctx dc;
    size_t glen = sizeof(got);
    base64url_decode_init(&dc);
    if (slen > 64 || !base64_decode_update(&dc, &glen, got, slen, dot + 1) ||
        !base64_decode_final(&dc) || glen != sizeof(want) || !memeql_sec(got, want, sizeof(want)))
        return NULL;
    uint8_t *text = malloc(BASE64_DECODE_LENGTH(plen) + 1);
    size_t tlen = BASE64_DECODE_LENGTH(plen);
    base64url_decode_init(&dc);
    if (!text || !base64_decode_update(&dc, &tlen, text, plen, state) ||
        !base64_decode_final(&dc)) {
        free(text);
        return NULL;
    }
    json_t *o = te_json_loadb((const char *)text, tlen, 0, NULL);
    free(text);
    const char *b = json_string_value(json_object_get(o, "b"));
    const char *q = json_string_value(json_object_get(o, "q"));
    json_int_t e = json_integer_value(json_object_get(o, "e"));
    char *question =
        b && q && strcmp(b, bind) == 0 && e > (json_int_t)time(NULL) ? strdup(q) : NULL;
    json_decref(o);
    return question;
}

static void put_input_required(struct mcp *m, const struct mcp_reqctx *req, const char *bind,
                               const char *question)
{
    char *state = state_make(m, bind, question);
    if (!state) {
        mcp_put_question(m, req, question);
        return;
    }
    json_t *r = json_pack("{s:s,s:{s:{s:s,s:{s:s,s:s,s:{s:s,s:{s:{s:s,s:s}},s:[s]}}}},s:s}",
                          "resultType", "input_required", "inputRequests", "ask_user", "method",
                          "elicitation/create", "params", "mode", "form", "message", question,
                          "requestedSchema", "type", "object", "properties", "answer", "type",
                          "string", "title", "Answer", "required", "answer", "requestState", state);
    free(state);
    if (!r) {
        mcp_put_question(m, req, question);
        return;
    }
    mcp_put_result(m, req, r);
}

/* Call c's tool asks the user: an InputRequiredResult when the client can
 * elicit (it said so in this request), else the question as text; in a
 * task when the client takes tasks (mcp_tasks.c). */
void mcp_put_input_required(struct mcp *m, struct mcp_call *c, const char *question)
{
    mcp_task_asks(m, c); /* then what follows goes to its task */
    if (!c->req.elicitation || !m->state_ok || !c->bind) {
        mcp_put_question(m, &c->req, question);
        return;
    }
    mcp_log(m, &c->req, MCP_LOG_NOTICE, "%s asks the user a question", c->batch);
    put_input_required(m, &c->req, c->bind, question);
}

/* A modern tools/call carrying requestState: the retry of one that asked
 * the user. True when it has been answered here (the tool does not run
 * again: its question has its answer). */
bool mcp_on_retry(struct mcp *m, const struct mcp_reqctx *q, const json_t *params, const char *bind)
{
    json_t *st = json_object_get(params, "requestState");
    if (!st)
        return false;
    char *question = state_check(m, json_string_value(st), bind);
    if (!question) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS,
                      "Invalid params: requestState: not one this server issued for this call, "
                      "or expired",
                      NULL);
        return true;
    }
    json_t *resp = json_object_get(json_object_get(params, "inputResponses"), "ask_user");
    const char *action = json_string_value(json_object_get(resp, "action"));
    if (!action) {
        /* the answer is missing: ask again rather than fail */
        put_input_required(m, q, bind, question);
    } else {
        mcp_put_answer(m, q, question, action,
                       json_object_get(json_object_get(resp, "content"), "answer"));
    }
    free(question);
    return true;
}
