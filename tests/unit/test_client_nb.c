/* Unit tests of lib/client.c's non-blocking mode on real Unix sockets: a
 * connect to a listener whose backlog is full fails at once (-EAGAIN); a
 * line that comes in pieces gives -EAGAIN, keeps what came, and is whole
 * once its newline does; a send the socket cannot take is queued, a send
 * past the queue's bound is refused (-ENOBUFS) and loses nothing queued,
 * and te_client_flush() sends the queue once the peer reads. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "toolexec.h"

static char path[108];

/* A listener at path with a backlog of 0 that never accepts. */
static int listener(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CHECK(listen(fd, 0) == 0);
    return fd;
}

static void connect_fails_fast_when_the_backlog_is_full(void)
{
    int l = listener();
    te_client *held[8] = {0}, *c = NULL;
    int rc = 0;
    size_t n = 0;
    /* fill the backlog: a blocking connect would now wait for ever */
    while (n < 8 && (rc = te_client_connect_nb(path, 1024, &held[n])) == 0)
        n++;
    CHECK(rc == -EAGAIN && n >= 1 && n < 8);
    CHECK(te_client_connect_nb(path, 1024, &c) == -EAGAIN && c == NULL);
    for (size_t i = 0; i < n; i++)
        te_client_close(held[i]);
    close(l);
    unlink(path);
}

/* the peer's end of a connection to a listener at path */
static int pair(te_client **c, size_t queue_max)
{
    int l = listener();
    CHECK(te_client_connect_nb(path, queue_max, c) == 0);
    int peer = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK(peer >= 0);
    close(l);
    unlink(path);
    return peer;
}

static void a_partial_line_is_kept(void)
{
    te_client *c;
    int peer = pair(&c, 1024);
    json_t *ev = NULL;
    CHECK(te_client_recv(c, &ev) == -EAGAIN && !ev);
    CHECK(write(peer, "{\"event\":\"x\",", 13) == 13);
    CHECK(te_client_recv(c, &ev) == -EAGAIN && !ev);
    CHECK(write(peer, "\"n\":1}\n{\"ev", 11) == 11);
    CHECK(te_client_recv(c, &ev) == 0 && ev);
    CHECK_STR(json_string_value(json_object_get(ev, "event")), "x");
    CHECK(json_integer_value(json_object_get(ev, "n")) == 1);
    json_decref(ev);
    ev = NULL;
    CHECK(!te_client_pending(c));
    CHECK(te_client_recv(c, &ev) == -EAGAIN && !ev);
    CHECK(write(peer, "ent\":\"y\"}\n", 10) == 10);
    CHECK(te_client_recv(c, &ev) == 0);
    CHECK_STR(json_string_value(json_object_get(ev, "event")), "y");
    json_decref(ev);
    close(peer);
    CHECK(te_client_recv(c, &ev) == -ENODATA);
    te_client_close(c);
}

static void sends_are_queued_and_bounded(void)
{
    te_client *c;
    int peer = pair(&c, 256 * 1024);
    char *big = malloc(100000);
    memset(big, 'a', 99999);
    big[99999] = '\0';
    json_t *req = json_pack("{s:s}", "pad", big);
    /* until the socket's buffers are full and the queue past its bound */
    int rc = 0;
    size_t sent = 0;
    while (sent < 1000 && (rc = te_client_send(c, req)) == 0)
        sent++;
    CHECK(rc == -ENOBUFS && sent > 1 && te_client_want_write(c));
    CHECK(te_client_flush(c) == 0 && te_client_want_write(c));
    /* the peer reads: every request sent arrives whole, in order */
    int fl = fcntl(peer, F_GETFL);
    CHECK(fcntl(peer, F_SETFL, fl | O_NONBLOCK) == 0);
    size_t lines = 0, bytes = 0;
    char buf[65536];
    while (lines < sent) {
        ssize_t n = read(peer, buf, sizeof(buf));
        if (n < 0 && errno == EAGAIN) {
            CHECK(te_client_flush(c) == 0);
            continue;
        }
        CHECK(n > 0);
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            lines += buf[i] == '\n';
        bytes += (size_t)n;
    }
    CHECK(lines == sent && !te_client_want_write(c));
    CHECK(bytes == sent * (strlen("{\"pad\": \"\"}\n") + 99999) ||
          bytes == sent * (strlen("{\"pad\":\"\"}\n") + 99999));
    CHECK(te_client_send(c, req) == 0); /* room again */
    json_decref(req);
    free(big);
    close(peer);
    te_client_close(c);
}

int main(void)
{
    snprintf(path, sizeof(path), "/tmp/te-client-nb-%d.sock", (int)getpid());
    unlink(path);
    connect_fails_fast_when_the_backlog_is_full();
    a_partial_line_is_kept();
    sends_are_queued_and_bounded();
    CHECK_DONE();
}
