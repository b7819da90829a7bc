/*
 * cli_sys.h - small system helpers every part of the CLI shares: the
 * executable, the HTTP front's module (toolexec-mcp-http.so) and the
 * authorization library (mcp_auth.h), which its unit tests, fuzz target
 * and bench link alone. Static inline, so that each takes them in
 * without linking the CLI's common.c or widening libtoolexec's ABI.
 */
#ifndef CLI_SYS_H
#define CLI_SYS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <time.h>

/* The monotonic clock in milliseconds: deadlines, idle and drain timers. */
static inline long long cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether sa is a loopback address: 127.0.0.0/8, ::1, or 127.0.0.0/8
 * mapped into IPv6 (::ffff:127.0.0.1, what a dual-stack name can give);
 * false for any other family. */
static inline bool cli_loopback_addr(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family != AF_INET6)
        return false;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

#endif
