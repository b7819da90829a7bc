/*
 * holdlisten.so - an LD_PRELOAD for test_socket_ready: each listen() of the
 * daemon stops just before it, so the test can look at the socket files at
 * the moment a socket is bound but not listening yet (issue 20: the file
 * must not be visible then, or a client waiting for it is refused).
 *
 * TE_HOLD_LISTEN=DIR: DIR holds two FIFOs the test made. Before each
 * listen() the bound name goes to DIR/held (one line), then one byte is read
 * from DIR/go; listen() runs after that byte. Unset: listen() as usual.
 * Built without sanitizers (memhog's reason): it is preloaded before them.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int listen(int fd, int backlog)
{
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
    const char *dir = getenv("TE_HOLD_LISTEN");
    if (dir) {
        struct sockaddr_un sa = {0};
        socklen_t len = sizeof(sa);
        char path[4096], line[sizeof(sa.sun_path) + 2];
        if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
            sa.sun_path[0] = '\0';
        int n = snprintf(line, sizeof(line), "%.*s\n", (int)sizeof(sa.sun_path), sa.sun_path);
        snprintf(path, sizeof(path), "%s/held", dir);
        int w = open(path, O_WRONLY | O_CLOEXEC);
        if (w >= 0) {
            if (write(w, line, (size_t)n) < 0)
                abort();
            close(w);
        }
        snprintf(path, sizeof(path), "%s/go", dir);
        int r = open(path, O_RDONLY | O_CLOEXEC);
        char c;
        if (r >= 0) {
            if (read(r, &c, 1) != 1)
                abort();
            close(r);
        }
    }
    return real(fd, backlog);
}
