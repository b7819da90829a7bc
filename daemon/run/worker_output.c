/*
 * worker_output.c - what a call's process writes (worker_int.h): its stdout
 * read as frames (progress frames on the way, the response last) or, for a
 * plain tool, as the result's text up to its cap; its stderr kept as a tail
 * for the error cause and logged line by line; what is left in the pipes at
 * its exit read without waiting; its stdout paused while its client does
 * not read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bigres.h"
#include "log.h"
#include "registry.h"
#include "toolexec.h"
#include "util.h"
#include "worker.h"
#include "worker_int.h"

/* Bytes read from a worker pipe per read; one static buffer serves all reads
 * because each read is consumed before the next allocation. */
#define READ_CHUNK 65536
/* When draining a dead worker's pipes, stop after this much: only a stray
 * that escaped the group kill could still be writing. */
#define DRAIN_MAX (1u << 20)

static char read_buf[READ_CHUNK];
static void (*tools_changed_cb)(const struct td_tool *tool);

void td_worker_on_tools_changed(void (*cb)(const struct td_tool *tool))
{
    tools_changed_cb = cb;
}

/* A frame before the response: progress (given to progress_cb), or an MCP
 * server's notice that its tools changed. false: body is the response. */
static bool on_notice(struct td_worker *w, const char *body, size_t len)
{
    json_t *progress = w->progress_cb ? te_progress_frame(body, len) : NULL;
    if (progress) {
        w->progress_cb(w->cb_data, progress);
        json_decref(progress);
        return true;
    }
    if (tools_changed_cb && (w->tool->mcp || w->tool->mcp_tool) &&
        te_tools_changed_frame(body, len)) {
        tools_changed_cb(w->tool);
        return true;
    }
    return false;
}

void td_worker_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(read_buf, sizeof(read_buf));
}

static json_t *quote(const char *p, size_t n)
{
    return td_json_text(p, n > TD_QUOTE_MAX ? TD_QUOTE_MAX : n);
}

/* A complete response frame arrived. */
static void on_frame(struct td_worker *w, char *body, size_t len)
{
    char why[256];
    /* a big {"ok": "..."} is kept as it came, not parsed (bigres.h); a
     * serving worker's is parsed: its calls' results are handed on one by one */
    json_t *res = w->tool->output_validator || w->serving ? NULL : td_big_frame(body, len, &w->big);
    int kind = res ? TE_RESULT_OK : te_response_parse(body, len, &res, why, sizeof(why));
    if (w->big) {
        td_worker_finish(w, res);
        return; /* body is the big result's */
    } else if (kind < 0) {
        td_worker_fail(w, TE_INVALID_RETURN, why,
                       json_pack("{s:s,s:o}", "error", why, "value", quote(body, len)), NULL);
    } else if (kind == TE_RESULT_RAISED) {
        json_t *raised = json_deep_copy(json_object_get(res, "raised"));
        const char *type = json_string_value(json_object_get(raised, "type"));
        const char *msg = json_string_value(json_object_get(raised, "message"));
        char detail[512];
        snprintf(detail, sizeof(detail), "%s%s%s", type ? type : "raised", msg ? ": " : "",
                 msg ? msg : "");
        json_object_set_new(raised, "stderr", td_worker_stderr_tail(w));
        td_worker_fail(w, TE_HANDLER_RAISED, detail, raised, NULL);
        json_decref(res);
    } else if (kind == TE_RESULT_HALT &&
               te_halt_reason_reserved(json_string_value(json_object_get(res, "halt")))) {
        const char *atom = json_string_value(json_object_get(res, "halt"));
        snprintf(why, sizeof(why), "halt reason \"%s\" is reserved", atom);
        td_worker_fail(w, TE_INVALID_RETURN, why, json_pack("{s:o}", "value", quote(body, len)),
                       json_pack("{s:s}", "reserved_halt_atom", atom));
        json_decref(res);
    } else if (w->serving && w->answer_cb &&
               td_worker_next(w->state, TD_WE_ANSWERED) != TD_W_ILLEGAL) {
        /* (once reaped, its answer is its last word: its result, below) */
        td_worker_step(w, TD_WE_ANSWERED);
        /* the call in flight ends; the worker waits for the next */
        uv_timer_stop(&w->timer);
        w->answer_cb(w->cb_data, res);
    } else {
        td_worker_finish(w, res);
    }
    free(body);
}

/* Its output over the limit: the call fails naming the limit's key
 * (limits.output_mb; --max-frame-bytes when the definition sets none) and,
 * for a frame, the length its prefix announced. */
static void output_over(struct td_worker *w, const uint32_t *frame_length)
{
    char detail[256], what[64];
    if (frame_length)
        snprintf(what, sizeof(what), "frame of %u bytes", *frame_length);
    else
        snprintf(what, sizeof(what), "output");
    snprintf(detail, sizeof(detail), "%s exceeds the limit of %u bytes (%s)", what, w->max_output,
             w->limits.output_mb ? "limits.output_mb" : "--max-frame-bytes");
    /* value in the key's unit: MiB, rounded up where --max-frame-bytes is
     * not a whole number of them */
    json_t *limit =
        json_pack("{s:s,s:I,s:s,s:I}", "name", "output_mb", "value",
                  (json_int_t)(((uint64_t)w->max_output + (1u << 20) - 1) >> 20), "reached",
                  frame_length ? "frame_length" : "stdout", "bytes", (json_int_t)w->max_output);
    json_t *cause = json_pack("{s:{s:I},s:o}", "output_limit", "limit", (json_int_t)w->max_output,
                              "resource_limit", limit);
    if (cause && frame_length) {
        json_object_set_new(cause, "frame_length", json_integer((json_int_t)*frame_length));
        json_object_set_new(cause, "limit", json_integer((json_int_t)w->max_output));
    }
    td_worker_fail(w, TE_INVALID_RETURN, detail, cause, NULL);
}

void td_worker_take_stdout(struct td_worker *w, const char *p, size_t n)
{
    if (td_wstate_has_result(w->state)) {
        w->discarded += n;
        return;
    }
    if (w->tool->protocol == TD_PROTO_PLAIN) {
        if (w->plain.raw + n > w->max_output) {
            output_over(w, NULL);
            return;
        }
        /* escaped as it comes once it may be a big text (plainesc.h); an
         * output validator reads the text as the tool wrote it */
        if (td_plain_feed(&w->plain, p, n, w->tool->output_validator ? 0 : TD_BIG_MIN) < 0)
            td_worker_fail(w, TE_HANDLER_EXIT, "out of memory", NULL, NULL);
        return;
    }
    if (w->head_len < sizeof(w->head)) {
        size_t k = n < sizeof(w->head) - w->head_len ? n : sizeof(w->head) - w->head_len;
        memcpy(w->head + w->head_len, p, k);
        w->head_len += k;
    }
    size_t used;
    int rc = te_frame_feed(&w->dec, p, n, &used);
    /* progress frames (and an MCP server's notices) come before the
     * response: read on past each */
    while (rc == TE_FRAME_DONE) {
        size_t len;
        char *body = te_frame_take(&w->dec, &len);
        if (!on_notice(w, body, len)) {
            w->discarded += n - used; /* counted before finish so the log says it */
            on_frame(w, body, len);
            return;
        }
        free(body);
        if (td_wstate_has_result(w->state)) /* cancelled from inside the callback */
            return;
        p += used;
        n -= used;
        rc = n ? te_frame_feed(&w->dec, p, n, &used) : 0;
    }
    if (rc == -EMSGSIZE && td_worker_not_a_frame(w)) {
        return;
    } else if (rc == -EMSGSIZE) {
        output_over(w, &w->dec.len);
    } else if (rc < 0) {
        td_worker_fail(w, TE_HANDLER_EXIT, "out of memory reading the response", NULL, NULL);
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

void td_worker_take_stderr(struct td_worker *w, const char *p, size_t n)
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

void td_worker_on_stdout(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct td_worker *w = s->data;
    if (n > 0)
        td_worker_take_stdout(w, buf->base, (size_t)n);
    else if (n < 0)
        uv_read_stop(s); /* EOF: the exit decides */
    /* An exited worker's output, left in the pipe while its client was not
     * reading, is read now: once the pipe is empty (n == 0 is EAGAIN: a
     * stray holds it open) or closed, the exit decides, as after td_worker_drain(). */
    if (n <= 0 && td_wstate_gone(w->state) && !td_wstate_has_result(w->state)) {
        uv_read_stop(s);
        td_worker_decide_on_exit(w);
    }
}

void td_worker_on_stderr(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct td_worker *w = s->data;
    if (n > 0)
        td_worker_take_stderr(w, buf->base, (size_t)n);
    else if (n < 0)
        uv_read_stop(s);
}

/* Read what a dead worker left in a pipe, without waiting. */
void td_worker_drain(struct td_worker *w, uv_pipe_t *p,
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
        /* A frame just taken may have finished the call, which closes this
         * pipe (uv_close closes its fd at once): reading on would read a
         * closed descriptor, or one the same turn reused (seen with strace:
         * read(fd) = EBADF after the result's events). */
        if (uv_is_closing((uv_handle_t *)p))
            break;
    }
}

void td_worker_throttle(struct td_worker *w, bool pause)
{
    if (td_wstate_has_result(w->state) || uv_is_closing((uv_handle_t *)&w->out))
        return;
    /* The worker then blocks on a full pipe; its timer keeps running. */
    w->paused = pause;
    if (pause)
        uv_read_stop((uv_stream_t *)&w->out);
    else
        uv_read_start((uv_stream_t *)&w->out, td_worker_alloc_cb, td_worker_on_stdout);
}
