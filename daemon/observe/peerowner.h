/*
 * peerowner.h - who made the other end of an accepted TCP connection, when
 * that end is a socket of this host's network namespace: its owner's uid,
 * from the kernel (NETLINK_SOCK_DIAG), not from anything the peer says.
 */
#ifndef TD_PEEROWNER_H
#define TD_PEEROWNER_H

#include <sys/types.h>

/* fd: an accepted TCP socket. 1 and *uid set: the peer's socket is here;
 * 0: it is not (a remote peer, or one in another network namespace);
 * -errno when the kernel could not be asked. */
int td_peer_owner(int fd, uid_t *uid);

#endif
