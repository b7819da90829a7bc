/*
 * toolexecd-init - PID 1 of one call's PID namespace.
 *
 *   toolexecd-init TOOL [ARG...]      (environment passed to TOOL as is)
 *
 * The daemon starts each call in a fresh PID namespace with this program as
 * its first process. It starts the tool as PID 2, waits for it, reports the
 * tool's wait status to the daemon on fd 3 and exits. When it exits, the
 * kernel kills every other process left in the namespace, including strays
 * that double-forked and called setsid(): that is the guarantee a process
 * group kill cannot give. If the daemon dies, PR_SET_PDEATHSIG (set before
 * exec) kills this process and with it the namespace.
 *
 * The tool is not PID 1 itself because PID 1 ignores signals it has no
 * handler for: a tool that raise()s SIGSEGV must die like anywhere else.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"

extern char **environ;

static void report(int type, int a, int b)
{
    struct td_report_rec r = {type, a, b};
    ssize_t n = write(TD_REPORT_FD, &r, sizeof(r));
    (void)n;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 127;
    /* the tool must not inherit the report pipe */
    fcntl(TD_REPORT_FD, F_SETFD, FD_CLOEXEC);
    pid_t tool = vfork();
    if (tool == 0) {
        execve(argv[1], argv + 1, environ);
        report(TD_REPORT_FAILED, TD_STEP_EXEC, errno);
        _exit(127);
    }
    if (tool < 0) {
        report(TD_REPORT_FAILED, TD_STEP_SPAWN, errno);
        return 127;
    }
    /* Our copies of the pipes would hold the worker's stdout open after the
     * tool is gone. */
    close(0);
    close(1);
    close(2);
    for (;;) {
        int status;
        pid_t p = waitpid(-1, &status, 0);
        if (p == tool) {
            report(TD_REPORT_STATUS, status, 0);
            return 0;
        }
        if (p < 0 && errno != EINTR)
            return 127;
    }
}
