/*
 * mcp_relay.c - the floor of any process between an MCP client and a stdio
 * MCP server: one extra hop and nothing else (bench/mcp_shared.py's
 * "relay").
 *
 *   mcp_relay SOCKET -- COMMAND...
 *
 * Starts COMMAND on two pipes, listens on the Unix socket SOCKET, accepts
 * one connection and copies bytes both ways (client to the server's stdin,
 * the server's stdout to the client) until either side ends: no parsing,
 * no framing, no allocation per message, one poll and one read and one
 * write per message each way. Whatever the daemon does on a shared call
 * beyond this (a batch, its events, a frame to the bridge, the bridge's
 * own JSON) is what a mediated design can hope to cut.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void fail(const char *what)
{
    fprintf(stderr, "mcp_relay: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* n bytes of buf written whole to fd; false once it is gone. */
static int write_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fputs("usage: mcp_relay SOCKET -- COMMAND...\n", stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
        fail("pipe");
    pid_t pid = fork();
    if (pid < 0)
        fail("fork");
    if (pid == 0) {
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[3], argv + 3);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);

    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(argv[1]) >= sizeof(a.sun_path)) {
        fputs("mcp_relay: socket path too long\n", stderr);
        return 2;
    }
    strcpy(a.sun_path, argv[1]);
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 1) < 0)
        fail("listen");
    int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        fail("accept");
    close(ls);

    static char buf[1 << 16];
    struct pollfd p[2] = {{.fd = c, .events = POLLIN}, {.fd = out[0], .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            fail("poll");
        }
        for (int k = 0; k < 2; k++) {
            if (!p[k].revents)
                continue;
            ssize_t r = read(p[k].fd, buf, sizeof(buf));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0 || write_all(k == 0 ? in[1] : c, buf, (size_t)r) < 0)
                goto end;
        }
    }
end:
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 0;
}
