/*
 * fdpass.h - descriptors riding on a Unix socket message (SCM_RIGHTS): one
 * way to put them in and take them out, for every sender and receiver: the
 * frames on warm start's control socket (lib/fdframe.c, lib/warm.c,
 * daemon/run/template.c), the spawn hand-over (daemon/confine/sandbox.c), and a warm
 * call's P1 and its template (lib/warm.c). The message itself is each
 * caller's, sent or received as it must be (raw in P1 and in the template
 * while P1 runs): so these touch nothing but the message, and a descriptor
 * taken beyond the caller's room is closed with a raw close (rawsys.h).
 */
#ifndef TE_FDPASS_H
#define TE_FDPASS_H

#include <stddef.h>
#include <sys/socket.h>

#include "rawsys.h"

#define TE_FDS_MAX 8

typedef union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(TE_FDS_MAX * sizeof(int))];
} te_fds_space;

/* Before sendmsg: m carries the n descriptors of fds (nothing when n is 0;
 * at most TE_FDS_MAX), its control message in space. */
static inline void te_fds_put(struct msghdr *m, te_fds_space *space, const int *fds, size_t n)
{
    m->msg_control = NULL;
    m->msg_controllen = 0;
    if (n == 0 || n > TE_FDS_MAX)
        return;
    __builtin_memset(space, 0, sizeof(*space)); /* CMSG_SPACE's padding */
    m->msg_control = space->buf;
    m->msg_controllen = CMSG_SPACE(n * sizeof(int));
    struct cmsghdr *cm = CMSG_FIRSTHDR(m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(n * sizeof(int));
    __builtin_memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
}

/* Before recvmsg: room in m for max descriptors (at most TE_FDS_MAX), or
 * one more where CMSG_SPACE's alignment fits it; more than fit, the kernel
 * closes and sets MSG_CTRUNC. te_fds_take()'s max is the exact bound. */
static inline void te_fds_room(struct msghdr *m, te_fds_space *space, size_t max)
{
    m->msg_control = space->buf;
    m->msg_controllen = CMSG_SPACE((max > TE_FDS_MAX ? TE_FDS_MAX : max) * sizeof(int));
}

/* After a recvmsg that did not fail: the descriptors m carried, in order, the first max into
 * fds and the rest closed. How many went into fds. */
static inline size_t te_fds_take(struct msghdr *m, int *fds, size_t max)
{
    size_t got = 0;
    for (struct cmsghdr *cm = m->msg_controllen ? CMSG_FIRSTHDR(m) : NULL; cm;
         cm = CMSG_NXTHDR(m, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            __builtin_memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (got < max)
                fds[got++] = fd;
            else
                te_sys(SYS_close, fd, 0, 0, 0);
        }
    }
    return got;
}

#endif
