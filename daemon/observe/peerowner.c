/*
 * peerowner.c - the owner of a TCP peer on this host, asked of the kernel.
 *
 * A connection to us from this host's network namespace has its other end
 * here too: the socket whose local address is our peer's and whose remote
 * address is ours. inet_diag finds exactly that socket (a request without
 * NLM_F_DUMP, the 4-tuple given) and says whose it is: the uid that made it
 * (sk_uid), which the process cannot change afterwards. Anyone may ask (ss
 * does, unprivileged), and the answer is queued before sendmsg returns, so
 * the loop never waits for it.
 */
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "peerowner.h"

/* addr as inet_diag wants it: family, port, address (v4-mapped IPv6 as
 * IPv4: that is how the peer's own socket knows it). */
static int to_diag(const struct sockaddr_storage *ss, int *fam, uint16_t *port, uint32_t a[4])
{
    memset(a, 0, 4 * sizeof(a[0]));
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        *fam = AF_INET;
        *port = in->sin_port;
        memcpy(&a[0], &in->sin_addr, 4);
        return 0;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        *port = in6->sin6_port;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            *fam = AF_INET;
            memcpy(&a[0], &in6->sin6_addr.s6_addr[12], 4);
        } else {
            *fam = AF_INET6;
            memcpy(a, &in6->sin6_addr, 16);
        }
        return 0;
    }
    return -EAFNOSUPPORT;
}

int td_peer_owner(int fd, uid_t *uid)
{
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof(me), pl = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&me, &ml) < 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
        return -errno;
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req = {
        .nlh = {.nlmsg_len = sizeof(req),
                .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                .nlmsg_flags = NLM_F_REQUEST},
        .r = {.sdiag_protocol = IPPROTO_TCP, .idiag_states = ~0u},
    };
    int fam, fam2;
    /* the peer's socket: its source is the peer, its destination us */
    if (to_diag(&peer, &fam, &req.r.id.idiag_sport, req.r.id.idiag_src) < 0 ||
        to_diag(&me, &fam2, &req.r.id.idiag_dport, req.r.id.idiag_dst) < 0 || fam != fam2)
        return -EAFNOSUPPORT;
    req.r.sdiag_family = (uint8_t)fam;
    req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -errno;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int rc = -EIO;
    union {
        struct nlmsghdr h;
        char buf[8192];
    } resp;
    if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
        rc = -errno;
        goto out;
    }
    ssize_t n = recv(nl, &resp, sizeof(resp), MSG_DONTWAIT);
    if (n < 0) {
        rc = -errno;
        goto out;
    }
    for (struct nlmsghdr *h = &resp.h; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *e = NLMSG_DATA(h);
            rc = h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) ? e->error : -EIO;
            break;
        }
        if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
            h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            *uid = (uid_t)m->idiag_uid;
            rc = 1;
            break;
        }
    }
out:
    close(nl);
    /* no such socket here: the peer is elsewhere */
    return rc == -ENOENT ? 0 : rc;
}
