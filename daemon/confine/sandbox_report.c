/*
 * sandbox_report.c - what a call's process says and how its tool is killed,
 * seen from the daemon: the records of its report pipe (report.h: a failed
 * set-up step, the init's word on the tool's status and resource use), and
 * SIGKILL for the tool under its init, found safely through /proc and a
 * pidfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pidinfo.h"
#include "report.h"
#include "sandbox.h"

static const char *const step_names[TD_STEP_COUNT] = TD_STEP_NAMES;

static void take_rec(struct td_report *r, const struct td_report_rec *rec)
{
    if (rec->type == TD_REPORT_FAILED && !r->failed) {
        r->failed = true;
        r->step = (unsigned)rec->a < TD_STEP_COUNT ? step_names[rec->a] : "setup";
        r->err = rec->b;
    } else if (rec->type == TD_REPORT_STATUS) {
        r->have_status = true;
        r->status = rec->a;
    } else if (rec->type == TD_REPORT_CPU) {
        r->have_usage = true;
        r->user_ms = rec->a;
        r->sys_ms = rec->b;
    } else if (rec->type == TD_REPORT_RSS) {
        r->maxrss_kb = rec->a;
    }
}

int td_sandbox_report_more(int fd, struct td_report *r)
{
    /* Records are written whole (12 bytes, under PIPE_BUF: atomic), so the
     * pipe holds whole ones only and a read of a multiple of 12 bytes
     * takes whole ones: the init's three in one read, rather than one read
     * each and one more for EAGAIN. A read short of the buffer emptied
     * the pipe: what comes later (or its end) is read at the next call. */
    struct td_report_rec recs[16];
    ssize_t n;
    for (;;) {
        n = read(fd, recs, sizeof(recs));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (size_t i = 0; i < (size_t)n / sizeof(recs[0]); i++)
            take_rec(r, &recs[i]);
        if ((size_t)n < sizeof(recs))
            return r->have_status ? 1 : 0;
    }
    if (r->have_status)
        return 1;
    return n < 0 && errno == EAGAIN ? 0 : -1;
}

void td_sandbox_report(int fd, struct td_report *r)
{
    memset(r, 0, sizeof(*r));
    td_sandbox_report_more(fd, r);
}

/* The init's children as the kernel lists them (global pids), or 0 for
 * none. One small procfs read, a few microseconds. */
static pid_t init_child(pid_t init)
{
    char path[64], buf[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)init, (int)init);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return -e;
    buf[n] = 0;
    return (pid_t)strtol(buf, NULL, 10);
}

pid_t td_sandbox_pidfd_pid(int fd)
{
    pid_t pid;
    return td_pidfd_ids(fd, &pid, NULL) == 0 ? pid : 0;
}

bool td_pidfd_alive(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

/* init_pidfd >= 0: the init is not our child (a warm call's PID 1, the
 * template's; a cold call's init, the spawner's), so its pid is proven not
 * reused by its pidfd, last: `init` was learned from the pidfd while it
 * lived, and a process that has not exited keeps its pid. */
static int kill_tool(pid_t init, int init_pidfd, int sig)
{
    pid_t tool = init_child(init);
    if (tool <= 0)
        return tool; /* gone already (the init reports and exits), or an error */
    /* A pidfd pins the process; that it is still the init's child proves
     * the pid was not reused in between. */
    int pfd = (int)syscall(SYS_pidfd_open, tool, 0);
    if (pfd < 0)
        return errno == ESRCH ? 0 : -errno;
    int rc = 0;
    if (init_child(init) != tool)
        rc = 0; /* reaped between the reads: nothing to kill */
    else if (init_pidfd >= 0 && !td_pidfd_alive(init_pidfd))
        rc = -ESRCH; /* the init is gone: its pid may be another's */
    else if (syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0) < 0 && errno != ESRCH)
        rc = -errno;
    close(pfd);
    return rc;
}

int td_sandbox_kill_tool(pid_t init, int sig)
{
    return kill_tool(init, -1, sig);
}

int td_sandbox_kill_tool_pidfd(int init_pidfd, pid_t init, int sig)
{
    return init > 0 ? kill_tool(init, init_pidfd, sig) : -ESRCH;
}
