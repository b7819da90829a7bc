/* Unit tests of lib/fdpass.h on a real socket pair: descriptors put on a
 * message arrive in order; the receiver keeps as many as it has room for
 * and the rest are closed (a pipe whose write end was closed reads EOF);
 * none put, none taken; a message carrying more than the room is cut by
 * the kernel (MSG_CTRUNC), and what came beyond the taker's bound closed. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fdpass.h"

static void send_fds(int sock, const int *fds, size_t n)
{
    char byte = 'x';
    struct iovec iov = {&byte, 1};
    te_fds_space space;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_put(&m, &space, fds, n);
    CHECK(sendmsg(sock, &m, 0) == 1);
}

/* received descriptors into got (room for room, take at most max) */
static size_t recv_fds(int sock, int *got, size_t room, size_t max, int *flags)
{
    char byte;
    struct iovec iov = {&byte, 1};
    te_fds_space space;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_room(&m, &space, room);
    CHECK(recvmsg(sock, &m, MSG_CMSG_CLOEXEC) == 1);
    *flags = m.msg_flags;
    return te_fds_take(&m, got, max);
}

static bool same_file(int a, int b)
{
    struct stat x, y;
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_ino == y.st_ino && x.st_dev == y.st_dev;
}

/* three pipes' write ends sent, one kept: the kept pipe still has a writer,
 * the other two read EOF once the sender closes its own ends */
static void keeps_its_room_and_closes_the_rest(void)
{
    int sv[2], p[3][2];
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0);
    for (int i = 0; i < 3; i++)
        CHECK(pipe2(p[i], O_CLOEXEC | O_NONBLOCK) == 0);
    int w[3] = {p[0][1], p[1][1], p[2][1]};
    send_fds(sv[0], w, 3);
    int got[TE_FDS_MAX] = {-1, -1}, flags;
    CHECK(recv_fds(sv[1], got, TE_FDS_MAX, 1, &flags) == 1);
    CHECK(!(flags & MSG_CTRUNC));
    CHECK(same_file(got[0], p[0][1]) && got[1] == -1);
    CHECK(fcntl(got[0], F_GETFD) == FD_CLOEXEC); /* MSG_CMSG_CLOEXEC kept */
    for (int i = 0; i < 3; i++)
        close(p[i][1]);
    char c;
    CHECK(read(p[0][0], &c, 1) == -1 && errno == EAGAIN); /* got[0] still writes */
    CHECK(read(p[1][0], &c, 1) == 0 && read(p[2][0], &c, 1) == 0);
    close(got[0]);
    CHECK(read(p[0][0], &c, 1) == 0);
    for (int i = 0; i < 3; i++)
        close(p[i][0]);
    close(sv[0]), close(sv[1]);
}

static void in_order_none_and_cut(void)
{
    int sv[2], p[2];
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0);
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    int four[4] = {p[0], p[1], sv[0], STDIN_FILENO}, got[TE_FDS_MAX], flags;
    send_fds(sv[0], four, 4);
    CHECK(recv_fds(sv[1], got, 4, 4, &flags) == 4);
    for (int i = 0; i < 4; i++) {
        CHECK(same_file(got[i], four[i]));
        close(got[i]);
    }
    send_fds(sv[0], NULL, 0); /* nothing put: nothing to take */
    CHECK(recv_fds(sv[1], got, TE_FDS_MAX, TE_FDS_MAX, &flags) == 0);
    /* more than the room (one, and one more that its alignment fits): the
     * kernel cuts at two, te_fds_take() keeps one and closes the other */
    send_fds(sv[0], four, 3);
    CHECK(recv_fds(sv[1], got, 1, 1, &flags) == 1);
    CHECK((flags & MSG_CTRUNC) && same_file(got[0], p[0]));
    close(got[0]);
    close(p[0]), close(p[1]), close(sv[0]), close(sv[1]);
}

int main(void)
{
    keeps_its_room_and_closes_the_rest();
    in_order_none_and_cut();
    CHECK_DONE();
}
