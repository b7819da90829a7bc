/*
 * worker_exit.c - a call's process ending, seen from the loop (worker_int.h):
 * reaped (the reaper, the spawner or its template tells), or every process
 * gone by its init's report, or its timer: what it left in the pipes is
 * read, then its result decided (worker.c) or the one waiting goes out.
 */
#include <stdio.h>
#include <sys/resource.h>

#include "config.h"
#include "log.h"
#include "sandbox.h"
#include "toolexec.h"
#include "worker_int.h"

/* The reaper's first word, from inside its signal callback: kill what is
 * left of the group while its id cannot be another's; the exit itself
 * comes later (td_worker_on_exit). */
void td_worker_on_reaped(void *data)
{
    struct td_worker *w = data;
    td_worker_kill_group(w);
    td_worker_step(w, TD_WE_REAPED);
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
    td_worker_kill_group(w);
    td_worker_drain(w, &w->err, td_worker_take_stderr);
    /* Paused (its client is not reading): the output stays in the pipe
     * until the client catches up or the call times out, so a client that
     * never reads costs no more than its queue (td_worker_on_stdout decides then). */
    if (!td_wstate_has_result(w->state) && !w->paused) {
        td_worker_drain(w, &w->out, td_worker_take_stdout);
        td_worker_decide_on_exit(w);
    } else if (w->pending) {
        uv_timer_stop(&w->timer);
        if (!td_worker_hold_for_forked(w))
            td_worker_deliver(w, w->pending, &w->ru);
        return;
    }
    td_worker_maybe_free(w);
}

/* Closed, not stopped: it is not started again, and a stop now and a close
 * later (td_worker_maybe_free) take the fd out of epoll twice. The pipe
 * stays ours (a poll handle does not close its fd) for the last read. */
static void stop_expoll(struct td_worker *w)
{
    if (w->expolling)
        td_worker_close_handle(w, (uv_handle_t *)&w->expoll);
}

/* Calls ended on their init's report whose init is not reaped yet. The
 * kernel's teardown of a namespace is slower than a call: 200 trivial calls
 * at concurrency 12 finished with 83 inits still exiting (all gone 0.2 s
 * later), and 800 left 534. Unbounded, that backlog would hold a uid, a pid
 * and a worker each; past half of --max-workers a call waits for its reap
 * again, as before, which is the back-pressure (and keeps running plus
 * lingering calls within the 2 x --max-workers uids identity.c asks for). */
static unsigned lingering;

void td_worker_on_exit(void *data, int status, const struct rusage *ru)
{
    struct td_worker *w = data;
    bool ended = td_wstate_ended(w->state);
    if (!td_worker_step(w, TD_WE_EXITED))
        return;
    if (ended) { /* handled when its init reported */
        lingering--;
        td_worker_maybe_free(w);
        return;
    }
    stop_expoll(w);
    w->status = status;
    w->ru = *ru;
    td_sandbox_report_more(w->exfd, &w->rep);
    tool_gone(w);
}

/* The init's report pipe is readable: its status ends the call. */
void td_worker_on_report(uv_poll_t *p, int status, int events)
{
    (void)events;
    struct td_worker *w = p->data;
    int rc = status < 0 ? -1 : td_sandbox_report_more(w->exfd, &w->rep);
    if (rc == 0)
        return;
    stop_expoll(w);
    /* no status, or too many inits still exiting: the reap decides */
    if (rc < 0 || td_wstate_reaped(w->state) || lingering >= (td_cfg.max_workers + 1) / 2 ||
        !td_worker_step(w, TD_WE_INIT_ENDED))
        return;
    lingering++;
    td_logc(TD_LOG_DEBUG, w->batch_id, w->call_id, "its init reported: every process gone");
    tool_gone(w);
}

void td_worker_on_timeout(uv_timer_t *t)
{
    struct td_worker *w = t->data;
    w->timed_out = true;
    char detail[160];
    snprintf(detail, sizeof(detail), "exceeded its timeout of %llu ms%s",
             (unsigned long long)w->timeout_ms,
             w->paused ? " (its output paused: its client was not reading)" : "");
    td_worker_fail(w, TE_TIMEOUT, detail,
                   json_pack("{s:I,s:o}", "timeout_ms", (json_int_t)w->timeout_ms, "stderr",
                             td_worker_stderr_tail(w)),
                   NULL);
}
