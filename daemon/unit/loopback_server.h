/*
 * loopback_server.h - a TCP server on 127.0.0.1 in a thread of a unit test
 * (test_mcp_auth.c, test_mcp_auth_fetch.c): each connection is handed to
 * serve() in turn, then closed. After cmocka.h.
 */
#ifndef LOOPBACK_SERVER_H
#define LOOPBACK_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

struct lo_server {
    int fd, port;
    pthread_t th;
    volatile int stop;
    void (*serve)(int c);
};

/* A listening socket on 127.0.0.1, its port in *port. */
static inline int lo_listen(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static inline void *lo_main(void *arg)
{
    struct lo_server *s = arg;
    while (!s->stop) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0) /* 20 ms: how soon lo_stop is seen */
            continue;
        int c = accept(s->fd, NULL, NULL);
        if (c >= 0) {
            s->serve(c);
            close(c);
        }
    }
    return NULL;
}

static inline void lo_start(struct lo_server *s, void (*serve)(int c))
{
    s->fd = lo_listen(&s->port);
    s->stop = 0;
    s->serve = serve;
    assert_int_equal(pthread_create(&s->th, NULL, lo_main, s), 0);
}

static inline void lo_stop(struct lo_server *s)
{
    s->stop = 1;
    pthread_join(s->th, NULL);
    close(s->fd);
}

#endif
