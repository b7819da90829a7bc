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

static void on_sigchld(uv_signal_t *h, int signum)
{
    for (;;) {
        int status;
        struct rusage ru;
        pid_t pid = wait4(-1, &status, WNOHANG, &ru);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            break;
        struct watch **pp = &watches;
        while (*pp && (*pp)->pid != pid)
            pp = &(*pp)->next;
        struct watch *w = *pp;
        if (!w) {
            /* an orphan we adopted, or a child whose owner is gone */
            td_log(TD_LOG_DEBUG, "reaped untracked process %d", (int)pid);
            continue;
        }
        *pp = w->next;
        w->cb(w->data, status, &ru);
        free(w);
    }
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
