/*
 * mcp_tasks.c - the tasks extension (io.modelcontextprotocol/tasks) of MCP
 * 2026-07-28 (mcp_int.h): a tools/call from a client that declared the
 * extension in its request, still running after --task-after, is answered
 * with a task handle (CreateTaskResult) and runs on; tasks/get polls it,
 * tasks/update answers its tool's question, tasks/cancel kills its worker.
 *
 * A task's call keeps running as any call does (mcp_events.c); its req.task
 * is set, so what would have gone to the client (its response) is kept in
 * the task instead (mcp_task_capture()). Its request id and stream are
 * dropped once the handle is out: the call belongs to no request any more.
 *
 * A handle is "[replica.]hex": 128 bits from getrandom, after the
 * --replica-id of the front that holds the task (so a balancer can route
 * on it). It is bound to the subject that made the call: another subject's
 * lookup finds nothing, as for a handle never issued. Bounds: --task-ttl
 * from the task's creation (then it is gone; a running call is cancelled),
 * --max-tasks per core (the oldest finished task makes room; when none has
 * finished, a call stays synchronous), --task-max-result bytes of a result
 * (a larger one fails the task).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nettle/memops.h>

#include "mcp_int.h"
#include "randhex.h"

#define MCP_TASK_AFTER_MS 500
#define MCP_TASK_TTL_MS 900000
#define MCP_TASK_MAX 256
#define MCP_TASK_MAX_RESULT (1u << 20)
#define MCP_TASK_POLL_MS 1000
#define MCP_RPC_MISSING_CAPABILITY (-32021)

enum task_status { TASK_WORKING, TASK_INPUT, TASK_COMPLETED, TASK_FAILED, TASK_CANCELLED };
static const char *const status_names[] = {"working", "input_required", "completed", "failed",
                                           "cancelled"};

struct mcp_task {
    char id[MCP_REPLICA_MAX + 1 + 33]; /* [replica.]32 hex digits */
    char *owner;                       /* the subject that made the call ("" on stdio) */
    char *batch;                       /* its call's, to cancel it while it runs */
    struct mcp_reqctx req;             /* what its call's messages are addressed to */
    enum task_status status;
    long long born_ms; /* monotonic: the TTL counts from here */
    char created[32], updated[32];
    json_t *result, *error; /* completed, failed */
    json_t *input;          /* input_required: inputRequests (one key) */
    char *question, *key;   /* its tool's question, the key it goes by */
    unsigned asks;          /* questions so far: keys are never reused */
    struct mcp_task *next;  /* newest first */
};

static void stamp(char out[32])
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

void mcp_tasks_defaults(struct mcp *m)
{
    if (!m->task_after_ms)
        m->task_after_ms = MCP_TASK_AFTER_MS;
    if (!m->task_ttl_ms)
        m->task_ttl_ms = MCP_TASK_TTL_MS;
    if (!m->max_tasks)
        m->max_tasks = MCP_TASK_MAX;
    if (!m->task_max_result)
        m->task_max_result = MCP_TASK_MAX_RESULT;
}

static void task_free(struct mcp_task *t)
{
    free(t->owner);
    free(t->batch);
    json_decref(t->req.id);
    json_decref(t->result);
    json_decref(t->error);
    json_decref(t->input);
    free(t->question);
    free(t->key);
    free(t);
}

/* Unlink and free t; its call, if it still runs, is cancelled (its worker
 * killed) and answers nobody. */
static void task_drop(struct mcp *m, struct mcp_task *t)
{
    struct mcp_call *c = mcp_call_by_batch(m, t->batch);
    if (c && c->req.task == t) {
        c->req.task = NULL;
        mcp_cancel_call(m, c);
    }
    for (struct mcp_task **p = &m->tasks; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            break;
        }
    m->ntasks--;
    task_free(t);
}

void mcp_tasks_free(struct mcp *m)
{
    while (m->tasks)
        task_drop(m, m->tasks);
}

static bool terminal(const struct mcp_task *t)
{
    return t->status == TASK_COMPLETED || t->status == TASK_FAILED || t->status == TASK_CANCELLED;
}

/* Room for one more: the oldest finished task goes when the table is full.
 * False when every task is still running. */
static bool make_room(struct mcp *m)
{
    if (m->ntasks < m->max_tasks)
        return true;
    struct mcp_task *oldest = NULL;
    for (struct mcp_task *t = m->tasks; t; t = t->next)
        if (terminal(t))
            oldest = t;
    if (!oldest)
        return false;
    task_drop(m, oldest);
    return true;
}

static bool new_id(struct mcp *m, char *out, size_t size)
{
    size_t o = m->replica_id ? (size_t)snprintf(out, size, "%s.", m->replica_id) : 0;
    return o + 33 <= size && te_random_hex(out + o, 16) == 0;
}

static json_t *task_json(const struct mcp *m, const struct mcp_task *t)
{
    json_t *o =
        json_pack("{s:s,s:s,s:s,s:s,s:I,s:i}", "taskId", t->id, "status", status_names[t->status],
                  "createdAt", t->created, "lastUpdatedAt", t->updated, "ttlMs",
                  (json_int_t)m->task_ttl_ms, "pollIntervalMs", MCP_TASK_POLL_MS);
    if (o && t->status == TASK_INPUT) {
        json_object_set_new(o, "statusMessage",
                            json_string("the tool asks the user a question: tasks/update"));
        json_object_set(o, "inputRequests", t->input);
    }
    return o;
}

/* Call c becomes a task: the handle answers its tools/call. */
static void promote(struct mcp *m, struct mcp_call *c)
{
    if (!make_room(m))
        return; /* the call stays synchronous */
    struct mcp_task *t = calloc(1, sizeof(*t));
    if (!t || !(t->batch = strdup(c->batch)) || !(t->owner = strdup(c->owner ? c->owner : "")) ||
        !new_id(m, t->id, sizeof(t->id))) {
        if (t)
            task_free(t);
        return;
    }
    t->born_ms = cli_now_ms();
    stamp(t->created);
    memcpy(t->updated, t->created, sizeof(t->updated));
    t->req = c->req;
    t->req.id = json_null();
    t->req.stream = NULL;
    t->req.log_level = MCP_LOG_NONE;
    t->req.task = t;
    t->next = m->tasks;
    m->tasks = t;
    m->ntasks++;
    json_t *r = task_json(m, t);
    if (r)
        json_object_set_new(r, "resultType", json_string("task"));
    mcp_put_result(m, &c->req, r);
    /* the call now answers nobody: its messages go to the task */
    json_decref(c->req.id);
    c->req = t->req;
    c->req.id = json_null();
    json_decref(c->progress_token);
    c->progress_token = NULL;
}

void mcp_task_started(struct mcp *m, struct mcp_call *c, const char *support)
{
    /* owner: a client with the extension (a 2025-11-25 client's "task"
     * asks nothing: the server decides) */
    if (!c->owner)
        return;
    if (support && strcmp(support, "forbidden") == 0) {
        free(c->owner); /* never a task */
        c->owner = NULL;
    } else if (m->task_after_ms < 0 || (support && strcmp(support, "required") == 0)) {
        promote(m, c);
    }
}

/* Call c's tool asks the user before --task-after: a client that takes
 * tasks gets one, input_required, and answers with tasks/update. */
void mcp_task_asks(struct mcp *m, struct mcp_call *c)
{
    if (c->req.modern && c->req.tasks && c->req.elicitation && !c->req.task && c->owner &&
        !c->cancelled)
        promote(m, c);
}

/* A message for task t's call (msg stolen): its response settles it;
 * notifications and requests bound to it are not sent (the extension has
 * none for a task). */
void mcp_task_capture(struct mcp *m, struct mcp_task *t, json_t *msg)
{
    json_t *err = json_object_get(msg, "error");
    json_t *res = json_object_get(msg, "result");
    const char *rt = json_string_value(json_object_get(res, "resultType"));
    if (err) {
        t->status = TASK_FAILED;
        t->error = json_incref(err);
    } else if (rt && strcmp(rt, "input_required") == 0) {
        json_t *ask = json_object_get(json_object_get(res, "inputRequests"), "ask_user");
        const char *q =
            json_string_value(json_object_get(json_object_get(ask, "params"), "message"));
        char key[32];
        snprintf(key, sizeof(key), "ask_user-%u", ++t->asks);
        free(t->question);
        free(t->key);
        json_decref(t->input);
        t->question = q ? strdup(q) : NULL;
        t->key = strdup(key);
        t->input = json_pack("{s:O}", key, ask);
        t->status = t->question && t->key && t->input ? TASK_INPUT : TASK_FAILED;
        if (t->status == TASK_FAILED)
            t->error =
                json_pack("{s:i,s:s}", "code", RPC_INTERNAL_ERROR, "message", "out of memory");
    } else if (res) {
        char *text = te_json_dumps(res, JSON_COMPACT, NULL);
        size_t n = text ? strlen(text) : 0;
        free(text);
        if (n > m->task_max_result) {
            char why[160];
            snprintf(why, sizeof(why),
                     "the result (%zu bytes) is larger than --task-max-result "
                     "(%zu bytes)",
                     n, m->task_max_result);
            t->status = TASK_FAILED;
            t->error = json_pack("{s:i,s:s}", "code", RPC_INTERNAL_ERROR, "message", why);
        } else {
            t->status = TASK_COMPLETED;
            t->result = json_incref(res);
        }
    } else {
        json_decref(msg);
        return;
    }
    stamp(t->updated);
    json_decref(msg);
}

/* Calls past --task-after become tasks; tasks past their TTL go. Returns
 * the ms until the next of either, -1 for none. */
int mcp_tasks_tick(struct mcp *m)
{
    long long now = cli_now_ms(), next = -1;
    for (struct mcp_call *c = m->calls; c; c = c->next) {
        if (!c->req.modern || !c->req.tasks || c->req.task || c->cancelled || c->elicit_id ||
            !c->owner || c->held || json_is_null(c->req.id))
            continue;
        long long due = c->started_ms + m->task_after_ms;
        if (due <= now)
            promote(m, c);
        else if (next < 0 || due - now < next)
            next = due - now;
    }
    for (struct mcp_task *t = m->tasks, *n; t; t = n) {
        n = t->next;
        long long due = t->born_ms + m->task_ttl_ms;
        if (due <= now)
            task_drop(m, t);
        else if (next < 0 || due - now < next)
            next = due - now;
    }
    return next < 0 ? -1 : next > 60000 ? 60000 : (int)next;
}

/* ------------------------------------------------------------------------ */
/* tasks/get, tasks/update, tasks/cancel */

/* The task of params.taskId for q's subject, or NULL (answered). */
static struct mcp_task *lookup(struct mcp *m, const struct mcp_reqctx *q, const json_t *params)
{
    const char *id = json_string_value(json_object_get(params, "taskId"));
    if (!id) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS, "Invalid params: taskId: expected a string", NULL);
        return NULL;
    }
    const char *dot = strchr(id, '.');
    size_t plen = dot ? (size_t)(dot - id) : 0;
    const char *mine = m->replica_id ? m->replica_id : "";
    if (dot && (strlen(mine) != plen || strncmp(id, mine, plen) != 0)) {
        /* another front's: a balancer routes on the prefix */
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "Invalid params: taskId: the task is held by replica '%.*s', not by this one "
                 "('%s'): the request must go to that replica",
                 (int)(plen > 64 ? 64 : plen), id, mine);
        mcp_put_error(m, q, RPC_INVALID_PARAMS, msg,
                      json_pack("{s:s%}", "replica", id, plen > 64 ? 64 : plen));
        return NULL;
    }
    mcp_tasks_tick(m); /* the expired are gone */
    const char *subject = q->subject ? q->subject : "";
    size_t n = strlen(id);
    for (struct mcp_task *t = m->tasks; t; t = t->next)
        if (strlen(t->id) == n && memeql_sec(t->id, id, n) && strcmp(t->owner, subject) == 0)
            return t;
    /* never issued, expired, evicted or another subject's: all the same */
    mcp_put_error(m, q, RPC_INVALID_PARAMS, "Invalid params: taskId: no such task", NULL);
    return NULL;
}

static void on_update(struct mcp *m, const struct mcp_reqctx *q, struct mcp_task *t,
                      const json_t *params)
{
    json_t *in = json_object_get(params, "inputResponses");
    if (!json_is_object(in)) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS,
                      "Invalid params: inputResponses: expected an object", NULL);
        return;
    }
    json_t *resp = t->status == TASK_INPUT ? json_object_get(in, t->key) : NULL;
    const char *action = json_string_value(json_object_get(resp, "action"));
    if (resp && !action) {
        mcp_put_error(m, q, RPC_INVALID_PARAMS,
                      "Invalid params: inputResponses: expected {\"action\", \"content\"}", NULL);
        return;
    }
    if (action) {
        /* other keys (answered, never issued) are ignored, as the spec asks */
        json_t *content = json_object_get(resp, "content");
        json_t *answer = json_object_get(content, "answer");
        char *question = t->question;
        t->question = NULL;
        json_decref(t->input);
        t->input = NULL;
        mcp_put_answer(m, &t->req, question, action, answer ? answer : content);
        free(question);
    }
    mcp_put_result(m, q, json_object());
}

bool mcp_on_tasks(struct mcp *m, const struct mcp_reqctx *q, const char *method,
                  const json_t *params)
{
    bool get = strcmp(method, "tasks/get") == 0, update = strcmp(method, "tasks/update") == 0,
         cancel = strcmp(method, "tasks/cancel") == 0;
    if (!q->modern || !(get || update || cancel))
        return false;
    if (!q->tasks) {
        mcp_put_error(
            m, q, MCP_RPC_MISSING_CAPABILITY, "Missing required client capability",
            json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions", MCP_EXT_TASKS));
        return true;
    }
    struct mcp_task *t = lookup(m, q, params);
    if (!t)
        return true;
    if (get) {
        json_t *r = task_json(m, t);
        if (r && t->status == TASK_COMPLETED)
            json_object_set(r, "result", t->result);
        else if (r && t->status == TASK_FAILED)
            json_object_set(r, "error", t->error);
        mcp_put_result(m, q, r);
    } else if (update) {
        on_update(m, q, t, params);
    } else {
        if (!terminal(t)) {
            struct mcp_call *c = mcp_call_by_batch(m, t->batch);
            if (c && c->req.task == t)
                mcp_cancel_call(m, c); /* the daemon kills its worker */
            t->status = TASK_CANCELLED;
            stamp(t->updated);
        }
        mcp_put_result(m, q, json_object());
    }
    return true;
}
