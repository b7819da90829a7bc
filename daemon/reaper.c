/*
 * reaper.c - SIGCHLD as an event on the loop. The signal handler (libuv's)
 * only wakes the loop; here, in loop context, we reap every exited child with
 * wait4(-1, WNOHANG) until none is left (signals coalesce, so one SIGCHLD may
 * stand for many exits) and hand each status to whoever watches that pid.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "toolexecd.h"

struct watch {
    pid_t pid;
    td_exit_cb cb;
    void *data;
    struct watch *next;
};

static uv_signal_t sigchld;
static struct watch *watches;

struct exited {
    pid_t pid;
    int status;
    struct rusage ru;
};

static void dispatch(pid_t pid, int status, const struct rusage *ru)
{
    struct watch **pp = &watches;
    while (*pp && (*pp)->pid != pid)
        pp = &(*pp)->next;
    struct watch *w = *pp;
    if (!w) {
        /* an orphan we adopted, or a child whose owner is gone */
        td_log(TD_LOG_DEBUG, "reaped untracked process %d", (int)pid);
        return;
    }
    *pp = w->next;
    w->cb(w->data, status, ru);
    free(w);
}

/* Reap first, then hand out: a callback may start a new worker, and if we
 * went on reaping in the same loop we would reap that one too, and so on:
 * a batch of fast tools would run to its end inside this one callback,
 * with every other client, timer and socket waiting (we saw a 50-call
 * batch do just that). Children that exit while we hand out raise a new
 * SIGCHLD, and so come back through the loop. */
static struct exited *batch;
static size_t cap;

static void on_sigchld(uv_signal_t *h, int signum)
{
    size_t n = 0;
    for (;;) {
        int status;
        struct rusage ru;
        pid_t pid = wait4(-1, &status, WNOHANG, &ru);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            break;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct exited *nb = realloc(batch, ncap * sizeof(*nb));
            if (!nb) { /* cannot hold it: hand it out now */
                dispatch(pid, status, &ru);
                continue;
            }
            batch = nb;
            cap = ncap;
        }
        batch[n++] = (struct exited){pid, status, ru};
    }
    for (size_t i = 0; i < n; i++)
        dispatch(batch[i].pid, batch[i].status, &batch[i].ru);
}

int td_reaper_start(void)
{
    int rc = uv_signal_init(td_loop, &sigchld);
    if (rc == 0)
        rc = uv_signal_start(&sigchld, on_sigchld, SIGCHLD);
    return rc;
}

void td_reaper_stop(void)
{
    free(batch);
    batch = NULL;
    cap = 0;
    uv_close((uv_handle_t *)&sigchld, NULL);
}

void td_reaper_watch(pid_t pid, td_exit_cb cb, void *data)
{
    struct watch *w = malloc(sizeof(*w));
    if (!w) {
        /* cannot track it: wait for it here rather than leak a zombie */
        int status;
        struct rusage ru = {0};
        while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
            ;
        cb(data, status, &ru);
        return;
    }
    *w = (struct watch){.pid = pid, .cb = cb, .data = data, .next = watches};
    watches = w;
}
