/*
 * proxy_dns.h - the egress proxy's name resolution on threads of its own
 * (proxy_dns.c), never libuv's thread pool: a name whose resolver does not
 * answer holds one of these, not the pool that removes call directories
 * and writes spills.
 */
#ifndef TD_PROXY_DNS_H
#define TD_PROXY_DNS_H

#include <netdb.h>
#include <stdint.h>

/* At most this many names are resolved at once, this many of them for one
 * call; more wait their turn. */
#define TD_RESOLVE_THREADS 16
#define TD_RESOLVE_PER_CALL 4

struct td_resolve;
/* On the loop: rc 0 with res (freed after the callback returns), or
 * getaddrinfo()'s EAI_* error. */
typedef void (*td_resolved_cb)(void *arg, int rc, const struct addrinfo *res);

/* Resolve host (TCP, IPv4 and IPv6) for the call owner (a number of its
 * own), cb(arg, ...) on the loop once done. NULL when it cannot start (no
 * memory, no thread). */
struct td_resolve *td_resolve_start(const char *host, uint64_t owner, td_resolved_cb cb, void *arg);
/* On the loop: cb will not be called (a lookup under way ends in its
 * thread and is dropped then). */
void td_resolve_cancel(struct td_resolve *r);

#endif
