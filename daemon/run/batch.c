/*
 * batch.c - the runner: one "run" request's calls, started up to the batch's
 * concurrency, each routed through the on_tool_error policy as it completes.
 *
 * Events go out in completion order (per call: started, completed, then one
 * of encoded / ask_user_requested / tool_halt); batch_completed carries the
 * messages in input order and the halt of the earliest input index. A halt
 * never cancels siblings: every call runs to its end.
 *
 * Its parts are listed in batch_int.h: this file runs a batch's calls.
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "batch_int.h"
#include "enforced.h"
#include "bigres.h"
#include "bus.h"
#include "config.h"
#include "denials.h"
#include "learndef.h"
#include "declare.h"
#include "instance.h"
#include "log.h"
#include "registry.h"
#include "spill.h"
#include "toolexec.h"
#include "util.h"
#include "worker.h"
#include "cut.h"
#include "policy.h"
#include "scheduler.h"

/* Calls beyond --max-workers wait in the scheduler (scheduler.c). */
static struct td_sched sched = TD_SCHED_INITIALIZER(sched);
static struct td_batch *all_batches;

#define batch_of(e) ((struct td_batch *)((char *)(e)-offsetof(struct td_batch, sched)))

static void wait_enqueue(struct td_batch *b)
{
    td_sched_enqueue(&sched, &b->sched);
}

static void wait_remove(struct td_batch *b)
{
    td_sched_remove(&sched, &b->sched);
}

void td_batch_link(struct td_batch *b)
{
    b->anext = all_batches;
    if (all_batches)
        all_batches->aprev = b;
    all_batches = b;
}

static void complete(struct td_batch *b)
{
    json_t *messages = td_batch_messages(b);
    json_t *halt = json_null();
    for (size_t i = 0; i < b->ncalls; i++) {
        struct call *c = &b->calls[i];
        if (json_is_null(halt) && c->halt)
            halt = json_incref(c->halt);
    }
    if (b->cancelled) {
        json_decref(halt);
        halt = json_pack("{s:s}", "halted_reason", "cancelled");
    }
    td_batch_send_event(b, NULL, "batch_completed",
                        json_pack("{s:o,s:o}", "messages", messages, "halt", halt));
    td_logc(TD_LOG_DEBUG, b->id, NULL, "completed (%zu calls)", b->ncalls);
    td_bus_publish(&(struct td_bus_msg){.kind = TD_BUS_BATCH_DONE, .batch_id = b->id});
    b->owner.ops->done(b->owner.data, b);
    td_batch_free(b);
}

static void schedule(void);

static json_t *ms(uint64_t ns)
{
    return json_real((double)ns / 1e6);
}

/* The call's result is final: encode it, route it, emit its events.
 * halting: an error that halts the batch (by policy or decision). */
static void emit_done(struct call *c, json_t *result, bool halting, json_t *truncated,
                      const char *spill_path);

/* "spill": true: the full content also goes to a file for the client, written
 * in the threadpool (spill.c); the call's events wait for it. */
struct spill_wait {
    struct call *c;
    json_t *result, *truncated;
    bool halting;
};

static void spilled(void *data, const char *path)
{
    struct spill_wait *sw = data;
    emit_done(sw->c, sw->result, sw->halting, sw->truncated, path);
    free(sw);
}

/* text: result's content as call_done encoded it (taken), or NULL */
static void finish_call_encoded(struct call *c, json_t *result, bool halting, char *text,
                                size_t len)
{
    struct td_batch *b = c->b;
    json_t *truncated;
    size_t limit = td_cut_limit(b->r.max_content_bytes, c->tool ? c->tool->max_content_bytes : 0,
                                TD_CONTENT_BYTES_DEFAULT);
    char *full;
    size_t full_len = 0;
    c->content = td_content_make_encoded(result, text, len, limit, c->tool && c->tool->spill,
                                         &truncated, &full, &full_len);
    struct spill_wait *sw = full ? malloc(sizeof(*sw)) : NULL;
    if (sw) {
        *sw = (struct spill_wait){
            .c = c, .result = result, .truncated = truncated, .halting = halting};
        struct td_spill_owner *o =
            b->owner.ops->spills ? b->owner.ops->spills(b->owner.data) : NULL;
        if (td_spill_start(b->id, c->id, full, full_len, b->owner.cred.uid, o, spilled, sw) == 0)
            return;
        full = NULL; /* taken */
    }
    free(sw);
    free(full);
    emit_done(c, result, halting, truncated, NULL);
}

static void finish_call(struct call *c, json_t *result, bool halting)
{
    finish_call_encoded(c, result, halting, NULL, 0);
}

/* The call's events, its stats, and the batch moving on. */
static void emit_done(struct call *c, json_t *result, bool halting, json_t *truncated,
                      const char *spill_path)
{
    struct td_batch *b = c->b;
    c->state = CALL_DONE;
    int kind = te_result_kind_of(result);
    c->is_error = kind == TE_RESULT_ERROR || kind == TE_RESULT_TOOL_ERROR;

    json_t *done = json_pack("{s:s,s:s,s:O,s:o,s:o}", "id", c->id, "name", c->name, "result",
                             result, "duration_ms", ms(c->done_ns - c->started_ns), "queued_ms",
                             ms(c->started_ns - b->accepted_ns));
    if (done && c->have_ru) {
        /* the worker's resource use, from wait4() */
        json_object_set_new(
            done, "cpu_user_ms",
            json_integer((json_int_t)c->ru.ru_utime.tv_sec * 1000 + c->ru.ru_utime.tv_usec / 1000));
        json_object_set_new(
            done, "cpu_sys_ms",
            json_integer((json_int_t)c->ru.ru_stime.tv_sec * 1000 + c->ru.ru_stime.tv_usec / 1000));
        json_object_set_new(done, "max_rss_kb", json_integer(c->ru.ru_maxrss));
    }
    if (done && c->denied)
        json_object_update(done, c->denied);
    if (done && c->start)
        json_object_set_new(done, "start", json_string(c->start));
    if (done && c->enforced)
        json_object_set(done, "enforced", c->enforced);
    if (done && truncated && spill_path)
        json_object_set_new(truncated, "spill_path", json_string(spill_path));
    if (done && truncated)
        json_object_set_new(done, "truncated", truncated);
    else
        json_decref(truncated);
    json_incref(done); /* kept for the bus's CALL_DONE below */
    td_batch_send_event(b, c->name, "tool_execution_completed", done);
    switch (kind) {
    case TE_RESULT_ERROR:
    case TE_RESULT_TOOL_ERROR:
        if (halting) {
            c->halt =
                json_pack("{s:s,s:s}", "halted_reason", "tool_error", "halt_tool_call_id", c->id);
            td_batch_send_event(b, c->name, "tool_halt",
                                json_pack("{s:s,s:s,s:O,s:O}", "tool_call_id", c->id, "reason",
                                          "tool_error", "result", result, "content", c->content));
            break;
        }
        /* otherwise an error is just the call's content */
        __attribute__((fallthrough));
    case TE_RESULT_OK:
        td_batch_send_event(b, c->name, "tool_result_encoded",
                            json_pack("{s:s,s:O}", "id", c->id, "content", c->content));
        break;
    case TE_RESULT_ASK_USER: {
        json_t *q = json_object_get(result, "ask_user"), *opts = json_object_get(result, "opts");
        c->halt = json_pack("{s:s,s:O,s:s,s:O}", "halted_reason", "ask_user", "pending_question", q,
                            "pending_tool_call_id", c->id, "ask_user_opts", opts);
        td_batch_send_event(b, c->name, "ask_user_requested",
                            json_pack("{s:s,s:s,s:O,s:O}", "tool_call_id", c->id, "tool_name",
                                      c->name, "question", q, "opts", opts));
        break;
    }
    case TE_RESULT_HALT: {
        json_t *reason = json_object_get(result, "halt"), *v = json_object_get(result, "result");
        c->halt = json_pack("{s:O,s:s,s:O}", "halted_reason", reason, "halt_tool_call_id", c->id,
                            "halt_result", v);
        td_batch_send_event(b, c->name, "tool_halt",
                            json_pack("{s:s,s:O,s:O,s:O}", "tool_call_id", c->id, "reason", reason,
                                      "result", v, "content", c->content));
        break;
    }
    default:
        break;
    }
    td_bus_publish(&(struct td_bus_msg){.kind = TD_BUS_CALL_DONE,
                                        .json = result,
                                        .batch_id = b->id,
                                        .tool = c->name,
                                        .uid = b->owner.cred.uid,
                                        .us = (c->done_ns - c->started_ns) / 1000,
                                        .call_id = c->id,
                                        .cred = &b->owner.cred,
                                        .subject = b->r.subject,
                                        .arguments = c->arguments,
                                        .completed = done});
    json_decref(done);
    json_decref(result);
    if (!td_big_of(c->content)) { /* the events that name it hold their own */
        td_big_unref(c->big);
        c->big = NULL;
    }
    b->done++;
    td_batch_pump(b);
}

/* A decision turned into the call's final result; NULL result: halt. */
static void apply_route(struct call *c, json_t *result, enum td_route route, const json_t *with)
{
    switch (route) {
    case TD_ROUTE_REPLACE:
        json_decref(result);
        finish_call(c, json_pack("{s:O}", "ok", with), false);
        break;
    case TD_ROUTE_HALT:
        finish_call(c, result, true);
        break;
    default:
        finish_call(c, result, false);
        break;
    }
}

static void apply_decision(struct call *c, json_t *result, const json_t *decision)
{
    const json_t *with = NULL;
    enum td_route route = td_policy_decision(decision, &with);
    apply_route(c, result, route, with);
}

static void ask_free(struct call *c);

/* No usable decision (a wrong shape, or none before the call's timeout):
 * the batch halts with an invalid_return that says so. */
static void decision_invalid(struct call *c, const char *why, const json_t *given)
{
    json_decref(c->awaiting);
    c->awaiting = NULL;
    ask_free(c);
    finish_call(c,
                te_tool_error_new(TE_INVALID_RETURN, c->name, c->id, why,
                                  json_pack("{s:O?}", "decision", given),
                                  json_pack("{s:b}", "on_tool_error_invalid", 1)),
                true);
}

static void on_decision_timeout(uv_timer_t *t)
{
    struct call *c = t->data;
    decision_invalid(c, "no on_tool_error decision before the call's timeout", NULL);
}

static void ask_closed(uv_handle_t *h)
{
    free(h);
}

static void ask_free(struct call *c)
{
    if (c->ask_timer) {
        uv_close((uv_handle_t *)c->ask_timer, ask_closed);
        c->ask_timer = NULL;
    }
}

/* on_tool_error "ask": the batch's client decides; the call's timeout keeps
 * running meanwhile. */
static void ask_client(struct call *c, json_t *result)
{
    struct td_batch *b = c->b;
    uint64_t deadline = c->started_ns + c->timeout_ms * 1000000ULL;
    uint64_t left_ms = deadline > c->done_ns ? (deadline - c->done_ns) / 1000000ULL : 0;
    c->awaiting = result;
    c->ask_timer = malloc(sizeof(*c->ask_timer));
    if (!c->ask_timer) {
        decision_invalid(c, "out of memory waiting for a decision", NULL);
        return;
    }
    uv_timer_init(td_loop, c->ask_timer);
    c->ask_timer->data = c;
    uv_timer_start(c->ask_timer, on_decision_timeout, left_ms, 0);
    td_batch_send_event(b, c->name, "tool_error_decision_requested",
                        json_pack("{s:s,s:O}", "id", c->id, "error", result));
}

int td_batch_decide(struct td_batch *b, const char *call_id, json_t *decision, char *err,
                    size_t errlen)
{
    struct call *c = NULL;
    for (size_t i = 0; i < b->ncalls && !c; i++)
        if (strcmp(b->calls[i].id, call_id) == 0)
            c = &b->calls[i];
    if (!c || !c->awaiting) {
        snprintf(err, errlen, "id: no decision is pending for call \"%.64s\" of batch \"%.64s\"",
                 call_id, b->id);
        return -ENOENT;
    }
    json_t *result = c->awaiting;
    /* "continue" too: what toolexec's [c]ontinue sends, and what
     * on_tool_error itself takes; the error stands and the batch goes on. */
    if (te_decision_check(decision) < 0) {
        decision_invalid(c,
                         "the on_tool_error decision is not \"continue\", \"halt\" or "
                         "{\"continue_with\": v}",
                         decision);
        return 0;
    }
    c->awaiting = NULL;
    ask_free(c);
    apply_decision(c, result, decision);
    return 0;
}

/* A call's result is known: encode it (failing that, encoding_failed), and
 * decide what an error means under the batch's on_tool_error. */
static void call_done(void *data, json_t *result, const struct td_call_facts *f)
{
    const struct rusage *ru = f ? f->ru : NULL;
    struct call *c = data;
    struct td_batch *b = c->b;
    c->done_ns = uv_hrtime();
    c->big = f ? f->big : NULL;
    c->worker = NULL;
    c->icall = NULL;
    result = td_declare_check_output(c->tool, c->id, result);
    if (ru) {
        c->ru = *ru;
        c->have_ru = true;
    }
    c->denied = td_denials_fields(f ? f->denied : NULL);
    if (f && f->denied && f->denied->learn) { /* learn mode: this call's proposal */
        json_t *p = td_learndef_propose(c->tool, f->denied->learn);
        if (p && (c->denied || (c->denied = json_object())))
            json_object_set(c->denied, "learned", p);
        json_decref(p);
    }
    if (f && c->tool && !c->enforced)
        c->enforced = td_enforced_call(c->tool, f->uid);
    char *text; /* its content, encoded once: for finish_call too */
    size_t len = 0;
    int rc = td_content_check_keep(result, td_cfg.max_content, &text, &len);
    if (rc < 0) {
        char detail[128];
        snprintf(detail, sizeof(detail), "content exceeds the limit of %zu bytes",
                 td_cfg.max_content);
        json_decref(result);
        result =
            te_tool_error_new(TE_ENCODING_FAILED, c->name, c->id,
                              rc == -E2BIG ? detail : "content could not be encoded",
                              json_pack("{s:I}", "limit", (json_int_t)td_cfg.max_content), NULL);
    }
    /* the worker is done: its slot and the batch's concurrency are free */
    bool freed_slot = c->slot;
    c->slot = false;
    if (freed_slot) {
        td_sched_release(&sched, &b->sched);
    }
    b->running--;

    const json_t *with = NULL;
    enum td_route route =
        td_policy_route(b->r.policy, b->r.policy_map, b->cancelled, result, &with);
    if (route == TD_ROUTE_CONTINUE || route == TD_ROUTE_HALT) { /* the result as it is */
        finish_call_encoded(c, result, route == TD_ROUTE_HALT, text, len);
        text = NULL;
    } else if (route == TD_ROUTE_ASK) {
        ask_client(c, result);
        td_batch_pump(b);
    } else {
        apply_route(c, result, route, with);
    }
    free(text);
    if (freed_slot)
        schedule();
}

/* Arguments checked against the tool's schema before any fork: violations
 * are a handler-style error naming each with its JSON pointer. */
static json_t *check_arguments(struct call *c)
{
    if (!c->tool->validator || !json_is_object(c->arguments))
        return NULL;
    char *errors = NULL;
    int n = te_schema_validate(c->tool->validator, c->arguments, &errors);
    json_t *result = NULL;
    if (n > 0 && errors) {
        size_t len = strlen(errors) + 32;
        char *msg = malloc(len);
        if (msg) {
            snprintf(msg, len, "invalid arguments: %s", errors);
            result = json_pack("{s:o}", "error", td_json_text(msg, strlen(msg)));
            free(msg);
        }
    }
    free(errors);
    return result;
}

/* "unknown_tool": "error": a call of a tool the daemon does not have ends
 * at once with a not_found tool error of its own; no worker runs. */
static void start_unknown(struct td_batch *b, struct call *c)
{
    c->state = CALL_RUNNING;
    b->running++;
    td_batch_send_event(
        b, c->name, "tool_execution_started",
        json_pack("{s:s,s:s,s:O}", "id", c->id, "name", c->name, "arguments", c->arguments));
    char msg[96 + 2 * TE_TOOL_NAME_MAX];
    snprintf(msg, sizeof(msg), "no tool named %.*s", 2 * TE_TOOL_NAME_MAX, c->name);
    call_done(c,
              te_tool_error_new(TE_NOT_FOUND, c->name, c->id, msg, NULL,
                                json_pack("{s:b}", "unknown_tool", 1)),
              NULL);
}

/* A progress frame of a running call: an event between its started and
 * completed. */
static void call_progress(void *data, const json_t *progress)
{
    struct call *c = data;
    td_batch_send_event(
        c->b, c->name, "tool_execution_progress",
        json_pack("{s:s,s:s,s:O}", "id", c->id, "name", c->name, "progress", progress));
}

static void start_call(struct td_batch *b, struct call *c)
{
    c->started_ns = uv_hrtime();
    c->timeout_ms = b->r.tool_timeout_given ? b->r.tool_timeout_ms : td_cfg.tool_timeout_ms;
    if (!c->tool && !json_object_get(json_array_get(b->r.calls, c->index), TE_CUSTOM_CALL)) {
        start_unknown(b, c);
        return;
    }
    /* The tool's timeout_ms caps the batch's tool_timeout, and replaces the
     * daemon's default when the client set none: a default nobody asked
     * for must not cut a tool declared to take longer. */
    if (c->tool && c->tool->timeout_ms &&
        (c->tool->timeout_ms < c->timeout_ms || !b->r.tool_timeout_given))
        c->timeout_ms = c->tool->timeout_ms;
    if (c->policy_timeout_ms && c->policy_timeout_ms < c->timeout_ms)
        c->timeout_ms = c->policy_timeout_ms;
    if (c->tool && c->tool->coerce && c->tool->validator && json_is_object(c->arguments))
        te_schema_coerce(c->tool->validator, c->arguments);
    c->state = CALL_RUNNING;
    b->running++;
    td_batch_send_event(
        b, c->name, "tool_execution_started",
        json_pack("{s:s,s:s,s:O}", "id", c->id, "name", c->name, "arguments", c->arguments));
    json_t *result = NULL;
    json_t *bad_args = json_object_get(json_array_get(b->r.calls, c->index), TE_ARGUMENTS_ERROR);
    if (bad_args) {
        /* a handler-style error the model can act on; no worker runs */
        result = json_pack("{s:O}", "error", bad_args);
    } else if (!c->tool->argv) {
        result = te_tool_error_new(TE_NOT_FOUND, c->name, c->id,
                                   "tool has no command (manual mode)", NULL, NULL);
    } else if ((result = check_arguments(c))) {
        /* runs no worker */
    } else {
        /* the tool's own name, not the alias a call may name it by
         * (fs_read for fs.read): a program serving several tools, or a
         * warm server's template serving all its tools, goes by it */
        json_t *req = json_pack("{s:s,s:O}", "tool", c->tool->name, "arguments", c->arguments);
        if (c->tool->context)
            json_object_set_new(req, "opts",
                                json_pack("{s:O,s:O,s:O,s:{s:s,s:s,s:O},s:O}", "context",
                                          b->r.context, "session_id", b->r.session_id, "request_id",
                                          b->r.request_id, "tool_call", "id", c->id, "name",
                                          c->name, "arguments", c->arguments, "engine",
                                          b->r.engine));
        uint64_t timeout = c->timeout_ms;
        struct td_worker_spec spec = {.tool = c->tool,
                                      .batch_id = b->id,
                                      .call_id = c->id,
                                      .request = req,
                                      .timeout_ms = timeout,
                                      .progress = call_progress,
                                      .start = &c->start};
        if (td_instance_wanted(c->tool))
            c->icall = td_instance_call(&b->instances, &spec, call_done, c, &result);
        else
            c->worker = td_worker_start(&spec, call_done, c, &result);
        if (c->worker && b->throttled)
            td_worker_throttle(c->worker, true);
        json_decref(req);
    }
    if (result)
        call_done(c, result, NULL);
}

/* Start queued calls while the batch's concurrency and the daemon's worker
 * slots allow, at most max_starts of them. Re-entrant calls (a call that
 * completes while being started) return at once; the outermost loop does
 * the work, so the stack never grows with the batch. from_queue: this batch
 * has its turn; otherwise it may not overtake batches already waiting.
 * Returns false when the batch completed (it is freed then). */
static bool pump_n(struct td_batch *b, size_t max_starts, bool from_queue)
{
    if (b->pumping)
        return true;
    b->pumping = true;
    size_t started = 0;
    while (b->next < b->ncalls && b->running < b->max_concurrency && started < max_starts) {
        struct call *c = &b->calls[b->next];
        if (c->tool && c->tool->argv &&
            !json_object_get(json_array_get(b->r.calls, c->index), TE_ARGUMENTS_ERROR)) {
            if (!td_sched_may_start(&sched, td_cfg.max_workers, from_queue)) {
                wait_enqueue(b);
                break;
            }
            td_sched_take(&sched, &b->sched);
            c->slot = true;
        }
        b->next++;
        started++;
        start_call(b, c);
    }
    b->pumping = false;
    if (b->done == b->ncalls) {
        complete(b);
        return false;
    }
    if (started == max_starts && b->next < b->ncalls && b->running < b->max_concurrency)
        wait_enqueue(b); /* more to start: back of the queue */
    return true;
}

void td_batch_pump(struct td_batch *b)
{
    pump_n(b, SIZE_MAX, false);
}

/* Hand free worker slots to waiting batches, one call each in turn. */

/* While a client's batches are cancelled one by one, a slot freed by one
 * is not handed to the next of them, only to spawn a worker to kill. */
static unsigned schedule_held;

void td_batch_hold(bool hold)
{
    if (hold) {
        schedule_held++;
    } else if (--schedule_held == 0) {
        schedule();
    }
}

static void schedule(void)
{
    static bool active;
    if (active || schedule_held)
        return;
    active = true;
    struct td_sched_entry *e;
    while ((e = td_sched_next(&sched, td_cfg.max_workers)))
        pump_n(batch_of(e), 1, true);
    active = false;
}

unsigned td_batch_running(void)
{
    return sched.used;
}

unsigned td_batch_queued(void)
{
    unsigned n = 0;
    struct td_sched_entry *e;
    TAILQ_FOREACH(e, &sched.waiting, wlink)
        n += (unsigned)(batch_of(e)->ncalls - batch_of(e)->next);
    return n;
}

void td_batch_each_call(void (*fn)(void *data, const char *tool, bool running), void *data)
{
    for (struct td_batch *b = all_batches; b; b = b->anext)
        for (size_t i = 0; i < b->ncalls; i++) {
            const struct call *c = &b->calls[i];
            const char *tool = c->tool ? c->tool->name : c->name;
            /* as td_batch_running() and td_batch_queued() count them */
            if (c->slot)
                fn(data, tool, true);
            else if (b->sched.waiting && i >= b->next)
                fn(data, tool, false);
        }
}

static json_t *cancelled_error(struct call *c)
{
    return te_tool_error_new(TE_HANDLER_EXIT, c->name, c->id, "cancelled",
                             json_pack("{s:b}", "cancelled", 1), NULL);
}

/* Queued calls of cancelled batches are settled a slice at a time from an
 * idle handle, so a client that leaves with thousands of calls queued does
 * not hold the loop: each costs ~4 us (a content encoding), 1.5 M of them
 * took 6.5 s in one callback. */
#define SETTLE_SLICE 256
static TAILQ_HEAD(, td_batch) settling = TAILQ_HEAD_INITIALIZER(settling);
static uv_idle_t *settle_idle;

static void settle_remove(struct td_batch *b)
{
    if (!b->settling)
        return;
    TAILQ_REMOVE(&settling, b, settle_link);
    b->settling = false;
}

/* Queued calls never start; they keep a message, without events. */
static void settle_call(struct td_batch *b, struct call *c)
{
    json_t *err = cancelled_error(c);
    size_t len;
    int rc;
    char *text = te_content_encode(err, SIZE_MAX, &len, &rc);
    c->content = td_json_text(text ? text : "", text ? len : 0);
    free(text);
    json_decref(err);
    c->state = CALL_DONE;
    b->done++;
}

static void on_settle_closed(uv_handle_t *h)
{
    free(h);
}

static void on_settle(uv_idle_t *h)
{
    size_t budget = SETTLE_SLICE;
    while (!TAILQ_EMPTY(&settling) && budget) {
        struct td_batch *b = TAILQ_FIRST(&settling);
        for (; budget && b->settle_from < b->ncalls; budget--)
            settle_call(b, &b->calls[b->settle_from++]);
        if (b->settle_from == b->ncalls) {
            settle_remove(b);
            td_batch_pump(b); /* may complete and free it */
        }
    }
    if (TAILQ_EMPTY(&settling)) {
        uv_close((uv_handle_t *)h, on_settle_closed);
        settle_idle = NULL;
    }
}

static void settle_later(struct td_batch *b)
{
    if (!settle_idle) {
        settle_idle = malloc(sizeof(*settle_idle));
        if (!settle_idle || uv_idle_init(td_loop, settle_idle) < 0) {
            free(settle_idle);
            settle_idle = NULL;
            /* no handle: settle now rather than never */
            while (b->settle_from < b->ncalls)
                settle_call(b, &b->calls[b->settle_from++]);
            return;
        }
        uv_idle_start(settle_idle, on_settle);
    }
    b->settling = true;
    TAILQ_INSERT_TAIL(&settling, b, settle_link);
}

void td_batch_cancel(struct td_batch *b)
{
    if (b->cancelled)
        return;
    b->cancelled = true;
    td_logc(TD_LOG_INFO, b->id, NULL, "cancelled (%zu running, %zu queued)", b->running,
            b->ncalls - b->next);
    /* Hold completion until every call is settled: call_done() runs
     * synchronously for each cancelled worker. */
    b->pumping = true;
    wait_remove(b);
    b->settle_from = b->next;
    b->next = b->ncalls;
    if (b->ncalls - b->settle_from <= SETTLE_SLICE) {
        while (b->settle_from < b->ncalls)
            settle_call(b, &b->calls[b->settle_from++]);
    } else {
        settle_later(b);
    }
    for (size_t i = 0; i < b->ncalls; i++) {
        struct call *c = &b->calls[i];
        if (c->state == CALL_RUNNING && c->worker) {
            td_worker_cancel(c->worker);
        } else if (c->state == CALL_RUNNING && c->icall) {
            td_instance_cancel(c->icall);
        } else if (c->awaiting) {
            /* no decision will come: the call ends cancelled */
            json_decref(c->awaiting);
            c->awaiting = NULL;
            ask_free(c);
            finish_call(c, cancelled_error(c), false);
        }
    }
    b->pumping = false;
    td_batch_pump(b);
}

void td_batch_throttle(struct td_batch *b, bool pause)
{
    b->throttled = pause;
    for (size_t i = 0; i < b->ncalls; i++)
        if (b->calls[i].state == CALL_RUNNING && b->calls[i].worker)
            td_worker_throttle(b->calls[i].worker, pause);
}

void td_batch_free(struct td_batch *b)
{
    wait_remove(b);
    settle_remove(b);
    b->owner.ops->release(b->owner.data, b->bucket, b->ncalls);
    if (b->aprev)
        b->aprev->anext = b->anext;
    else if (all_batches == b)
        all_batches = b->anext;
    if (b->anext)
        b->anext->aprev = b->aprev;
    /* its instances gone with it, whatever they were serving */
    td_instances_close(&b->instances);
    for (size_t i = 0; i < b->ncalls; i++) {
        struct call *c = &b->calls[i];
        if (c->worker)
            td_worker_abandon(c->worker);
        td_tool_unref(c->tool);
        json_decref(c->awaiting);
        ask_free(c);
        json_decref(c->content);
        td_big_unref(c->big);
        json_decref(c->halt);
        json_decref(c->denied);
        json_decref(c->enforced);
    }
    json_decref(b->req);
    free(b->calls);
    free(b->id);
    free(b);
}
