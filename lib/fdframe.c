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

#include "toolexec.h"

int te_frame_send(int sock, const char *body, size_t len, const int *fds, int nfds, int flags)
{
    if (nfds < 0 || nfds > TE_FRAME_FDS_MAX || len > UINT32_MAX)
        return -EINVAL;
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    te_frame_header((uint32_t)len, hdr);
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(char *)body, len}};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(TE_FRAME_FDS_MAX * sizeof(int))];
    } c;
    memset(&c, 0, sizeof(c));
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    if (nfds) {
        m.msg_control = c.buf;
        m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
    }
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
