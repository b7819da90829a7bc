/*
 * reaper.c - SIGCHLD as an event on the loop, in two steps.
 *
 * The signal callback (libuv's handler only wakes the loop) reaps every
 * exited child with wait4(-1, WNOHANG) until none is left (signals coalesce,
 * so one SIGCHLD may stand for many exits), tells each watcher at once that
 * its pid is gone (reaped(): cheap, the last moment kill(-pid) is known to
 * reach the same group, since nothing has forked since), and queues the exit.
 * An idle handle then hands the queued exits to their watchers, a few per
 * loop iteration, with an epoll_wait between each few.
 *
 * Why not hand them out in the signal callback: an exit is where a call's
 * output is drained, decoded and sent, and where the next call starts. One
 * batch of 400 calls that each leave 1 MB in a grown stdout pipe then kept
 * the loop in this callback for 7.5 s (12 s in the issue): libuv reads the
 * signal pipe in a loop as long as it finds a full buffer, and the workers
 * started by one round of exits had exited by the next read, so no other
 * client was served until the batch was over (bench/latency.py bigexit).
 *
 * Why not a pidfd per worker on the loop: libuv runs the callbacks of every
 * ready descriptor of one epoll_wait before the next, so 16 workers exiting
 * together would still be handled back to back (16 x ~25 ms), and SIGCHLD
 * is needed anyway for the orphans we adopt as a subreaper.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/queue.h>
#include <sys/wait.h>

#include "config.h"
#include "log.h"
#include "reaper.h"

/* Exits handed on per loop iteration. One exit costs from ~0.3 ms (a
 * trivial call: its result sent, the next worker spawned) to ~25 ms (1 MB
 * drained, parsed, encoded and sent; p90 38 ms on 2 busy CPUs), against
 * 0.4 us for one more loop iteration (epoll_wait with a zero timeout): one
 * at a time costs the throughput nothing and bounds what a waiting client
 * sees to one exit. */
#define EXITS_PER_TURN 1

struct watch {
    pid_t pid;
    td_reaped_cb reaped;
    td_exit_cb cb;
    void *data;
    int status;
    struct rusage ru;
    union { /* on the watch list until reaped, then on the queue */
        SLIST_ENTRY(watch) watched;
        STAILQ_ENTRY(watch) queued;
    };
};

static uv_signal_t sigchld;
static uv_idle_t handout;
static SLIST_HEAD(, watch) watches = SLIST_HEAD_INITIALIZER(watches); /* not reaped yet */
static STAILQ_HEAD(, watch) queue = STAILQ_HEAD_INITIALIZER(queue);   /* reaped, to hand on */

static void on_handout(uv_idle_t *h)
{
    for (int i = 0; i < EXITS_PER_TURN && !STAILQ_EMPTY(&queue); i++) {
        struct watch *w = STAILQ_FIRST(&queue);
        STAILQ_REMOVE_HEAD(&queue, queued);
        /* the callback may start workers, whose exits queue behind */
        w->cb(w->data, w->status, &w->ru);
        free(w);
    }
    if (STAILQ_EMPTY(&queue))
        uv_idle_stop(h);
}

static void on_sigchld(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
    for (;;) {
        int status;
        struct rusage ru;
        pid_t pid = wait4(-1, &status, WNOHANG, &ru);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            break;
        struct watch *w;
        SLIST_FOREACH(w, &watches, watched)
            if (w->pid == pid)
                break;
        if (!w) {
            /* an orphan we adopted, or a child whose owner is gone */
            td_log(TD_LOG_DEBUG, "reaped untracked process %d", (int)pid);
            continue;
        }
        /* off the watch list now: the pid may be a new worker's next */
        SLIST_REMOVE(&watches, w, watch, watched);
        w->status = status;
        w->ru = ru;
        if (w->reaped)
            w->reaped(w->data);
        STAILQ_INSERT_TAIL(&queue, w, queued);
    }
    if (!STAILQ_EMPTY(&queue) && !uv_is_active((uv_handle_t *)&handout))
        uv_idle_start(&handout, on_handout);
}

int td_reaper_start(void)
{
    int rc = uv_signal_init(td_loop, &sigchld);
    if (rc == 0)
        rc = uv_idle_init(td_loop, &handout);
    if (rc == 0)
        rc = uv_signal_start(&sigchld, on_sigchld, SIGCHLD);
    return rc;
}

void td_reaper_stop(void)
{
    /* called once no worker is left: whatever is queued has no owner */
    while (!STAILQ_EMPTY(&queue)) {
        struct watch *w = STAILQ_FIRST(&queue);
        STAILQ_REMOVE_HEAD(&queue, queued);
        free(w);
    }
    uv_close((uv_handle_t *)&handout, NULL);
    uv_close((uv_handle_t *)&sigchld, NULL);
}

void td_reaper_watch(pid_t pid, td_reaped_cb reaped, td_exit_cb cb, void *data)
{
    struct watch *w = malloc(sizeof(*w));
    if (!w) {
        /* cannot track it: wait for it here rather than leak a zombie */
        int status;
        struct rusage ru = {0};
        while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
            ;
        if (reaped)
            reaped(data);
        cb(data, status, &ru);
        return;
    }
    *w = (struct watch){.pid = pid, .reaped = reaped, .cb = cb, .data = data};
    SLIST_INSERT_HEAD(&watches, w, watched);
}
