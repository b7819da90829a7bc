/*
 * worker_state.c - a worker's lifetime (worker_int.h): one table of its
 * states and the events that move it, and the step that follows it. The
 * rest of the worker asks the state, not a set of flags, what has happened.
 */

#include "log.h"
#include "worker_int.h"

/* Short names for the table only. */
#define START TD_W_STARTING
#define RUN TD_W_RUNNING
#define REAPING TD_W_REAPING
#define ENDED TD_W_ENDED
#define ENDED_R TD_W_ENDED_REAPING
#define EXITED TD_W_EXITED
#define RES TD_W_RESULT
#define RES_R TD_W_RESULT_REAPING
#define RES_E TD_W_RESULT_ENDED
#define RES_ER TD_W_RESULT_ENDED_REAPING
#define DONE TD_W_DONE
#define CLOSING TD_W_CLOSING
#define XX TD_W_ILLEGAL

/* next[state][event]. Spawned where a kill was already asked (the result
 * taken, or its init reported) keeps the state: the process is killed as
 * it comes. No event follows CLOSING: the worker is freed with its handles. */
// clang-format off
static const unsigned char next[TD_W_NSTATES][TD_WE_NEVENTS] = {
    /*           spawned  reaped   init_end exited   result   close    answered */
    [START]    = {RUN,     REAPING, ENDED,   XX,      RES,     XX,      START},
    [RUN]      = {XX,      REAPING, ENDED,   XX,      RES,     XX,      RUN},
    [REAPING]  = {XX,      XX,      ENDED_R, EXITED,  RES_R,   XX,      XX},
    [ENDED]    = {ENDED,   ENDED_R, XX,      XX,      RES_E,   XX,      ENDED},
    [ENDED_R]  = {XX,      XX,      XX,      EXITED,  RES_ER,  XX,      XX},
    [EXITED]   = {XX,      XX,      XX,      XX,      DONE,    XX,      XX},
    [RES]      = {RES,     RES_R,   RES_E,   XX,      XX,      XX,      XX},
    [RES_R]    = {XX,      XX,      RES_ER,  DONE,    XX,      XX,      XX},
    [RES_E]    = {RES_E,   RES_ER,  XX,      XX,      XX,      XX,      XX},
    [RES_ER]   = {XX,      XX,      XX,      DONE,    XX,      XX,      XX},
    [DONE]     = {XX,      XX,      XX,      XX,      XX,      CLOSING, XX},
    [CLOSING]  = {XX,      XX,      XX,      XX,      XX,      XX,      XX},
};
// clang-format on

enum td_wstate td_worker_next(enum td_wstate s, enum td_wevent ev)
{
    if ((unsigned)s >= TD_W_NSTATES || (unsigned)ev >= TD_WE_NEVENTS)
        return TD_W_ILLEGAL;
    return (enum td_wstate)next[s][ev];
}

const char *td_wstate_name(enum td_wstate s)
{
    static const char *const names[] = {
        "starting", "running", "reaping",        "ended",        "ended_reaping",
        "exited",   "result",  "result_reaping", "result_ended", "result_ended_reaping",
        "done",     "closing"};
    return (unsigned)s < TD_W_NSTATES ? names[s] : "illegal";
}

const char *td_wevent_name(enum td_wevent ev)
{
    static const char *const names[] = {"spawned", "reaped", "init_ended", "exited",
                                        "result",  "close",  "answered"};
    return (unsigned)ev < TD_WE_NEVENTS ? names[ev] : "?";
}

bool td_wstate_has_result(enum td_wstate s)
{
    return s >= TD_W_RESULT && s <= TD_W_CLOSING;
}

bool td_wstate_reaped(enum td_wstate s)
{
    return s == TD_W_EXITED || s == TD_W_DONE || s == TD_W_CLOSING;
}

bool td_wstate_pid_gone(enum td_wstate s)
{
    return td_wstate_reaped(s) || s == TD_W_REAPING || s == TD_W_ENDED_REAPING ||
           s == TD_W_RESULT_REAPING || s == TD_W_RESULT_ENDED_REAPING;
}

bool td_wstate_ended(enum td_wstate s)
{
    return s == TD_W_ENDED || s == TD_W_ENDED_REAPING || s == TD_W_RESULT_ENDED ||
           s == TD_W_RESULT_ENDED_REAPING;
}

bool td_wstate_gone(enum td_wstate s)
{
    return td_wstate_ended(s) || td_wstate_reaped(s);
}

bool td_worker_step(struct td_worker *w, enum td_wevent ev)
{
    enum td_wstate to = td_worker_next(w->state, ev);
    if (to == TD_W_ILLEGAL) {
        td_logc(TD_LOG_ERR, w->batch_id, w->call_id,
                "worker %d: %s in state %s is no transition; ignored", (int)w->pid,
                td_wevent_name(ev), td_wstate_name(w->state));
        return false; /* logged, not asserted: the daemon stays up */
    }
    w->state = to;
    return true;
}
