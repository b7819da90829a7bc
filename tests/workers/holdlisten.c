/*
 * holdlisten.so - an LD_PRELOAD for test_socket_ready: each listen() of the
 * daemon stops just before it, so the test can look at the socket files at
 * the moment a socket is bound but not listening yet (the file
 * must not be visible then, or a client waiting for it is refused).
 *
 * TE_HOLD_LISTEN=DIR: DIR holds two FIFOs the test made. Before each
 * listen() the bound name goes to DIR/held (one line), then one byte is read
 * from DIR/go; listen() runs after that byte. Unset: listen() as usual.
 * Built without sanitizers (memhog's reason): it is preloaded before them.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Whether the socket fd is bound to a name in the directory that holds
 * dir (the daemon's, where the test made the FIFOs): other listen()s (a
 * call's egress proxy, say) pass. */
static bool ours(int fd, const char *dir, struct sockaddr_un *sa)
{
    socklen_t len = sizeof(*sa);
    const char *slash = strrchr(dir, '/');
    if (!slash || getsockname(fd, (struct sockaddr *)sa, &len) < 0 || sa->sun_family != AF_UNIX ||
        len <= offsetof(struct sockaddr_un, sun_path) || !sa->sun_path[0])
        return false;
    size_t n = (size_t)(slash - dir);
    const char *name = sa->sun_path;
    return strncmp(name, dir, n) == 0 && name[n] == '/' && !strchr(name + n + 1, '/');
}

int listen(int fd, int backlog)
{
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
    const char *dir = getenv("TE_HOLD_LISTEN");
    struct sockaddr_un sa = {0};
    if (dir && ours(fd, dir, &sa)) {
        char path[4096], line[sizeof(sa.sun_path) + 2], c;
        int n = snprintf(line, sizeof(line), "%.*s\n", (int)sizeof(sa.sun_path), sa.sun_path);
        snprintf(path, sizeof(path), "%s/held", dir);
        int w = open(path, O_WRONLY | O_CLOEXEC);
        if (w >= 0) {
            if (write(w, line, (size_t)n) != n)
                fprintf(stderr, "holdlisten: %s: short write\n", path);
            close(w);
        }
        snprintf(path, sizeof(path), "%s/go", dir);
        /* Until a byte comes: an open that meets the writer of the hold
         * before (still closing its end) reads end-of-file, not this
         * hold's byte; then the test's next write would find no reader
         * and block for good (CI saw that once under load: "no byte",
         * then a 180 s timeout). Opened again, it waits for that writer. */
        for (;;) {
            int r = open(path, O_RDONLY | O_CLOEXEC);
            if (r < 0) {
                fprintf(stderr, "holdlisten: %s: cannot open\n", path);
                break;
            }
            ssize_t got = read(r, &c, 1);
            close(r);
            if (got == 1)
                break;
            if (got < 0) {
                fprintf(stderr, "holdlisten: %s: cannot read\n", path);
                break;
            }
        }
    } else if (dir) {
        fprintf(stderr, "holdlisten: not held: fd %d\n", fd);
    }
    return real(fd, backlog);
}
