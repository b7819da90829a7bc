/*
 * fdframe.c - one frame (frame.c's header, then the body) sent on a Unix
 * socket with descriptors riding on its first byte (SCM_RIGHTS): warm
 * start's control socket, where both the daemon (template.c) and the
 * template (warm.c) send them.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "fdpass.h"
#include "toolexec.h"

_Static_assert(TE_FRAME_FDS_MAX <= TE_FDS_MAX, "a frame's descriptors fit in te_fds_space");

int te_frame_send(int sock, const char *body, size_t len, const int *fds, int nfds, int flags)
{
    if (nfds < 0 || nfds > TE_FRAME_FDS_MAX || len > UINT32_MAX)
        return -EINVAL;
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    te_frame_header((uint32_t)len, hdr);
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(char *)body, len}};
    te_fds_space c;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    te_fds_put(&m, &c, fds, (size_t)nfds);
    size_t total = sizeof(hdr) + len, sent = 0;
    while (sent < total) {
        ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL | flags);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        sent += (size_t)n;
        m.msg_control = NULL; /* the descriptors went with the first byte */
        m.msg_controllen = 0;
        while (n > 0 && m.msg_iovlen) {
            size_t take = (size_t)n < m.msg_iov->iov_len ? (size_t)n : m.msg_iov->iov_len;
            m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + take;
            m.msg_iov->iov_len -= take;
            n -= (ssize_t)take;
            if (m.msg_iov->iov_len == 0) {
                m.msg_iov++;
                m.msg_iovlen--;
            }
        }
    }
    return 0;
}
