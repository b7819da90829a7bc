/*
 * bridge_attach.c - toolexec-mcp-bridge attach PID IN OUT MODE...: the MCP
 * client for a server started by someone else.
 *
 * A warm Python server's call (defs/mcppy.c): the call's process, a fresh
 * fork of a template that has imported the server's module, forks the
 * server on two pipes and execs the bridge, which is then the server's
 * parent as it would be had it started the server itself. Everything after
 * the start (the handshake, the call, the server's end watched by a pidfd,
 * the response frame) is the bridge's usual code: only how the server came
 * to be differs. What is checked here is that what is named is what it
 * says: the server our child, IN a pipe we may write, OUT one we may read.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bridge_attach.h"

static void refuse(const char *fmt, const char *what, const char *why)
{
    fputs("toolexec-mcp-bridge: attach: ", stderr);
    fprintf(stderr, fmt, what, why);
    fputc('\n', stderr);
    exit(2);
}

static long number(const char *s, long min, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > INT_MAX)
        refuse("%s: not a number we take: %s", what, s);
    return v;
}

/* fd open for mode (O_RDONLY, O_WRONLY), and closed at our exec (the
 * bridge runs nothing, but no descriptor of the call's should pass on) */
static int pipe_end(const char *s, int mode, const char *what)
{
    int fd = (int)number(s, 3, what);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        refuse("%s: %s", what, strerror(errno));
    if ((fl & O_ACCMODE) != mode)
        refuse("%s: %s", what, mode == O_RDONLY ? "not open for reading" : "not open for writing");
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

int bridge_attach(int argc, char **argv, pid_t *pid, int *in, int *out, int *pidfd)
{
    if (argc < 2 || strcmp(argv[1], "attach"))
        return 0;
    if (argc < 5)
        refuse("%s%s: expected attach PID IN OUT, then the mode", "", "");
    *pid = (pid_t)number(argv[2], 2, "PID");
    *in = pipe_end(argv[3], O_WRONLY, "IN");
    *out = pipe_end(argv[4], O_RDONLY, "OUT");
    if (*in == *out)
        refuse("%s%s: IN and OUT are one descriptor", "", "");
    /* our child (an exited one too, not yet reaped): what we will wait for
     * and kill at the end is no other process */
    siginfo_t si;
    if (waitid(P_PID, *pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        refuse("PID %s: %s", argv[2], errno == ECHILD ? "not a child of ours" : strerror(errno));
    *pidfd = (int)syscall(SYS_pidfd_open, *pid, 0);
    return 4;
}
