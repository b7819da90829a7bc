/*
 * worker_int.h - a call's worker (worker.h) as its parts share it. Each
 * calls only those below it:
 *
 *   worker_start.c   starting it: cold (here or through the spawner), warm
 *                    (the template forks it); its environment, its request
 *   worker_exit.c    its process's end: reaped, its init's report, its timer
 *   worker_output.c  what it writes: frames, plain stdout, stderr
 *   worker.c         its result: decided at its exit, finished, delivered;
 *                    its processes killed; the worker freed
 *   worker_state.c   its lifetime: the table of states and events below
 *
 * It includes no public header of theirs (worker.h): the callbacks' types
 * are spelled out in struct td_worker.
 */
#ifndef TD_WORKER_INT_H
#define TD_WORKER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <jansson.h>
#include <uv.h>

#include "config.h"
#include "denials.h"
#include "plainesc.h"
#include "sandbox.h"
#include "toolexec.h"

struct td_big;
struct td_call_facts;
struct td_cgroup;
struct td_proxy;
struct td_sysnotify;
struct td_tool;
struct td_warm_call;

/* Last bytes of a worker's stderr kept for the error cause. */
#define TD_STDERR_TAIL 4096
/* Last bytes of its stderr a failed call's message quotes, for the model. */
#define TD_STDERR_MODEL 1024
/* stderr lines logged per call; the rest only reach the tail, so a flooding
 * worker cannot flood the journal. */
#define TD_STDERR_LOG_LINES 64
/* The part of an offending response quoted in an invalid_return cause. */
#define TD_QUOTE_MAX 1024

/* Longest stderr line logged as one line. */
#define LOG_LINE_MAX 512

/*
 * A worker's lifetime: its process (asked for, running, all gone by its
 * init's report, reaped) and its result (not known, then taken) move on
 * their own, so a state is where both are. td_worker_step() moves it on an
 * event by one table (worker_state.c); an event a state has no entry for
 * is a bug: asserted, and refused (logged, false) where asserts are off.
 *
 *      no result yet                       its result taken
 *
 *   STARTING --spawned--> RUNNING             RESULT
 *      |                     |                   |
 *      +----------+----------+              +----+-------+
 *   reaped        |      init_ended      reaped     init_ended
 *      v          |          v              v            v
 *   REAPING       |        ENDED       RESULT_REAPING  RESULT_ENDED
 *      |    init_ended       | reaped       |   init_ended   | reaped
 *      |          v          v              |        v       v
 *      |        ENDED_REAPING               |  RESULT_ENDED_REAPING
 *    exited           | exited            exited          | exited
 *      v              v                     v             v
 *   EXITED <----------+                   DONE <----------+
 *                                            | close
 *                                            v
 *                                         CLOSING (freed with its last handle)
 *
 * result (td_worker_finish) leads from each state on the left to its place
 * on the right: STARTING and RUNNING to RESULT, REAPING to RESULT_REAPING,
 * ..., EXITED to DONE; a second result is dropped. spawned in ENDED, RESULT
 * or RESULT_ENDED keeps the state: a kill was asked, the process is killed
 * as it comes. "reaped" is the reaper's first word: from then on the pid
 * may be another's, so no group is killed by it; "exited" is its exit
 * status handled. The result is handed over when taken if every process is
 * gone, else at "exited" (or REAP_WAIT_MS later without its resource use,
 * or at once for a cancel): w->pending holds it until then.
 *
 * A serving worker (an instance of an MCP server, instance.c) answers many
 * calls: each response frame is "answered", which keeps STARTING, RUNNING
 * or ENDED as they are (a frame written before its end is still read);
 * its one result is its own end (a crash, a timeout, a cancel).
 */
enum td_wstate {
    TD_W_STARTING, /* the spawner or a template asked: no process yet */
    TD_W_RUNNING,
    TD_W_REAPING, /* reaped, its exit not handled yet: its pid may be reused */
    TD_W_ENDED,   /* its init reported every process gone; not reaped */
    TD_W_ENDED_REAPING,
    TD_W_EXITED, /* its exit handled; its result not known (output paused) */
    TD_W_RESULT, /* result taken, its processes killed; not reaped */
    TD_W_RESULT_REAPING,
    TD_W_RESULT_ENDED, /* its init's report after (or before) the result */
    TD_W_RESULT_ENDED_REAPING,
    TD_W_DONE,    /* result taken, exit handled: its handles close next */
    TD_W_CLOSING, /* its handles closing: freed with the last */
    TD_W_NSTATES,
    TD_W_ILLEGAL = TD_W_NSTATES /* the table's "no such transition" */
};
enum td_wevent {
    TD_WE_SPAWNED,    /* its process forked (the spawner's, a template's) */
    TD_WE_REAPED,     /* the reaper's first word (td_worker_on_reaped) */
    TD_WE_INIT_ENDED, /* its init's report: every process gone */
    TD_WE_EXITED,     /* its exit handled (td_worker_on_exit) */
    TD_WE_RESULT,     /* its result taken (td_worker_finish) */
    TD_WE_CLOSE,      /* result out and reaped: its handles close */
    /* a serving worker's (an MCP server's instance, instance.c) response
     * frame: it ends that call, not the worker, which stays where it was */
    TD_WE_ANSWERED,
    TD_WE_NEVENTS
};
/* The table's entry: the state after ev, TD_W_ILLEGAL where there is none. */
enum td_wstate td_worker_next(enum td_wstate s, enum td_wevent ev);
const char *td_wstate_name(enum td_wstate s);
const char *td_wevent_name(enum td_wevent ev);
/* Whether its result is taken; its exit handled; its pid gone (the
 * reaper's first word seen); every process of it gone (its init's report,
 * or reaped). */
bool td_wstate_has_result(enum td_wstate s);
bool td_wstate_reaped(enum td_wstate s);
bool td_wstate_pid_gone(enum td_wstate s);
bool td_wstate_gone(enum td_wstate s);
/* Its init reported every process gone (and it is not reaped yet). */
bool td_wstate_ended(enum td_wstate s);

struct td_worker {
    struct td_tool *tool;
    char *batch_id, *call_id, *workdir;
    uint64_t timeout_ms;
    pid_t pid;
    enum td_wstate state; /* its lifetime (above); moved by td_worker_step() only */
    int handles;          /* open libuv handles */
    uv_pipe_t in, out, err;
    uv_timer_t timer;
    uv_write_t wreq;
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    char *reqbody;
    int exfd;
    int status;
    struct rusage ru;
    te_frame_decoder dec;
    struct td_plain plain; /* a plain tool's stdout (plainesc.h) */
    struct td_big *big;    /* a big result's text (bigres.h) until it is handed over */
    size_t discarded;      /* stdout bytes after the result was known */
    char tail[TD_STDERR_TAIL];
    size_t tail_len;
    struct td_limits limits; /* in force for this call */
    uint32_t max_output;     /* largest response frame / plain stdout */
    char line[LOG_LINE_MAX];
    size_t line_len;
    unsigned lines_logged;
    void (*cb)(void *data, json_t *result, const struct td_call_facts *facts); /* td_result_cb */
    void *cb_data;
    json_t *pending; /* the result, waiting for the killed worker's reaping */
    /* its owner cancelled it: the result goes out at once, not at the
     * reap, and every process of it (its cgroup's too) is killed at once */
    bool cancelled;
    bool timed_out;            /* its timer fired: an MCP server's bridge is told so first */
    uid_t call_uid;            /* its own uid (identity.c), (uid_t)-1 for none */
    long long run_uid;         /* the uid it runs as (the audit record's); -1: not known */
    bool paused;               /* its client is not reading: stdout is left in the pipe */
    struct td_cgroup *cg;      /* the call's cgroup, NULL without one */
    bool cg_memory;            /* memory_mb is its memory.max */
    struct td_denials denied;  /* what its confinement refused (denials.h) */
    struct td_sysnotify *sysn; /* answers its denied system calls (sysnotify.c); NULL: none */
    /* under toolexecd-init, what it reported (the tool's status
     * and resource use), read once at its exit */
    bool init;
    struct td_report rep;
    /* The init's report pipe watched while the call runs: its status, its
     * last word, says every process of the call is gone, so the call ends
     * there ("ended"), ~0.35-0.65 ms before the init's own exit (its
     * namespace's teardown) is reaped. The reap still frees the uid, the
     * cgroup and the directory. */
    uv_poll_t expoll;
    bool expolling; /* expoll is a handle of ours */
    /* the first bytes of a framed worker's stdout, to tell text
     * (a plain tool left on the framed protocol) from a frame */
    char head[48];
    size_t head_len;
    /* egress: the proxy serving its allow-list (proxy.c), until it ends */
    struct td_proxy *egress;
    /* td_progress_cb: progress frames before the response */
    void (*progress_cb)(void *data, const json_t *progress);
    /* warm start (template.c): a fork of the tool's template */
    struct td_warm_call *warm;
    int pidfd;       /* the call's PID 1, once forked; -1 before */
    pid_t pidfd_pid; /* its pid, learned with it (kill_tool needs it; no fdinfo read again) */
    /* started by the spawner (spawner.c), off the loop: its pid
     * and pidfd (ours to close) come later, its end from the spawner */
    bool via_spawner;
    bool spawn_failed; /* it never started: warm_why says why */
    uint64_t spawn_t0;
    char *warm_why; /* it never ran, or its template died */
    /* serving (instance.c): stdin kept open, one request frame written per
     * call (td_worker_send), each response frame handed to answer_cb; the
     * timer is the call in flight's */
    bool serving;
    void (*answer_cb)(void *data, json_t *result); /* td_answer_cb */
    uint8_t sendhdr[TE_FRAME_HEADER_LEN];
    char *sendbody;
    uv_write_t sendreq;
};

/* worker_state.c */
/* w moved by ev (the table above); false, w unchanged and an error logged
 * (asserted) where the table has no such transition. */
bool td_worker_step(struct td_worker *w, enum td_wevent ev);

/* worker.c */
/* One more worker alive (td_workers_alive), until its last handle closes. */
void td_worker_counted(void);
/* h closed, once: the worker is freed with its last handle. */
void td_worker_close_handle(struct td_worker *w, uv_handle_t *h);
/* Freed once the result is delivered and the process reaped. */
void td_worker_maybe_free(struct td_worker *w);
/* SIGKILL for what is left of the call's processes (see worker.c). */
void td_worker_kill_group(struct td_worker *w);
/* The result handed over, with the worker's resource use when it is known. */
void td_worker_deliver(struct td_worker *w, json_t *result, const struct rusage *ru);
/* The result (w->pending) of a warm call that ended before its template's
 * "forked" came, whose uid comes with it: held for it, at most a second
 * (true), or false: no need, deliver it now. */
bool td_worker_hold_for_forked(struct td_worker *w);
/* A warm call's "forked" heard after its result and end: the result held
 * for the record's uid goes now. */
void td_worker_forked_late(struct td_worker *w);
/* The call's result is known (taken): its processes killed, the result
 * delivered now or once they are reaped. A second result is dropped. */
void td_worker_finish(struct td_worker *w, json_t *result);
/* td_worker_finish() with a tool error of this reason. */
void td_worker_fail(struct td_worker *w, te_reason reason, const char *detail, json_t *cause,
                    json_t *metadata);
/* The kept tail of its stderr, as a JSON string. */
json_t *td_worker_stderr_tail(struct td_worker *w);
/* A framed tool's stdout began with text: failed as invalid_return, true. */
bool td_worker_not_a_frame(struct td_worker *w);
/* The worker exited before its result was known: what that means. */
void td_worker_decide_on_exit(struct td_worker *w);

/* worker_output.c */
/* libuv's buffer for every read of a worker pipe (one static buffer). */
void td_worker_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void td_worker_on_stdout(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
void td_worker_on_stderr(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
void td_worker_take_stdout(struct td_worker *w, const char *p, size_t n);
void td_worker_take_stderr(struct td_worker *w, const char *p, size_t n);
/* What a dead worker left in p, read without waiting, given to take. */
void td_worker_drain(struct td_worker *w, uv_pipe_t *p,
                     void (*take)(struct td_worker *, const char *, size_t));

/* worker_exit.c */
/* The reaper's callbacks (td_reaper_watch), and the spawner's and the
 * template's in their stead. */
void td_worker_on_reaped(void *data);
void td_worker_on_exit(void *data, int status, const struct rusage *ru);
/* The init's report pipe is readable. */
void td_worker_on_report(uv_poll_t *p, int status, int events);
void td_worker_on_timeout(uv_timer_t *t);

#endif
