/*
 * tw_net.c - testworker: the network a call has: a TCP connect ("connect"),
 * a request through the egress proxy ("proxy-tunnel"), and a server and
 * client of its own on 127.0.0.1 ("loopback").
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "testworker.h"

json_t *connect_mode(const json_t *args)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)arg_int(args, "port", 9));
    if (inet_pton(AF_INET, arg_str(args, "host", "127.0.0.1"), &sa.sin_addr) != 1)
        return te_error(json_string("connect: bad host"));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return te_ok(json_pack("{s:b, s:o, s:s}", "connected", 0, "errno", errno_json(errno),
                               "step", "socket"));
    int rc;
    while ((rc = connect(fd, (struct sockaddr *)&sa, sizeof sa)) < 0 && errno == EINTR)
        ;
    int e = errno;
    close(fd);
    if (rc == 0)
        return te_ok(json_pack("{s:b, s:n}", "connected", 1, "errno"));
    return te_ok(
        json_pack("{s:b, s:o, s:s}", "connected", 0, "errno", errno_json(e), "step", "connect"));
}

/* "proxy-tunnel" (test_warm_egress.py): a call through its egress proxy, as
 * an HTTP client that honours HTTPS_PROXY would do it. */
static size_t proxy_read(int fd, char *buf, size_t cap, bool head)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t k = read(fd, buf + n, head ? 1 : cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
        buf[n] = 0;
        if (head && n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    buf[n] = 0;
    return n;
}

static json_t *first_line(const char *s)
{
    const char *e = strstr(s, "\r\n");
    return json_stringn(s, e ? (size_t)(e - s) : strlen(s));
}

json_t *proxy_tunnel_mode(const json_t *args)
{
    const char *target = arg_str(args, "target", "127.0.0.1:9");
    const char *path = arg_str(args, "path", "/hello");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(3128)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return te_ok(json_pack("{s:o,s:s}", "errno", errno_json(errno), "step", "socket"));
    struct timeval tv = {20, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return te_ok(json_pack("{s:o,s:s}", "errno", errno_json(e), "step", "connect"));
    }
    static char buf[65536];
    int n = snprintf(buf, sizeof(buf), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
    if (write(fd, buf, (size_t)n) != n) {
        int e = errno;
        close(fd);
        return te_ok(json_pack("{s:o,s:s}", "errno", errno_json(e), "step", "write"));
    }
    proxy_read(fd, buf, sizeof(buf), true);
    char net[64];
    ssize_t nl = readlink("/proc/self/ns/net", net, sizeof(net) - 1);
    net[nl > 0 ? nl : 0] = 0;
    json_t *out = json_pack("{s:o,s:s}", "status", first_line(buf), "net", net);
    if (strstr(buf, " 200 ")) {
        n = snprintf(buf, sizeof(buf), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     path);
        if (write(fd, buf, (size_t)n) == n) {
            proxy_read(fd, buf, sizeof(buf), false);
            const char *body = strstr(buf, "\r\n\r\n");
            json_object_set_new(out, "inner", first_line(buf));
            json_object_set_new(out, "body", json_string(body ? body + 4 : ""));
        }
    }
    close(fd);
    return te_ok(out);
}

/* "loopback": serve and reach itself on 127.0.0.1 (a test suite binding
 * localhost): a listener on an ephemeral port, a client connected to it,
 * a few bytes across. {"served": true}, or the failing step and errno. */
json_t *loopback_mode(const json_t *args)
{
    (void)args;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c = -1, a = -1;
    const char *step = "socket";
    char got[5] = "";
    if (l >= 0 && (step = "bind", bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0) &&
        (step = "listen", listen(l, 1) == 0) &&
        (step = "getsockname", getsockname(l, (struct sockaddr *)&sa, &len) == 0) &&
        (step = "socket", (c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) &&
        (step = "connect", connect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0) &&
        (step = "accept", (a = accept(l, NULL, NULL)) >= 0) &&
        (step = "write", write(c, "ping", 4) == 4) && (step = "read", read(a, got, 4) == 4))
        step = NULL;
    int e = errno;
    int fds[] = {l, c, a};
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (!step)
        return te_ok(json_pack("{s:b,s:s}", "served", 1, "got", got));
    return te_ok(json_pack("{s:b,s:o,s:s}", "served", 0, "errno", errno_json(e), "step", step));
}
