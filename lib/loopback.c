/*
 * loopback.c - loopback in a call's fresh network namespace: brought up
 * (SIOCSIFFLAGS; the caller holds CAP_NET_ADMIN over that namespace, as
 * root or in its user namespace), so that a call without the host's
 * network ("network": false) may still serve and reach itself on
 * 127.0.0.1 and ::1; with an egress allow-list, also a TCP socket
 * listening on 127.0.0.1:PORT there, which the daemon serves the
 * allow-list on. Nothing else is configured: no address but loopback, no
 * route, no resolver. One piece of code for both places a
 * call is set up: the daemon's spawn child (sandbox.c, step 7d), which
 * shares the daemon's memory until exec and so may only make system calls,
 * and a warm call's PID 1 (warm.c). Hence only system calls here.
 */
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "toolexec.h"

/* lo up, through fd (any AF_INET socket); 0, or -1 with errno set. */
static int up(int fd)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
        return -1;
    ifr.ifr_flags |= IFF_UP;
    return ioctl(fd, SIOCSIFFLAGS, &ifr);
}

int te_loopback_up(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rc = up(fd), e = errno;
    close(fd);
    errno = e;
    return rc;
}

int te_loopback_listener(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (up(fd) == 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 128) == 0)
        return fd;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}
