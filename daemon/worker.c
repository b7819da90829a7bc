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
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bigres.h"
#include "bus.h"
#include "calldir.h"
#include "cgroup.h"
#include "config.h"
#include "containment.h"
#include "denials.h"
#include "egress.h"
#include "exitcause.h"
#include "fsview.h"
#include "identity.h"
#include "log.h"
#include "proxy.h"
#include "reaper.h"
#include "registry.h"
#include "sandbox.h"
#include "sysfilter.h"
#include "sysnotify.h"
#include "spares.h"
#include "spawndesc.h"
#include "spawner.h"
#include "template.h"
#include "toolexec.h"
#include "util.h"
#include "worker.h"

/* Bytes read from a worker pipe per read; one static buffer serves all reads
 * because each read is consumed before the next allocation. */
#define READ_CHUNK 65536
/* When draining a dead worker's pipes, stop after this much: only a stray
 * that escaped the group kill could still be writing. */
#define DRAIN_MAX (1u << 20)
/* A killed worker is normally reaped within a millisecond; past this, its
 * result goes out without its resource use. */
#define REAP_WAIT_MS 1000
/* Longest stderr line logged as one line. */
#define LOG_LINE_MAX 512

struct td_worker {
    struct td_tool *tool;
    char *batch_id, *call_id, *workdir;
    uint64_t timeout_ms;
    pid_t pid;
    bool reaped, finished, closing;
    bool pid_gone; /* reaped, its exit not handled yet: the pid may be reused */
    int handles;   /* open libuv handles */
    uv_pipe_t in, out, err;
    uv_timer_t timer;
    uv_write_t wreq;
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    char *reqbody;
    int exfd;
    int status;
    struct rusage ru;
    te_frame_decoder dec;
    char *plain;
    size_t plain_len, plain_cap;
    struct td_big *big; /* a big result's text (bigres.h) until it is handed over */
    size_t discarded;   /* stdout bytes after the result was known */
    char tail[TD_STDERR_TAIL];
    size_t tail_len;
    struct td_limits limits; /* in force for this call */
    uint32_t max_output;     /* largest response frame / plain stdout */
    char line[LOG_LINE_MAX];
    size_t line_len;
    unsigned lines_logged;
    td_result_cb cb;
    void *cb_data;
    json_t *pending; /* the result, waiting for the killed worker's reaping */
    bool cancelling;
    uid_t call_uid;            /* its own uid (identity.c), (uid_t)-1 for none */
    bool paused;               /* its client is not reading: stdout is left in the pipe */
    struct td_cgroup *cg;      /* the call's cgroup, NULL without one */
    bool cg_memory;            /* memory_mb is its memory.max */
    struct td_denials denied;  /* what its confinement refused (denials.h) */
    struct td_sysnotify *sysn; /* f3: answers its denied system calls; NULL: none */
    /* issue 14: under toolexecd-init, what it reported (the tool's status
     * and resource use), read once at its exit */
    bool init;
    struct td_report rep;
    /* The init's report pipe watched while the call runs: its status, its
     * last word, says every process of the call is gone, so the call ends
     * there ("ended"), ~0.35-0.65 ms before the init's own exit (its
     * namespace's teardown) is reaped. The reap still frees the uid, the
     * cgroup and the directory. */
    uv_poll_t expoll;
    bool expolling, ended;
    /* issue 14: the first bytes of a framed worker's stdout, to tell text
     * (a plain tool left on the framed protocol) from a frame */
    char head[48];
    size_t head_len;
    /* egress: the proxy serving its allow-list (proxy.c), until it ends */
    struct td_proxy *egress;
    td_progress_cb progress_cb; /* issue 13: progress frames before the response */
    /* warm start (template.c): a fork of the tool's template */
    struct td_warm_call *warm;
    int pidfd; /* the call's PID 1, once forked; -1 before */
    /* issue 21: started by the spawner (spawner.c), off the loop: its pid
     * and pidfd (ours to close) come later, its end from the spawner */
    bool via_spawner;
    bool spawn_failed; /* it never started: warm_why says why */
    uint64_t spawn_t0;
    bool kill_pending; /* killed before it was forked */
    char *warm_why;    /* it never ran, or its template died */
};

/* Workers alive; nothing walks them (the reaper finds a worker by its pid,
 * its batch holds it), so a count is all that is kept. */
static unsigned nworkers;
static char read_buf[READ_CHUNK];
static void (*worker_gone_cb)(void);

unsigned td_workers_alive(void)
{
    return nworkers;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(read_buf, sizeof(read_buf));
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
    free(w->plain);
    td_big_unref(w->big);
    free(w->reqbody);
    td_sysnotify_stop(w->sysn);
    td_denials_clear(&w->denied);
    free(w->batch_id);
    free(w->call_id);
    free(w->warm_why);
    if (w->via_spawner && w->pidfd >= 0)
        close(w->pidfd);
    free(w);
    if (worker_gone_cb)
        worker_gone_cb();
}

static void close_handle(struct td_worker *w, uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, on_handle_closed);
}

/* Free once the result is delivered and the process reaped. */
static void maybe_free(struct td_worker *w)
{
    if (!w->finished || !w->reaped || w->pending || w->closing)
        return;
    w->closing = true;
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
        close_handle(w, (uv_handle_t *)&w->expoll);
    if (w->exfd >= 0)
        close(w->exfd);
    w->exfd = -1;
    if (w->warm) { /* its directory is in the template's: removed there */
        td_template_call_end(w->warm);
        free(w->workdir);
        w->workdir = NULL;
    }
    w->warm = NULL;
    close_handle(w, (uv_handle_t *)&w->in);
    close_handle(w, (uv_handle_t *)&w->out);
    close_handle(w, (uv_handle_t *)&w->err);
    close_handle(w, (uv_handle_t *)&w->timer);
}

/* ---- results -------------------------------------------------------------- */

static void kill_group(struct td_worker *w)
{
    /* Warm: the call's PID 1 (lib/warmp1.c); its end takes the namespace's
     * every process with it. */
    if (w->warm || w->via_spawner || w->pidfd >= 0) {
        if (w->pidfd >= 0 && !w->reaped)
            syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
        else if (!w->reaped)
            w->kill_pending = true;
        return;
    }
    /* The pgid cannot be reused while any member lives; once the leader is
     * reaped we kill only from the reaper's callback, before any new fork
     * (on_worker_reaped), never later. */
    if (!w->pid_gone && kill(-w->pid, SIGKILL) < 0 && errno != ESRCH)
        td_logc(TD_LOG_WARN, w->batch_id, w->call_id, "kill(-%d): %s", (int)w->pid,
                strerror(errno));
    /* With a cgroup, everything else the call started: once the leader is
     * reaped (its group is dying by then, and in a PID namespace all of it
     * is gone, so mostly nothing is left to kill: see td_cgroup_dir_fd()),
     * or at once for a cancel, whose result goes out before the reaping. */
    if (w->reaped || w->cancelling)
        td_cgroup_kill(w->cg);
}

/* Hand the result over, with the worker's resource use when it is known. */
static void deliver(struct td_worker *w, json_t *result, const struct rusage *ru)
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
    if (w->denied.list)
        td_bus_publish(&(struct td_bus_msg){.kind = TD_BUS_DENIED,
                                            .json = w->denied.list,
                                            .tool = w->tool->name,
                                            .us = w->denied.more});
    struct td_big *big = w->big;
    w->big = NULL;
    if (cb)
        cb(w->cb_data, result, &(struct td_call_facts){.ru = ru, .denied = &w->denied, .big = big});
    else {
        json_decref(result);
        td_big_unref(big);
    }
    maybe_free(w);
}

static void on_reap_late(uv_timer_t *t)
{
    struct td_worker *w = t->data;
    td_logc(TD_LOG_WARN, w->batch_id, w->call_id,
            "worker %d not reaped %d ms after SIGKILL; reporting without its resource use",
            (int)w->pid, REAP_WAIT_MS);
    kill_group(w);
    deliver(w, w->pending, NULL);
}

static void finish(struct td_worker *w, json_t *result)
{
    if (w->finished) {
        json_decref(result);
        return;
    }
    w->finished = true;
    /* its proxy connections end with it, and so do its denials */
    td_proxy_stop(w->egress);
    w->egress = NULL;
    uv_timer_stop(&w->timer);
    uv_read_stop((uv_stream_t *)&w->out);
    if (w->reaped || w->ended) {
        deliver(w, result, &w->ru);
        return;
    }
    /* Under an init only the tool is killed: the init reaps it and reports
     * its resource use, then its exit ends the namespace. A warm call's
     * PID 1 (lib/warmp1.c) is such an init too, known by its pidfd. */
    bool tool_killed =
        !w->cancelling &&
        (w->pidfd >= 0 && (w->init || w->warm) ? td_sandbox_kill_tool_pidfd(w->pidfd) == 0
         : w->init && !w->via_spawner          ? td_sandbox_kill_tool(w->pid) == 0
                                               : false);
    if (!tool_killed)
        kill_group(w);
    if (w->cancelling) {
        /* a cancel completes at once (its batch may be gone next) */
        deliver(w, result, NULL);
        return;
    }
    /* Report once it is reaped: the result then carries the worker's CPU
     * time and peak memory from wait4(). */
    w->pending = result;
    uv_timer_start(&w->timer, on_reap_late, REAP_WAIT_MS, 0);
}

static json_t *stderr_tail(struct td_worker *w)
{
    return td_json_text(w->tail, w->tail_len);
}

static void fail(struct td_worker *w, te_reason reason, const char *detail, json_t *cause,
                 json_t *metadata)
{
    finish(w, te_tool_error_new(reason, w->tool->name, w->call_id, detail, cause, metadata));
}

static json_t *quote(const char *p, size_t n)
{
    return td_json_text(p, n > TD_QUOTE_MAX ? TD_QUOTE_MAX : n);
}

/* A complete response frame arrived. */
static void on_frame(struct td_worker *w, char *body, size_t len)
{
    char why[256];
    /* a big {"ok": "..."} is kept as it came, not parsed (bigres.h) */
    json_t *res = w->tool->output_validator ? NULL : td_big_frame(body, len, &w->big);
    int kind = res ? TE_RESULT_OK : te_response_parse(body, len, &res, why, sizeof(why));
    if (w->big) {
        finish(w, res);
        return; /* body is the big result's */
    } else if (kind < 0) {
        fail(w, TE_INVALID_RETURN, why,
             json_pack("{s:s,s:o}", "error", why, "value", quote(body, len)), NULL);
    } else if (kind == TE_RESULT_RAISED) {
        json_t *raised = json_deep_copy(json_object_get(res, "raised"));
        const char *type = json_string_value(json_object_get(raised, "type"));
        const char *msg = json_string_value(json_object_get(raised, "message"));
        char detail[512];
        snprintf(detail, sizeof(detail), "%s%s%s", type ? type : "raised", msg ? ": " : "",
                 msg ? msg : "");
        json_object_set_new(raised, "stderr", stderr_tail(w));
        fail(w, TE_HANDLER_RAISED, detail, raised, NULL);
        json_decref(res);
    } else if (kind == TE_RESULT_HALT &&
               te_halt_reason_reserved(json_string_value(json_object_get(res, "halt")))) {
        const char *atom = json_string_value(json_object_get(res, "halt"));
        snprintf(why, sizeof(why), "halt reason \"%s\" is reserved", atom);
        fail(w, TE_INVALID_RETURN, why, json_pack("{s:o}", "value", quote(body, len)),
             json_pack("{s:s}", "reserved_halt_atom", atom));
        json_decref(res);
    } else {
        finish(w, res);
    }
    free(body);
}

/* A length prefix that is printable text ("Hell" is 1214606444 bytes) is
 * not a frame: the tool printed text, as a plain tool would. Says so, and
 * returns true, when the first bytes of stdout are all text. */
static bool not_a_frame(struct td_worker *w)
{
    size_t n = w->head_len;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n && i < TE_FRAME_HEADER_LEN; i++) {
        unsigned char ch = (unsigned char)w->head[i];
        if (!((ch >= 0x20 && ch < 0x7f) || ch == '\t' || ch == '\n' || ch == '\r'))
            return false;
    }
    fail(w, TE_INVALID_RETURN,
         "the worker wrote text where a frame was expected; is this a plain tool? "
         "(\"protocol\": \"plain\" in its definition)",
         json_pack("{s:o,s:o}", "not_a_frame", td_json_text(w->head, n), "stderr", stderr_tail(w)),
         NULL);
    return true;
}

static void take_stdout(struct td_worker *w, const char *p, size_t n)
{
    if (w->finished) {
        w->discarded += n;
        return;
    }
    if (w->tool->protocol == TD_PROTO_PLAIN) {
        if (w->plain_len + n > w->max_output) {
            char detail[128];
            snprintf(detail, sizeof(detail), "output exceeds the limit of %u bytes", w->max_output);
            fail(w, TE_INVALID_RETURN, detail,
                 json_pack("{s:{s:I}}", "output_limit", "limit", (json_int_t)w->max_output), NULL);
            return;
        }
        if (td_plain_append(&w->plain, &w->plain_len, &w->plain_cap, p, n) < 0)
            fail(w, TE_HANDLER_EXIT, "out of memory", NULL, NULL);
        return;
    }
    if (w->head_len < sizeof(w->head)) {
        size_t k = n < sizeof(w->head) - w->head_len ? n : sizeof(w->head) - w->head_len;
        memcpy(w->head + w->head_len, p, k);
        w->head_len += k;
    }
    size_t used;
    int rc = te_frame_feed(&w->dec, p, n, &used);
    /* progress frames come before the response: read on past each */
    while (rc == TE_FRAME_DONE && w->progress_cb) {
        size_t len;
        char *body = te_frame_take(&w->dec, &len);
        json_t *progress = te_progress_frame(body, len);
        if (!progress) {
            w->discarded += n - used; /* counted before finish so the log says it */
            on_frame(w, body, len);
            return;
        }
        free(body);
        w->progress_cb(w->cb_data, progress);
        json_decref(progress);
        if (w->finished) /* cancelled from inside the callback */
            return;
        p += used;
        n -= used;
        rc = n ? te_frame_feed(&w->dec, p, n, &used) : 0;
    }
    if (rc == TE_FRAME_DONE) {
        size_t len;
        char *body = te_frame_take(&w->dec, &len);
        w->discarded += n - used; /* counted before finish so the log says it */
        on_frame(w, body, len);
    } else if (rc == -EMSGSIZE && not_a_frame(w)) {
        return;
    } else if (rc == -EMSGSIZE) {
        char detail[160];
        snprintf(detail, sizeof(detail), "frame of %u bytes exceeds the limit of %u bytes",
                 w->dec.len, w->max_output);
        fail(w, TE_INVALID_RETURN, detail,
             json_pack("{s:I,s:I,s:{s:I}}", "frame_length", (json_int_t)w->dec.len, "limit",
                       (json_int_t)w->max_output, "output_limit", "limit",
                       (json_int_t)w->max_output),
             NULL);
    } else if (rc < 0) {
        fail(w, TE_HANDLER_EXIT, "out of memory reading the response", NULL, NULL);
    }
}

static void log_stderr_line(struct td_worker *w, bool truncated)
{
    if (w->lines_logged < TD_STDERR_LOG_LINES)
        td_logc(TD_LOG_INFO, w->batch_id, w->call_id, "tool %s: stderr: %.*s%s", w->tool->name,
                (int)w->line_len, w->line, truncated ? "..." : "");
    else if (w->lines_logged == TD_STDERR_LOG_LINES)
        td_logc(TD_LOG_INFO, w->batch_id, w->call_id,
                "tool %s: further stderr lines are not logged", w->tool->name);
    w->lines_logged++;
    w->line_len = 0;
}

static void take_stderr(struct td_worker *w, const char *p, size_t n)
{
    /* keep the tail */
    if (n >= TD_STDERR_TAIL) {
        memcpy(w->tail, p + n - TD_STDERR_TAIL, TD_STDERR_TAIL);
        w->tail_len = TD_STDERR_TAIL;
    } else {
        if (w->tail_len + n > TD_STDERR_TAIL) {
            size_t drop = w->tail_len + n - TD_STDERR_TAIL;
            memmove(w->tail, w->tail + drop, w->tail_len - drop);
            w->tail_len -= drop;
        }
        memcpy(w->tail + w->tail_len, p, n);
        w->tail_len += n;
    }
    /* log it line by line */
    if (w->lines_logged > TD_STDERR_LOG_LINES)
        return;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            log_stderr_line(w, false);
        } else if (w->line_len < LOG_LINE_MAX) {
            w->line[w->line_len++] = p[i];
        } else {
            log_stderr_line(w, true);
            w->line[w->line_len++] = p[i];
        }
    }
}

static void decide_on_exit(struct td_worker *w);

static void on_stdout(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct td_worker *w = s->data;
    if (n > 0)
        take_stdout(w, buf->base, (size_t)n);
    else if (n < 0)
        uv_read_stop(s); /* EOF: the exit decides */
    /* An exited worker's output, left in the pipe while its client was not
     * reading, is read now: once the pipe is empty (n == 0 is EAGAIN: a
     * stray holds it open) or closed, the exit decides, as after drain(). */
    if (n <= 0 && (w->reaped || w->ended) && !w->finished) {
        uv_read_stop(s);
        decide_on_exit(w);
    }
}

static void on_stderr(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct td_worker *w = s->data;
    if (n > 0)
        take_stderr(w, buf->base, (size_t)n);
    else if (n < 0)
        uv_read_stop(s);
}

/* Read what a dead worker left in a pipe, without waiting. */
static void drain(struct td_worker *w, uv_pipe_t *p,
                  void (*take)(struct td_worker *, const char *, size_t))
{
    uv_os_fd_t fd;
    if (uv_is_closing((uv_handle_t *)p) || uv_fileno((uv_handle_t *)p, &fd) < 0)
        return;
    uv_read_stop((uv_stream_t *)p);
    size_t total = 0;
    while (total < DRAIN_MAX) {
        ssize_t n = read(fd, read_buf, sizeof(read_buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        total += (size_t)n;
        take(w, read_buf, (size_t)n);
    }
}

/* The worker exited before its result was known: decide what it means. */
static void decide_on_exit(struct td_worker *w)
{
    char detail[512];
    if (w->warm_why && w->spawn_failed) { /* as a spawn that failed at once (spawn_error()) */
        snprintf(detail, sizeof(detail), "could not start the worker: %s", w->warm_why);
        fail(w, TE_HANDLER_EXIT, detail, json_pack("{s:s}", "spawn_error", w->warm_why), NULL);
        return;
    }
    if (w->warm_why) {
        fail(w, TE_HANDLER_EXIT, w->warm_why,
             json_pack("{s:s,s:o}", w->warm ? "warm_error" : "spawner_error", w->warm_why, "stderr",
                       stderr_tail(w)),
             NULL);
        return;
    }
    struct td_report rep = w->rep;
    if (rep.failed) {
        if (strcmp(rep.step, "exec") == 0)
            snprintf(detail, sizeof(detail), "could not execute %s: %s", w->tool->argv[0],
                     strerror(rep.err));
        else
            snprintf(detail, sizeof(detail), "could not set up the worker: %s: %s", rep.step,
                     strerror(rep.err));
        fail(w, TE_HANDLER_EXIT, detail,
             json_pack("{s:s,s:o}", "exec_error", strerror(rep.err), "stderr", stderr_tail(w)),
             NULL);
        return;
    }
    /* Under an init, the tool's own status is what counts. */
    if (rep.have_status)
        w->status = rep.status;
    struct td_exit e;
    td_exit_decide(w->status, &w->ru, w->limits.cpu_ms, w->tool->protocol == TD_PROTO_FRAMED, &e);
    if (e.signaled) {
        json_t *cause = json_pack("{s:s,s:b,s:o}", "signal", e.signame, "core_dumped",
                                  e.core_dumped, "stderr", stderr_tail(w));
        if (e.cpu_limit)
            json_object_set_new(cause, "cpu_limit",
                                json_pack("{s:I,s:I}", "limit_ms", (json_int_t)w->limits.cpu_ms,
                                          "used_ms", (json_int_t)e.cpu_ms));
        /* memory.max: the kernel's OOM killer ended the call */
        long long ooms = w->cg_memory ? td_cgroup_oom_kills(w->cg) : 0;
        if (ooms > 0) {
            td_exit_oom(&e, w->limits.memory_mb);
            json_object_set_new(cause, "oom_kill",
                                json_pack("{s:I,s:I}", "limit_mb", (json_int_t)w->limits.memory_mb,
                                          "kills", (json_int_t)ooms));
        }
        fail(w, TE_HANDLER_EXIT, e.detail, cause, NULL);
        return;
    }
    int code = e.code;
    if (w->tool->protocol == TD_PROTO_PLAIN && code == 0) {
        json_t *res =
            td_plain_result(&w->plain, w->plain_len, w->tool->output_validator ? NULL : &w->big);
        if (res)
            finish(w, res);
        else
            fail(w, TE_HANDLER_EXIT, "out of memory", NULL, NULL);
        return;
    }
    if (te_frame_pending(&w->dec) > 0 && not_a_frame(w))
        return;
    if (code == 0 && te_frame_pending(&w->dec) > 0) {
        size_t got = te_frame_pending(&w->dec);
        snprintf(detail, sizeof(detail), "exited with an incomplete frame (%zu bytes)", got);
        json_t *tf = w->dec.hdr_have == TE_FRAME_HEADER_LEN
                         ? json_pack("{s:I,s:I}", "expected", (json_int_t)w->dec.len, "received",
                                     (json_int_t)w->dec.have)
                         : json_pack("{s:n,s:I}", "expected", "received", (json_int_t)got);
        fail(w, TE_INVALID_RETURN, detail, json_pack("{s:o}", "truncated_frame", tf), NULL);
        return;
    }
    fail(w, TE_HANDLER_EXIT, e.detail,
         json_pack("{s:i,s:o}", "exit_status", code, "stderr", stderr_tail(w)), NULL);
}

/* The reaper's first word, from inside its signal callback: kill what is
 * left of the group while its id cannot be another's; the exit itself
 * comes later (on_worker_exit). */
static void on_worker_reaped(void *data)
{
    struct td_worker *w = data;
    kill_group(w);
    w->pid_gone = true;
}

/* The call's processes are gone (reaped, or its init said so): what they
 * left in the pipes decides, or the result waiting for this goes out. */
static void tool_gone(struct td_worker *w)
{
    if (w->rep.have_usage) { /* the tool's, not the init's own */
        w->ru.ru_utime = (struct timeval){w->rep.user_ms / 1000, w->rep.user_ms % 1000 * 1000};
        w->ru.ru_stime = (struct timeval){w->rep.sys_ms / 1000, w->rep.sys_ms % 1000 * 1000};
        w->ru.ru_maxrss = w->rep.maxrss_kb;
    }
    /* The leader is gone; what is left of its group are strays. */
    kill_group(w);
    drain(w, &w->err, take_stderr);
    /* Paused (its client is not reading): the output stays in the pipe
     * until the client catches up or the call times out, so a client that
     * never reads costs no more than its queue (on_stdout decides then). */
    if (!w->finished && !w->paused) {
        drain(w, &w->out, take_stdout);
        decide_on_exit(w);
    } else if (w->pending) {
        uv_timer_stop(&w->timer);
        deliver(w, w->pending, &w->ru);
        return;
    }
    maybe_free(w);
}

static void stop_expoll(struct td_worker *w)
{
    if (w->expolling)
        uv_poll_stop(&w->expoll);
}

/* Calls ended on their init's report whose init is not reaped yet. The
 * kernel's teardown of a namespace is slower than a call: 200 trivial calls
 * at concurrency 12 finished with 83 inits still exiting (all gone 0.2 s
 * later), and 800 left 534. Unbounded, that backlog would hold a uid, a pid
 * and a worker each; past half of --max-workers a call waits for its reap
 * again, as before, which is the back-pressure (and keeps running plus
 * lingering calls within the 2 x --max-workers uids identity.c asks for). */
static unsigned lingering;

static void on_worker_exit(void *data, int status, const struct rusage *ru)
{
    struct td_worker *w = data;
    w->reaped = true;
    if (w->ended) { /* handled when its init reported */
        lingering--;
        maybe_free(w);
        return;
    }
    stop_expoll(w);
    w->status = status;
    w->ru = *ru;
    td_sandbox_report_more(w->exfd, &w->rep);
    tool_gone(w);
}

/* The init's report pipe is readable: its status ends the call. */
static void on_report(uv_poll_t *p, int status, int events)
{
    (void)events;
    struct td_worker *w = p->data;
    int rc = status < 0 ? -1 : td_sandbox_report_more(w->exfd, &w->rep);
    if (rc == 0)
        return;
    stop_expoll(w);
    /* no status, or too many inits still exiting: the reap decides */
    if (rc < 0 || w->reaped || lingering >= (td_cfg.max_workers + 1) / 2)
        return;
    w->ended = true;
    lingering++;
    td_logc(TD_LOG_DEBUG, w->batch_id, w->call_id, "its init reported: every process gone");
    tool_gone(w);
}

static void on_timeout(uv_timer_t *t)
{
    struct td_worker *w = t->data;
    char detail[160];
    snprintf(detail, sizeof(detail), "exceeded its timeout of %llu ms%s",
             (unsigned long long)w->timeout_ms,
             w->paused ? " (its output paused: its client was not reading)" : "");
    fail(w, TE_TIMEOUT, detail,
         json_pack("{s:I,s:o}", "timeout_ms", (json_int_t)w->timeout_ms, "stderr", stderr_tail(w)),
         NULL);
}

static void on_request_written(uv_write_t *req, int status)
{
    struct td_worker *w = req->data;
    /* EPIPE: the worker closed stdin without reading; that is its business. */
    if (status < 0 && status != UV_ECANCELED)
        td_logc(TD_LOG_DEBUG, w->batch_id, w->call_id, "request not fully written: %s",
                uv_strerror(status));
    free(w->reqbody);
    w->reqbody = NULL;
    close_handle(w, (uv_handle_t *)&w->in);
}

/* ---- starting ------------------------------------------------------------- */

static bool env_has(const struct td_tool *t, const char *name)
{
    size_t n = strlen(name);
    for (size_t k = 0; k < t->nenv; k++)
        if (strncmp(t->env[k], name, n) == 0 && t->env[k][n] == '=')
            return true;
    return false;
}

/* The proxy of an egress allow-list (egress.h), where the definition's env
 * does not say otherwise; the next free index (NULL entries: no memory). */
static size_t egress_env(const struct td_tool *t, char **env, size_t i)
{
    static const char *const vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
                                       "ALL_PROXY"};
    for (size_t k = 0; k < sizeof(vars) / sizeof(vars[0]); k++)
        if (!env_has(t, vars[k]) && asprintf(&env[i++], "%s=" TD_EGRESS_URL, vars[k]) < 0)
            env[i - 1] = NULL;
    const char *no = td_egress_no_proxy(t->egress);
    if (no && !env_has(t, "NO_PROXY") && asprintf(&env[i++], "NO_PROXY=%s", no) < 0)
        env[i - 1] = NULL;
    return i;
}

static char **build_env(const struct td_worker_spec *s)
{
    size_t n = s->tool->nenv + 5 + 6, i = 0;
    char **env = calloc(n, sizeof(char *));
    if (!env)
        return NULL;
    bool has_path = false;
    for (size_t k = 0; k < s->tool->nenv; k++)
        has_path |= strncmp(s->tool->env[k], "PATH=", 5) == 0;
    if (!has_path)
        env[i++] = strdup("PATH=" TD_WORKER_PATH);
    for (size_t k = 0; k < s->tool->nenv; k++)
        env[i++] = strdup(s->tool->env[k]);
    if (asprintf(&env[i++], "TOOLEXEC_TOOL=%s", s->tool->name) < 0)
        env[i - 1] = NULL;
    if (asprintf(&env[i++], "TOOLEXEC_CALL_ID=%s", s->call_id) < 0)
        env[i - 1] = NULL;
    if (asprintf(&env[i++], "TOOLEXEC_BATCH=%s", s->batch_id) < 0)
        env[i - 1] = NULL;
    if (s->tool->egress)
        i = egress_env(s->tool, env, i);
    for (size_t k = 0; k < i; k++) {
        if (!env[k]) {
            for (size_t j = 0; j < i; j++)
                free(env[j]);
            free(env);
            return NULL;
        }
    }
    return env;
}

void td_worker_on_gone(void (*cb)(void))
{
    worker_gone_cb = cb;
}

static int spawn_template(struct td_tool *t, const char *cwd, uid_t uid, gid_t gid,
                          struct td_child *c, struct td_cgroup **cg, const char **what);

void td_worker_setup(void)
{
    td_template_setup(spawn_template);
    td_spawndesc_setup();
}

static json_t *spawn_error(const struct td_worker_spec *s, const char *what, int err)
{
    char detail[256];
    snprintf(detail, sizeof(detail), "could not start the worker: %s: %s", what, strerror(err));
    char msg[128];
    snprintf(msg, sizeof(msg), "%s: %s", what, strerror(err));
    return te_tool_error_new(TE_HANDLER_EXIT, s->tool->name, s->call_id, detail,
                             json_pack("{s:s}", "spawn_error", msg), NULL);
}

static void pipe_open(struct td_worker *w, uv_pipe_t *p, int fd)
{
    uv_pipe_init(td_loop, p, 0);
    p->data = w;
    w->handles++;
    /* UV_EEXIST: libuv still watches this number for a handle whose
     * descriptor someone closed behind its back; that handle would now
     * read this pipe. Never seen on this loop; said loudly if it is. */
    int rc = uv_pipe_open(p, fd);
    if (rc < 0)
        td_logc(TD_LOG_ERR, w->batch_id, w->call_id, "worker pipe (fd %d) not opened: %s", fd,
                uv_strerror(rc));
}

/* ---- warm start (template.c) ------------------------------------------------ */

static void on_warm_forked(void *data, int pidfd)
{
    struct td_worker *w = data;
    w->pidfd = pidfd;
    if (w->kill_pending)
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

static void on_warm_exited(void *data, int status, const struct rusage *ru, const char *why)
{
    struct td_worker *w = data;
    static const struct rusage none;
    if (why && !w->warm_why)
        w->warm_why = strdup(why);
    on_worker_reaped(w);
    on_worker_exit(w, status, ru ? ru : &none);
}

/* Its egress proxy, served on the listener its PID 1 made in its network
 * namespace, as a cold call's (td_worker_start) from here on. */
static void on_warm_listener(void *data, int fd)
{
    struct td_worker *w = data;
    if (w->finished || w->egress || !w->tool->egress) {
        close(fd);
        return;
    }
    w->egress = td_proxy_start(w->tool->egress, fd, &w->denied, w->batch_id, w->call_id);
}

static const struct td_warm_ops warm_ops = {on_warm_forked, on_warm_exited, on_warm_listener};

/* ---- started by the spawner (spawner.c) ------------------------------------- */

static void on_spawned(void *data, pid_t pid, int pidfd, const int handed[TD_HAND_COUNT], int err,
                       const char *what)
{
    struct td_worker *w = data;
    if (err) { /* it never ran: ends as a spawn that failed here would */
        char msg[160];
        snprintf(msg, sizeof(msg), "%s: %s", what, strerror(err));
        td_logc(TD_LOG_WARN, w->batch_id, w->call_id, "%s", msg);
        w->warm_why = strdup(msg);
        w->spawn_failed = true;
        static const struct rusage none;
        on_worker_reaped(w);
        on_worker_exit(w, 127 << 8, &none);
        return;
    }
    w->pid = pid;
    w->pidfd = pidfd;
    /* from the request to the child's exec: the spawn cost, queueing included */
    td_bus_publish(&(struct td_bus_msg){
        .kind = TD_BUS_SPAWN, .tool = w->tool->name, .us = (uv_hrtime() - w->spawn_t0) / 1000});
    td_logc(TD_LOG_DEBUG, w->batch_id, w->call_id, "started %s as pid %d", w->tool->name, (int)pid);
    if (handed[TD_HAND_PROXY] >= 0 && (w->finished || !w->tool->egress))
        close(handed[TD_HAND_PROXY]);
    else if (handed[TD_HAND_PROXY] >= 0)
        w->egress = td_proxy_start(w->tool->egress, handed[TD_HAND_PROXY], &w->denied, w->batch_id,
                                   w->call_id);
    /* a finished call's listener is closed: its denied calls then fail
     * (ENOSYS) rather than wait for an answer */
    if (handed[TD_HAND_SECCOMP] >= 0 && w->finished)
        close(handed[TD_HAND_SECCOMP]);
    else if (handed[TD_HAND_SECCOMP] >= 0)
        w->sysn = td_sysnotify_start(handed[TD_HAND_SECCOMP], &w->denied);
    if (w->kill_pending)
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

static void on_spawner_exited(void *data, int status, const struct rusage *ru, const char *why)
{
    struct td_worker *w = data;
    static const struct rusage none;
    if (why && !w->warm_why)
        w->warm_why = strdup(why);
    on_worker_reaped(w);
    on_worker_exit(w, status, ru ? ru : &none);
}

static const struct td_spawner_ops spawner_ops = {on_spawned, on_spawner_exited};

/* A warm call: the template forks its process; false when it cannot (not
 * ready): the call runs cold. */
static bool start_warm(struct td_worker *w, const struct td_worker_spec *s, struct td_child *c,
                       char **workdir)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
        pipe2(ex, O_CLOEXEC) < 0) {
        int *ps[4] = {in, out, err, ex};
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 2; k++)
                if (ps[i][k] >= 0)
                    close(ps[i][k]);
        return false;
    }
    int network = s->tool->network >= 0 ? s->tool->network : td_cfg.network;
    int theirs[4] = {in[0], out[1], err[1], ex[1]};
    int ours[4] = {in[1], out[0], err[0], ex[0]};
    /* theirs are taken in every case */
    w->warm =
        td_template_call(s->tool, s->call_id, s->batch_id, !network, theirs, &warm_ops, w, workdir);
    if (!w->warm) {
        for (int i = 0; i < 4; i++)
            close(ours[i]);
        return false;
    }
    td_template_call_denials(w->warm, &w->denied);
    fcntl(ex[0], F_SETFL, O_NONBLOCK);
    *c = (struct td_child){.pid = 0, .in = in[1], .out = out[0], .err = err[0], .report = ex[0]};
    for (int k = 0; k < TD_HAND_COUNT; k++) /* nothing handed up: not spawned here */
        c->handed[k] = -1;
    return true;
}

/* The template's spawn: a cold worker's description, in its directory. A
 * warm call's processes share the template's limit: the template, the
 * spare PID 1 it keeps for the next call and the call's PID 1 are not the
 * call's (lib/warm.c, p1_make()), so one call may have as many as a cold one (+3). */
static int spawn_template(struct td_tool *t, const char *cwd, uid_t uid, gid_t gid,
                          struct td_child *c, struct td_cgroup **cg, const char **what)
{
    struct td_worker_spec spec = {.tool = t, .batch_id = "", .call_id = ""};
    char **env = build_env(&spec);
    *cg = NULL;
    *what = "malloc";
    if (!env)
        return -ENOMEM;
    struct td_limits lim;
    struct td_spawndesc d;
    *what = "cgroup";
    int rc = td_spawndesc_cgroup(t, 3, &lim, cg);
    if (rc == 0 && (rc = td_spawndesc_build(&d, TD_SPAWN_TEMPLATE, t, &lim, *cg, cwd, uid, gid, env,
                                            what)) == 0) {
        rc = td_sandbox_spawn(&d.sp, c, what);
        td_spawndesc_free(&d);
    }
    if (rc < 0) {
        td_cgroup_release(*cg);
        *cg = NULL;
    }
    for (char **e = env; *e; e++)
        free(*e);
    free(env);
    return rc;
}

struct td_worker *td_worker_start(const struct td_worker_spec *s, td_result_cb cb, void *data,
                                  json_t **result)
{
    *result = NULL;
    char *workdir = NULL;
    char **env = NULL;
    uid_t taken = (uid_t)-1; /* the call's own uid, once taken */
    /* framed: the request object in one frame; plain: the arguments as one
     * line of compact JSON */
    bool plain = s->tool->protocol == TD_PROTO_PLAIN;
    char *body =
        te_json_dumps(plain ? json_object_get(s->request, "arguments") : s->request, 0, NULL);
    struct td_worker *w = calloc(1, sizeof(*w));
    const char *what = "malloc";
    int err = ENOMEM;
    if (!w || !body)
        goto fail;
    w->pidfd = -1;
    struct td_child child;
    if (s->tool->warm && !plain) {
        bool warm = start_warm(w, s, &child, &workdir);
        if (s->start)
            *s->start = warm ? "warm" : "cold";
        if (warm) {
            td_spawndesc_limits(s->tool, 0, &w->limits);
            uint64_t ob = w->limits.output_mb ? w->limits.output_mb << 20 : td_cfg.max_frame;
            w->max_output = ob > UINT32_MAX ? UINT32_MAX : (uint32_t)ob;
            goto started;
        }
    }
    env = build_env(s);
    if (!env)
        goto fail;
    /* The call's identity: a root daemon runs a tool that names no user as
     * a uid and gid no other call holds (a group the tool names is kept);
     * its directory; a cgroup where it gets one. All three made ahead with a
     * spare (spares.c), which is then the call's alone. */
    uid_t uid = s->tool->uid;
    gid_t gid = s->tool->gid;
    struct td_spare_grant grant = {.handle = TD_NO_SPARE};
    bool via = td_spawner_active();
    if (via && td_spares_take(s->tool, &grant)) {
        td_logc(TD_LOG_DEBUG, s->batch_id, s->call_id, "takes a spare of %s", s->tool->name);
        taken = grant.taken;
        uid = grant.uid;
        gid = grant.gid;
        workdir = grant.dir;
        w->cg = grant.cg;
        w->limits = grant.limits;
    } else {
        if (s->tool->switch_user && !s->tool->user && td_identity_active()) {
            what = "call uid";
            if ((err = -td_identity_take(&taken)) > 0)
                goto fail;
            uid = taken;
            gid = s->tool->group ? s->tool->gid : (gid_t)taken;
        }
        int mk = s->tool->switch_user ? td_calldir_make(uid, gid, &workdir, &what)
                                      : td_calldir_make((uid_t)-1, (gid_t)-1, &workdir, &what);
        if (mk < 0) {
            err = -mk;
            goto fail;
        }
        what = "cgroup";
        if ((err = -td_spawndesc_cgroup(s->tool, 0, &w->limits, &w->cg)) > 0) {
            rmdir(workdir);
            goto fail;
        }
    }
    /* output_mb where set, else --max-frame-bytes (16 MiB by default) */
    uint64_t out_bytes = w->limits.output_mb ? w->limits.output_mb << 20 : td_cfg.max_frame;
    w->max_output = out_bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)out_bytes;
    struct td_spawndesc d;
    if ((err = -td_spawndesc_build(&d, TD_SPAWN_CALL, s->tool, &w->limits, w->cg, workdir,
                                   s->tool->switch_user ? uid : (uid_t)-1, gid, env, &what)) > 0) {
        rmdir(workdir);
        goto fail;
    }
    w->cg_memory = d.cg_memory;
    uint64_t t0 = uv_hrtime();
    int rc;
    if (via) { /* off the loop: the spawner starts it (spawner.c) */
        int theirs[TD_SANDBOX_ENDS];
        what = "pipe";
        rc = td_sandbox_pipes(false, &child, theirs);
        if (rc == 0 &&
            (rc = td_spawner_call(&d.sp, theirs, &spawner_ops, w, grant.handle, &what)) < 0) {
            close(child.in), close(child.out), close(child.err), close(child.report);
        }
    } else {
        rc = td_sandbox_spawn(&d.sp, &child, &what);
        if (rc == 0) /* clone returns once the child has exec'd: the spawn cost */
            td_bus_publish(&(struct td_bus_msg){
                .kind = TD_BUS_SPAWN, .tool = s->tool->name, .us = (uv_hrtime() - t0) / 1000});
    }
    td_spawndesc_free(&d);
    w->via_spawner = via;
    w->spawn_t0 = t0;
    for (char **e = env; *e; e++)
        free(*e);
    free(env);
    env = NULL;
    if (rc < 0) {
        err = -rc;
        rmdir(workdir);
        goto fail;
    }
    if (via && !s->tool->warm) /* the next call's, made while this one runs */
        td_spares_refill(s->tool);

started:
    w->call_uid = taken;
    if (s->tool->egress && !w->warm && !w->via_spawner) /* NULL if the child failed before
                                                           handing it up; warm:
                                                           on_warm_listener(), spawner:
                                                           on_spawned() */
        w->egress = td_proxy_start(s->tool->egress, child.handed[TD_HAND_PROXY], &w->denied,
                                   s->batch_id, s->call_id);
    else if (child.handed[TD_HAND_PROXY] >= 0)
        close(child.handed[TD_HAND_PROXY]);
    w->tool = td_tool_ref(s->tool);
    w->batch_id = strdup(s->batch_id);
    w->call_id = strdup(s->call_id);
    w->workdir = workdir;
    w->timeout_ms = s->timeout_ms;
    w->pid = child.pid;
    w->init = !w->warm && td_call_ns != 0; /* a warm call's PID 1 is the template's fork */
    w->exfd = child.report;
    /* a warm call's PID 1 (lib/warmp1.c) reports as toolexecd-init does */
    if ((w->init || w->warm) && w->exfd >= 0 && fcntl(w->exfd, F_SETFL, O_NONBLOCK) == 0 &&
        uv_poll_init(td_loop, &w->expoll, w->exfd) == 0) {
        w->expoll.data = w;
        w->handles++;
        w->expolling = true;
        uv_poll_start(&w->expoll, UV_READABLE, on_report);
    }
    if (child.handed[TD_HAND_SECCOMP] >= 0)
        w->sysn = td_sysnotify_start(child.handed[TD_HAND_SECCOMP], &w->denied);
    w->cb = cb;
    w->cb_data = data;
    w->progress_cb = s->progress;
    te_frame_decoder_init(&w->dec, w->max_output);
    pipe_open(w, &w->in, child.in);
    pipe_open(w, &w->out, child.out);
    pipe_open(w, &w->err, child.err);
    uv_timer_init(td_loop, &w->timer);
    w->timer.data = w;
    w->handles++;
    nworkers++;
    if (!w->warm && !w->via_spawner)
        td_reaper_watch(w->pid, on_worker_reaped, on_worker_exit, w);

    /* The request: one frame, then stdin is closed. */
    size_t len = strlen(body);
    te_frame_header((uint32_t)len, w->hdr);
    if (plain)
        body[len++] = '\n'; /* over the NUL: te_json_dumps() allocated len + 1 */
    w->reqbody = body;
    uv_buf_t bufs[2] = {uv_buf_init((char *)w->hdr, sizeof(w->hdr)), uv_buf_init(body, len)};
    w->wreq.data = w;
    if (uv_write(&w->wreq, (uv_stream_t *)&w->in, plain ? bufs + 1 : bufs, plain ? 1 : 2,
                 on_request_written) < 0)
        close_handle(w, (uv_handle_t *)&w->in);
    uv_read_start((uv_stream_t *)&w->out, alloc_cb, on_stdout);
    uv_read_start((uv_stream_t *)&w->err, alloc_cb, on_stderr);
    /* The timeout counts from now, not from the loop's time cached before
     * the spawn: else it could fire before timeout_ms has passed since the
     * call's start (its duration_ms), which a call that ends on its init's
     * report, at once, then shows (test_metrics: 199.9 ms for 200). */
    uv_update_time(td_loop);
    uv_timer_start(&w->timer, on_timeout, s->timeout_ms, 0);
    td_logc(TD_LOG_DEBUG, s->batch_id, s->call_id, "started %s as pid %d", s->tool->name,
            (int)w->pid);
    return w;

fail:
    if (env) {
        for (char **e = env; *e; e++)
            free(*e);
        free(env);
    }
    free(workdir);
    free(body);
    if (taken != (uid_t)-1) /* no process of the call was started */
        td_identity_give(taken);
    if (w)
        td_cgroup_release(w->cg);
    free(w);
    *result = spawn_error(s, what, err);
    td_logc(TD_LOG_WARN, s->batch_id, s->call_id, "%s: %s", what, strerror(err));
    return NULL;
}

void td_worker_throttle(struct td_worker *w, bool pause)
{
    if (w->finished || uv_is_closing((uv_handle_t *)&w->out))
        return;
    /* The worker then blocks on a full pipe; its timer keeps running. */
    w->paused = pause;
    if (pause)
        uv_read_stop((uv_stream_t *)&w->out);
    else
        uv_read_start((uv_stream_t *)&w->out, alloc_cb, on_stdout);
}

void td_worker_cancel(struct td_worker *w)
{
    w->cancelling = true;
    fail(w, TE_HANDLER_EXIT, "cancelled",
         json_pack("{s:b,s:o}", "cancelled", 1, "stderr", stderr_tail(w)), NULL);
}

void td_worker_abandon(struct td_worker *w)
{
    w->cb = NULL;
    td_worker_cancel(w);
}
