/* Unit tests of the frame codec: whole frames, every split, back-to-back
 * frames, the size cap (refused on the header, before any body byte). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "toolexec.h"

static size_t make_frame(const char *body, char *out)
{
    size_t n = strlen(body);
    te_frame_header((uint32_t)n, (uint8_t *)out);
    memcpy(out + 4, body, n);
    return n + 4;
}

static void whole_and_split(void)
{
    char buf[64];
    size_t n = make_frame("{\"ok\":1}", buf);
    /* every split point, fed one piece at a time */
    for (size_t cut = 0; cut <= n; cut++) {
        te_frame_decoder d;
        te_frame_decoder_init(&d, 1024);
        size_t used;
        int rc = te_frame_feed(&d, buf, cut, &used);
        CHECK(used == cut);
        if (cut < n)
            CHECK(rc == TE_FRAME_NEED);
        rc = te_frame_feed(&d, buf + cut, n - cut, &used);
        CHECK(rc == TE_FRAME_DONE);
        CHECK(used == n - cut);
        size_t len;
        char *body = te_frame_take(&d, &len);
        CHECK(len == 8);
        CHECK_STR(body, "{\"ok\":1}");
        free(body);
        te_frame_decoder_free(&d);
    }
    /* byte by byte */
    te_frame_decoder d;
    te_frame_decoder_init(&d, 1024);
    int rc = TE_FRAME_NEED;
    for (size_t i = 0; i < n; i++) {
        size_t used;
        CHECK(rc == TE_FRAME_NEED);
        rc = te_frame_feed(&d, buf + i, 1, &used);
        CHECK(used == 1);
    }
    CHECK(rc == TE_FRAME_DONE);
    CHECK(te_frame_pending(&d) == n);
    free(te_frame_take(&d, NULL));
    CHECK(te_frame_pending(&d) == 0);
    te_frame_decoder_free(&d);
}

static void back_to_back(void)
{
    char buf[64];
    size_t a = make_frame("[1]", buf);
    size_t b = make_frame("\"two\"", buf + a);
    te_frame_decoder d;
    te_frame_decoder_init(&d, 1024);
    size_t used;
    CHECK(te_frame_feed(&d, buf, a + b, &used) == TE_FRAME_DONE);
    CHECK(used == a); /* stops at the end of the first frame */
    char *first = te_frame_take(&d, NULL);
    CHECK_STR(first, "[1]");
    free(first);
    CHECK(te_frame_feed(&d, buf + used, a + b - used, &used) == TE_FRAME_DONE);
    char *second = te_frame_take(&d, NULL);
    CHECK_STR(second, "\"two\"");
    free(second);
    /* a done frame not yet taken consumes nothing */
    te_frame_decoder_free(&d);
}

static void empty_frame(void)
{
    uint8_t hdr[4];
    te_frame_header(0, hdr);
    te_frame_decoder d;
    te_frame_decoder_init(&d, 16);
    size_t used;
    CHECK(te_frame_feed(&d, hdr, 4, &used) == TE_FRAME_DONE);
    size_t len = 99;
    char *body = te_frame_take(&d, &len);
    CHECK(body && len == 0 && body[0] == '\0');
    free(body);
    te_frame_decoder_free(&d);
}

static void cap(void)
{
    /* A prefix claiming 4 GiB - 1 is refused as soon as the header is in. */
    const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 'x', 'y'};
    te_frame_decoder d;
    te_frame_decoder_init(&d, TE_FRAME_MAX_DEFAULT);
    size_t used;
    CHECK(te_frame_feed(&d, huge, sizeof(huge), &used) == -EMSGSIZE);
    CHECK(used == 4);
    CHECK(d.len == 0xffffffffu);
    CHECK(d.body == NULL); /* nothing allocated */
    te_frame_decoder_free(&d);

    /* exactly at the cap is fine, one over is not */
    uint8_t hdr[4];
    te_frame_decoder_init(&d, 10);
    te_frame_header(10, hdr);
    CHECK(te_frame_feed(&d, hdr, 4, &used) == TE_FRAME_NEED);
    te_frame_decoder_free(&d);
    te_frame_decoder_init(&d, 10);
    te_frame_header(11, hdr);
    CHECK(te_frame_feed(&d, hdr, 4, &used) == -EMSGSIZE);
    te_frame_decoder_free(&d);

    /* A cap of UINT32_MAX (what --max-frame-bytes once took) is lowered to
     * TE_FRAME_MAX_LIMIT: a frame of 4 GiB - 1 would have been len + 1 = 0
     * bytes of buffer on a 32-bit target. Refused, nothing allocated. */
    te_frame_decoder_init(&d, UINT32_MAX);
    CHECK(d.max == TE_FRAME_MAX_LIMIT);
    CHECK(te_frame_feed(&d, huge, sizeof(huge), &used) == -EMSGSIZE);
    CHECK(used == 4);
    CHECK(d.body == NULL);
    te_frame_decoder_free(&d);
    te_frame_decoder_init(&d, UINT32_MAX);
    te_frame_header(TE_FRAME_MAX_LIMIT + 1, hdr);
    CHECK(te_frame_feed(&d, hdr, 4, &used) == -EMSGSIZE);
    te_frame_decoder_free(&d);
    te_frame_decoder_init(&d, UINT32_MAX);
    te_frame_header(TE_FRAME_MAX_LIMIT, hdr); /* at the limit: taken */
    CHECK(te_frame_feed(&d, hdr, 4, &used) == TE_FRAME_NEED);
    te_frame_decoder_free(&d);
}

static void header_roundtrip(void)
{
    uint8_t hdr[4];
    te_frame_header(0x01020304u, hdr);
    CHECK(hdr[0] == 1 && hdr[1] == 2 && hdr[2] == 3 && hdr[3] == 4);
}

/* te_worker_read_request (the SDK) decodes with the same decoder: it reads
 * the frame and nothing after it, and refuses what the decoder refuses. */
static int read_from(const void *bytes, size_t n, json_t **req, char *rest, size_t *nrest)
{
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK(write(p[1], bytes, n) == (ssize_t)n);
    close(p[1]);
    int rc = te_worker_read_request(p[0], req);
    ssize_t r = read(p[0], rest, 64);
    *nrest = r > 0 ? (size_t)r : 0;
    close(p[0]);
    return rc;
}

static void worker_read(void)
{
    json_t *req;
    char rest[64];
    size_t nrest;
    const char ok[] = "\0\0\0\x0c{\"name\":\"x\"}after";
    CHECK(read_from(ok, sizeof(ok) - 1, &req, rest, &nrest) == 0);
    CHECK(req && strcmp(json_string_value(json_object_get(req, "name")), "x") == 0);
    CHECK(nrest == 5 && memcmp(rest, "after", 5) == 0);
    json_decref(req);
    uint8_t big[4];
    te_frame_header(TE_FRAME_MAX_DEFAULT + 1, big);
    CHECK(read_from(big, 4, &req, rest, &nrest) == -EMSGSIZE && !req);
    CHECK(read_from("\0\0\0\x0b{\"na", 7, &req, rest, &nrest) == -ENODATA && !req);
    CHECK(read_from("\0\0", 2, &req, rest, &nrest) == -ENODATA && !req);
    CHECK(read_from("\0\0\0\x02[]", 6, &req, rest, &nrest) == -EBADMSG && !req);
    CHECK(read_from("\0\0\0\0", 4, &req, rest, &nrest) == -EBADMSG && !req);
}

/* te_worker_write_response: header and body in one write (a packet
 * socket keeps each write apart), so a reader wakes once per frame. */
static void worker_write_one(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    json_t *ok = json_pack("{s:i}", "ok", 1);
    CHECK(te_worker_write_response(sv[0], ok) == 0);
    json_decref(ok);
    char buf[64];
    ssize_t n = read(sv[1], buf, sizeof(buf));
    CHECK(n == 12 && memcmp(buf, "\0\0\0\x08{\"ok\":1}", 12) == 0);
    close(sv[0]), close(sv[1]);
}

/* te_frame_send: header and body on a Unix socket, the descriptors with
 * the first byte; a frame bigger than the socket's buffer goes whole on a
 * blocking socket and as -EAGAIN with MSG_DONTWAIT; too many descriptors
 * are refused. */
static void send_with_fds(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    int fds[2] = {STDIN_FILENO, sv[1]};
    CHECK(te_frame_send(sv[0], "{\"ok\":1}", 8, fds, 2, 0) == 0);
    char buf[64];
    union {
        struct cmsghdr h;
        char c[CMSG_SPACE(4 * sizeof(int))];
    } cb;
    struct iovec iov = {buf, sizeof(buf)};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.c, .msg_controllen = sizeof(cb.c)};
    ssize_t n = recvmsg(sv[1], &m, MSG_CMSG_CLOEXEC);
    CHECK(n == 12 && memcmp(buf, "\0\0\0\x08{\"ok\":1}", 12) == 0);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    CHECK(cm && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(2 * sizeof(int)));
    int got[2];
    memcpy(got, CMSG_DATA(cm), sizeof(got));
    struct stat a, b;
    CHECK(fstat(got[1], &a) == 0 && fstat(sv[1], &b) == 0 && a.st_ino == b.st_ino);
    close(got[0]), close(got[1]);
    CHECK(te_frame_send(sv[0], "x", 1, fds, TE_FRAME_FDS_MAX + 1, 0) == -EINVAL);
    /* bigger than the buffer: with MSG_DONTWAIT, it does not fit */
    size_t big = 4 << 20;
    char *body = calloc(1, big);
    CHECK(body != NULL);
    CHECK(te_frame_send(sv[0], body, big, NULL, 0, MSG_DONTWAIT) == -EAGAIN);
    free(body);
    close(sv[0]), close(sv[1]);
}

int main(void)
{
    send_with_fds();
    worker_read();
    worker_write_one();
    whole_and_split();
    back_to_back();
    empty_frame();
    cap();
    header_roundtrip();
    CHECK_DONE();
}
