/*
 * worker.c - one tool call's process, seen from the loop: its three pipes,
 * its timer and its exit. This is the executor: whatever the worker does, it
 * ends as exactly one result object handed to the owner's callback, either
 * one of the handler's five results or a tool error from the closed set.
 *
 * A call's result is known at the first of:
 *   - a complete response frame on stdout (framed protocol),
 *   - the worker's exit (its stdout is then drained: everything it wrote is
 *     already in the pipe),
 *   - its timer,
 *   - an output limit (a frame header announcing too much, plain stdout
 *     growing past the cap).
 * At that moment the worker's process group is killed: no process of a call
 * outlives the call. The worker object itself lives on until the pid is
 * reaped and every handle is closed.
 *
 * Its parts (worker_int.h), each calling only those below it:
 *   worker_start.c   starting it: cold (here or through the spawner), warm
 *                    (the template forks it); its environment, its request
 *   worker_exit.c    its process's end: reaped, its init's report, its timer
 *   worker_output.c  what it writes: frames, plain stdout, stderr
 *   worker.c         its result: decided at its exit, finished, delivered;
 *                    its processes killed; the worker freed
 *   worker_state.c   its lifetime: one table of states and events, which
 *                    the others ask rather than flags
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bigres.h"
#include "bus.h"
#include "calldir.h"
#include "cgroup.h"
#include "exitcause.h"
#include "fswatch.h"
#include "identity.h"
#include "log.h"
#include "proxy.h"
#include "registry.h"
#include "sandbox.h"
#include "learn.h"
#include "sysnotify.h"
#include "template.h"
#include "toolexec.h"
#include "util.h"
#include "worker.h"
#include "worker_int.h"

/* A killed worker is normally reaped within a millisecond; past this, its
 * result goes out without its resource use. */
#define REAP_WAIT_MS 1000
/* An MCP server's bridge told of its call's cancel or timeout (td_worker_
 * finish) is killed if it has not ended this long after. The result does
 * not wait for it on a cancel; on a timeout it waits this at most. */
#define MCP_CANCEL_GRACE_MS 1000

/* Workers alive; nothing walks them (the reaper finds a worker by its pid,
 * its batch holds it), so a count is all that is kept. */
static unsigned nworkers;
static void (*worker_gone_cb)(void);

unsigned td_workers_alive(void)
{
    return nworkers;
}

void td_worker_counted(void)
{
    nworkers++;
}

void td_worker_on_gone(void (*cb)(void))
{
    worker_gone_cb = cb;
}

/* ---- freeing -------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h)
{
    struct td_worker *w = h->data;
    if (--w->handles > 0)
        return;
    if (w->discarded)
        td_logc(TD_LOG_INFO, w->batch_id, w->call_id,
                "discarded %zu bytes written after the result", w->discarded);
    if (w->workdir)
        td_calldir_remove_async(w->workdir);
    nworkers--;
    te_frame_decoder_free(&w->dec);
    td_tool_unref(w->tool);
    td_plain_free(&w->plain);
    td_big_unref(w->big);
    free(w->reqbody);
    td_sysnotify_stop(w->sysn);
    td_denials_clear(&w->denied);
    td_learn_free(w->denied.learn);
    free(w->batch_id);
    free(w->call_id);
    free(w->warm_why);
    if (w->via_spawner && w->pidfd >= 0)
        close(w->pidfd);
    free(w);
    if (worker_gone_cb)
        worker_gone_cb();
}

void td_worker_close_handle(struct td_worker *w, uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, on_handle_closed);
}

/* Free once the result is delivered and the process reaped. */
void td_worker_maybe_free(struct td_worker *w)
{
    if (w->state != TD_W_DONE || w->pending)
        return;
    td_worker_step(w, TD_WE_CLOSE);
    /* Reaped: with a PID namespace, the kernel has ended every process of
     * the call before its init could be; the uid is free. (Without one, a
     * stray may keep it: the pool's order keeps it from the next calls.) */
    if (w->call_uid != (uid_t)-1)
        td_identity_give(w->call_uid);
    w->call_uid = (uid_t)-1;
    /* its cgroup may serve the next call at once, in this same loop turn */
    td_cgroup_release(w->cg);
    w->cg = NULL;
    if (w->expolling)
        td_worker_close_handle(w, (uv_handle_t *)&w->expoll);
    if (w->exfd >= 0)
        close(w->exfd);
    w->exfd = -1;
    if (w->warm) { /* its directory is in the template's: removed there */
        td_template_call_end(w->warm);
        free(w->workdir);
        w->workdir = NULL;
    }
    w->warm = NULL;
    td_worker_close_handle(w, (uv_handle_t *)&w->in);
    td_worker_close_handle(w, (uv_handle_t *)&w->out);
    td_worker_close_handle(w, (uv_handle_t *)&w->err);
    td_worker_close_handle(w, (uv_handle_t *)&w->timer);
}

/* ---- results -------------------------------------------------------------- */

void td_worker_kill_group(struct td_worker *w)
{
    bool reaped = td_wstate_reaped(w->state);
    /* Warm: the call's PID 1 (lib/warmp1.c); its end takes the namespace's
     * every process with it. Not forked yet: killed as it comes (the state
     * it is in says a kill was asked: on_spawned(), on_warm_forked()). */
    if (w->warm || w->via_spawner || w->pidfd >= 0) {
        if (w->pidfd >= 0 && !reaped)
            syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
        return;
    }
    /* The pgid cannot be reused while any member lives; once the leader is
     * reaped we kill only from the reaper's callback, before any new fork
     * (td_worker_on_reaped), never later. */
    if (!td_wstate_pid_gone(w->state) && kill(-w->pid, SIGKILL) < 0 && errno != ESRCH)
        td_logc(TD_LOG_WARN, w->batch_id, w->call_id, "kill(-%d): %s", (int)w->pid,
                strerror(errno));
    /* With a cgroup, everything else the call started: once the leader is
     * reaped (its group is dying by then, and in a PID namespace all of it
     * is gone, so mostly nothing is left to kill: see td_cgroup_dir_fd()),
     * or at once for a cancel, whose result goes out before the reaping. */
    if (reaped || w->cancelled)
        td_cgroup_kill(w->cg);
}

/* Its file-system refusals (fswatch.c), by the uid of its own it ran as:
 * a cold call's (call_uid) or a warm call's (lent to its PID 1). */
static void fs_denials(struct td_worker *w)
{
    uid_t uid = w->call_uid;
    if (uid == (uid_t)-1 && w->run_uid >= 0 && td_identity_in_range((uid_t)w->run_uid))
        uid = (uid_t)w->run_uid;
    if (uid != (uid_t)-1)
        td_fswatch_collect(uid, &w->denied, w->tool->fs, w->tool->argv ? w->tool->argv[0] : NULL);
}

/* Hand the result over, with the worker's resource use when it is known. */
void td_worker_deliver(struct td_worker *w, json_t *result, const struct rusage *ru)
{
    td_result_cb cb = w->cb;
    w->cb = NULL;
    w->pending = NULL;
    /* the call's processes are gone (or dying: a cancel): its list of
     * denials is complete */
    td_sysnotify_stop(w->sysn);
    w->sysn = NULL;
    if (w->warm) /* its template's listener notes no more for it */
        td_template_call_denials(w->warm, NULL);
    fs_denials(w);
    /* learn mode: the tool's record of all its calls gains this one's,
     * with what was refused ("learn": "refused" records nothing else:
     * its record is made now that the call's processes are gone, so no
     * listener lets anything through for it) */
    if (w->tool->learn_refused && !w->denied.learn)
        w->denied.learn = td_learn_new();
    td_learn_refusals(w->denied.learn, w->denied.list);
    td_learn_merge(w->tool->learned, w->denied.learn);
    if (w->denied.list)
        td_bus_publish(&(struct td_bus_msg){.kind = TD_BUS_DENIED,
                                            .json = w->denied.list,
                                            .tool = w->tool->name,
                                            .us = w->denied.more});
    struct td_big *big = w->big;
    w->big = NULL;
    if (cb)
        cb(w->cb_data, result,
           &(struct td_call_facts){.ru = ru, .denied = &w->denied, .big = big, .uid = w->run_uid});
    else {
        json_decref(result);
        td_big_unref(big);
    }
    td_worker_maybe_free(w);
}

static void on_reap_late(uv_timer_t *t)
{
    struct td_worker *w = t->data;
    td_logc(TD_LOG_WARN, w->batch_id, w->call_id,
            "worker %d not reaped %d ms after SIGKILL; reporting without its resource use",
            (int)w->pid, REAP_WAIT_MS);
    td_worker_kill_group(w);
    td_worker_deliver(w, w->pending, NULL);
}

/* A warm call whose result and end came before its template's "forked"
 * message (its pipes are read before the template's socket): the record's
 * uid comes with that message (td_worker_forked_late), at the latest this
 * long after; then it goes without. */
static void on_fork_late(uv_timer_t *t)
{
    struct td_worker *w = t->data;
    td_worker_deliver(w, w->pending, &w->ru);
}

bool td_worker_hold_for_forked(struct td_worker *w)
{
    if (!w->warm || w->pidfd >= 0 || w->run_uid >= 0)
        return false;
    uv_timer_start(&w->timer, on_fork_late, REAP_WAIT_MS, 0);
    return true;
}

void td_worker_forked_late(struct td_worker *w)
{
    if (w->pending && td_wstate_gone(w->state)) {
        uv_timer_stop(&w->timer);
        td_worker_deliver(w, w->pending, &w->ru);
    }
}

/* Under an init only the tool is signalled (killed, or told first): the
 * init reaps it and reports its resource use, then its exit ends the
 * namespace. A warm call's PID 1 (lib/warmp1.c) is such an init too, known
 * by its pidfd. An init known only by its pid is not looked at once it is
 * reaped: its pid may be another process's by then, and so its "child".
 * False where the tool cannot be reached so (the caller kills the group). */
static bool signal_tool(struct td_worker *w, int sig)
{
    return w->pidfd >= 0 && (w->init || w->warm)
               ? td_sandbox_kill_tool_pidfd(w->pidfd, w->pidfd_pid, sig) == 0
           : w->init && !w->via_spawner && !td_wstate_pid_gone(w->state)
               ? td_sandbox_kill_tool(w->pid, sig) == 0
               : false;
}

/* The bridge told of its cancel has not ended: it is killed as any tool
 * (a cancelled call's whole group, a timed-out one's tool). The bridge
 * waits at most half this for its server's answer, so this is a bridge
 * that did not give up as it should: said at info. */
static void on_grace_over(uv_timer_t *t)
{
    struct td_worker *w = t->data;
    td_logc(TD_LOG_INFO, w->batch_id, w->call_id,
            "its MCP bridge had not ended %d ms after it was told; killed", MCP_CANCEL_GRACE_MS);
    if (w->cancelled || !signal_tool(w, SIGKILL))
        td_worker_kill_group(w);
    if (w->pending)
        uv_timer_start(&w->timer, on_reap_late, REAP_WAIT_MS, 0);
}

void td_worker_finish(struct td_worker *w, json_t *result)
{
    if (td_wstate_has_result(w->state)) {
        json_decref(result);
        return;
    }
    td_worker_step(w, TD_WE_RESULT);
    /* its proxy connections end with it, and so do its denials */
    td_proxy_stop(w->egress);
    w->egress = NULL;
    uv_timer_stop(&w->timer);
    uv_read_stop((uv_stream_t *)&w->out);
    if (td_wstate_gone(w->state)) { /* reaped, or its init said so */
        w->pending = result;
        if (!td_worker_hold_for_forked(w))
            td_worker_deliver(w, result, &w->ru);
        return;
    }
    /* An MCP server's call cancelled or timed out: its bridge is told
     * first (SIGTERM: cancelled, SIGUSR2: timed out) and tells the server
     * (notifications/cancelled, then a ping whose answer says it was read:
     * mcpbridge/bridge.c), then exits, and the init ends what is left. */
    bool polite = w->tool->mcp_tool && (w->cancelled || w->timed_out) &&
                  signal_tool(w, w->cancelled ? SIGTERM : SIGUSR2);
    bool tool_killed = polite || (!w->cancelled && signal_tool(w, SIGKILL));
    if (!tool_killed)
        td_worker_kill_group(w);
    if (w->cancelled) {
        /* a cancel completes at once (its batch may be gone next) */
        if (polite)
            uv_timer_start(&w->timer, on_grace_over, MCP_CANCEL_GRACE_MS, 0);
        td_worker_deliver(w, result, NULL);
        return;
    }
    /* Report once it is reaped: the result then carries the worker's CPU
     * time and peak memory from wait4(). */
    w->pending = result;
    uv_timer_start(&w->timer, polite ? on_grace_over : on_reap_late,
                   polite ? MCP_CANCEL_GRACE_MS : REAP_WAIT_MS, 0);
}

json_t *td_worker_stderr_tail(struct td_worker *w)
{
    return td_json_text(w->tail, w->tail_len);
}

void td_worker_fail(struct td_worker *w, te_reason reason, const char *detail, json_t *cause,
                    json_t *metadata)
{
    td_worker_finish(w,
                     te_tool_error_new(reason, w->tool->name, w->call_id, detail, cause, metadata));
}

/* A length prefix that is printable text ("Hell" is 1214606444 bytes) is
 * not a frame: the tool printed text, as a plain tool would. Says so, and
 * returns true, when the first bytes of stdout are all text. */
bool td_worker_not_a_frame(struct td_worker *w)
{
    size_t n = w->head_len;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n && i < TE_FRAME_HEADER_LEN; i++) {
        unsigned char ch = (unsigned char)w->head[i];
        if (!((ch >= 0x20 && ch < 0x7f) || ch == '\t' || ch == '\n' || ch == '\r'))
            return false;
    }
    td_worker_fail(w, TE_INVALID_RETURN,
                   "the worker wrote text where a frame was expected; is this a plain tool? "
                   "(\"protocol\": \"plain\" in its definition)",
                   json_pack("{s:o,s:o}", "not_a_frame", td_json_text(w->head, n), "stderr",
                             td_worker_stderr_tail(w)),
                   NULL);
    return true;
}

/* What the tool needs and its view hides (toolpaths.c): why a
 * call that could not run its command, or ended with an error status,
 * most likely failed; "" when nothing */
static const char *view_note(const struct td_worker *w)
{
    return w->tool->view_note ? w->tool->view_note : "";
}

static json_t *with_view(const struct td_worker *w, json_t *cause)
{
    if (cause && w->tool->view_note)
        json_object_set_new(cause, "view", json_string(w->tool->view_note));
    return cause;
}

/* detail with the end of the worker's stderr (at most TD_STDERR_MODEL
 * bytes, from a character's start) in buf: why a tool failed is usually
 * its last words there, and the message is what the model reads. detail
 * itself when there is none, or its definition says "stderr_to_model":
 * false. te_tool_error_new() repairs what is not UTF-8. */
static const char *with_stderr(const struct td_worker *w, const char *detail, char *buf, size_t len)
{
    size_t n = w->tail_len < TD_STDERR_MODEL ? w->tail_len : TD_STDERR_MODEL;
    const char *p = w->tail + w->tail_len - n;
    while (n && ((unsigned char)*p & 0xc0) == 0x80) {
        p++;
        n--;
    }
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    if (!n || w->tool->stderr_hidden)
        return detail;
    int k = snprintf(buf, len, "%s; its stderr ends: ", detail);
    if (k < 0 || (size_t)k >= len)
        return detail;
    char *q = buf + k;
    /* a NUL would end the message there */
    for (size_t i = 0; i < n && q < buf + len - 1; i++)
        *q++ = p[i] ? p[i] : ' ';
    *q = '\0';
    return buf;
}

/* The worker exited before its result was known: decide what it means. */
void td_worker_decide_on_exit(struct td_worker *w)
{
    char detail[2048];
    /* as a spawn that failed at once (worker_start.c's spawn_error()) */
    if (w->warm_why && w->spawn_failed) {
        snprintf(detail, sizeof(detail), "could not start the worker: %s", w->warm_why);
        td_worker_fail(w, TE_HANDLER_EXIT, detail, json_pack("{s:s}", "spawn_error", w->warm_why),
                       NULL);
        return;
    }
    if (w->warm_why) {
        td_worker_fail(w, TE_HANDLER_EXIT, w->warm_why,
                       json_pack("{s:s,s:o}", w->warm ? "warm_error" : "spawner_error", w->warm_why,
                                 "stderr", td_worker_stderr_tail(w)),
                       NULL);
        return;
    }
    struct td_report rep = w->rep;
    if (rep.failed) {
        if (strcmp(rep.step, "exec") == 0)
            snprintf(detail, sizeof(detail), "could not execute %s: %s%s%s", w->tool->argv[0],
                     strerror(rep.err), w->tool->view_note ? "; " : "", view_note(w));
        else
            snprintf(detail, sizeof(detail), "could not set up the worker: %s: %s", rep.step,
                     strerror(rep.err));
        td_worker_fail(w, TE_HANDLER_EXIT, detail,
                       with_view(w, json_pack("{s:s,s:o}", "exec_error", strerror(rep.err),
                                              "stderr", td_worker_stderr_tail(w))),
                       NULL);
        return;
    }
    /* Under an init, the tool's own status is what counts. */
    if (rep.have_status)
        w->status = rep.status;
    struct td_exit e;
    td_exit_decide(w->status, &w->ru, w->limits.cpu_ms, w->tool->protocol == TD_PROTO_FRAMED, &e);
    /* A limit the call met, seen from here, read only once it failed (a
     * plain tool's status 0 is its result): in cause.resource_limit and the detail */
    bool failed = !(w->tool->protocol == TD_PROTO_PLAIN && !e.signaled && e.code == 0);
    struct td_exit_limit lim;
    long long ooms = failed && w->cg_memory ? td_cgroup_oom_kills(w->cg) : 0;
    bool met =
        failed &&
        td_exit_limit(&e,
                      &(struct td_exit_seen){
                          .memory_mb = w->limits.memory_mb,
                          .processes = w->limits.processes,
                          .file_size_mb = w->limits.file_size_mb,
                          .cpu_ms = w->limits.cpu_ms,
                          .oom_kills = ooms,
                          .pids_refusals = w->limits.processes ? td_cgroup_pids_refusals(w->cg) : 0,
                      },
                      &lim);
    json_t *limit = met ? json_pack("{s:s,s:I,s:s}", "name", lim.name, "value",
                                    (json_int_t)lim.value, "reached", lim.reached)
                        : NULL;
    if (e.signaled) {
        json_t *cause = json_pack("{s:s,s:b,s:o}", "signal", e.signame, "core_dumped",
                                  e.core_dumped, "stderr", td_worker_stderr_tail(w));
        if (e.cpu_limit)
            json_object_set_new(cause, "cpu_limit",
                                json_pack("{s:I,s:I}", "limit_ms", (json_int_t)w->limits.cpu_ms,
                                          "used_ms", (json_int_t)e.cpu_ms));
        /* memory.max: the kernel's OOM killer ended the call */
        if (ooms > 0)
            json_object_set_new(cause, "oom_kill",
                                json_pack("{s:I,s:I}", "limit_mb", (json_int_t)w->limits.memory_mb,
                                          "kills", (json_int_t)ooms));
        if (limit)
            json_object_set_new(cause, "resource_limit", limit);
        td_worker_fail(w, TE_HANDLER_EXIT, with_stderr(w, e.detail, detail, sizeof(detail)), cause,
                       NULL);
        return;
    }
    int code = e.code;
    if (w->tool->protocol == TD_PROTO_PLAIN && code == 0) {
        json_t *res = td_plain_result(&w->plain, w->tool->output_validator ? NULL : &w->big);
        if (res)
            td_worker_finish(w, res);
        else
            td_worker_fail(w, TE_HANDLER_EXIT, "out of memory", NULL, NULL);
        return;
    }
    if (te_frame_pending(&w->dec) > 0 && td_worker_not_a_frame(w)) {
        json_decref(limit);
        return;
    }
    if (code == 0 && te_frame_pending(&w->dec) > 0) {
        json_decref(limit);
        size_t got = te_frame_pending(&w->dec);
        snprintf(detail, sizeof(detail), "exited with an incomplete frame (%zu bytes)", got);
        json_t *tf = w->dec.hdr_have == TE_FRAME_HEADER_LEN
                         ? json_pack("{s:I,s:I}", "expected", (json_int_t)w->dec.len, "received",
                                     (json_int_t)w->dec.have)
                         : json_pack("{s:n,s:I}", "expected", "received", (json_int_t)got);
        td_worker_fail(w, TE_INVALID_RETURN, detail, json_pack("{s:o}", "truncated_frame", tf),
                       NULL);
        return;
    }
    if (w->tool->view_note)
        snprintf(detail, sizeof(detail), "%s; %s", e.detail, view_note(w));
    json_t *cause = with_view(
        w, json_pack("{s:i,s:o}", "exit_status", code, "stderr", td_worker_stderr_tail(w)));
    if (cause && limit)
        json_object_set_new(cause, "resource_limit", limit);
    else
        json_decref(limit);
    char said[sizeof(detail) + TD_STDERR_MODEL + 32];
    td_worker_fail(w, TE_HANDLER_EXIT,
                   with_stderr(w, w->tool->view_note ? detail : e.detail, said, sizeof(said)),
                   cause, NULL);
}

void td_worker_cancel(struct td_worker *w)
{
    w->cancelled = true;
    td_worker_fail(w, TE_HANDLER_EXIT, "cancelled",
                   json_pack("{s:b,s:o}", "cancelled", 1, "stderr", td_worker_stderr_tail(w)),
                   NULL);
}

void td_worker_abandon(struct td_worker *w)
{
    w->cb = NULL;
    td_worker_cancel(w);
}
