/*
 * egress.h - "network": {"allow": [...]}: a call in a network namespace of
 * its own with only loopback, and an HTTP proxy the daemon serves inside it
 * (proxy.h) that lets CONNECT tunnels and plain HTTP requests out to the
 * hosts the definition allows, and to nothing else. This is the policy.
 */
#ifndef TD_EGRESS_H
#define TD_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* The proxy's port on the call's own loopback (127.0.0.1): every call has a
 * namespace of its own, so one fixed port serves them all (squid's). */
#define TD_EGRESS_PORT 3128
#define TD_EGRESS_URL "http://127.0.0.1:3128"

/* Defaults of the object's limits (toolexecd.tools(5)). */
#define TD_EGRESS_MAX_CONNECTIONS 64     /* open at once, per call */
#define TD_EGRESS_MAX_BYTES (1ull << 30) /* relayed, both ways, per call */

struct td_egress; /* a definition's policy */
struct sockaddr;

/* The "network" object of a definition; 0, or -1 with why in err. */
int td_egress_parse(json_t *v, struct td_egress **out, char *err, size_t errlen);
void td_egress_free(struct td_egress *e);
/* A run request's narrowing: a policy of allow (a JSON array of
 * entries) with e's limits, each entry one that e lets through already
 * ("a.x.org" under "*.x.org", "h:443" under "h"). 0 with *out; -1 with
 * why in err, *bad_at the index of the entry e does not cover (else -1). */
int td_egress_narrow(const struct td_egress *e, json_t *allow, struct td_egress **out, int *bad_at,
                     char *err, size_t errlen);
/* Its entries as written back (lower case): "host", "host:port", "host:*". */
json_t *td_egress_list(const struct td_egress *e);
/* May a request go to host (lower case, no trailing dot) port? */
bool td_egress_allows(const struct td_egress *e, const char *host, unsigned port);
/* What a worker's NO_PROXY says (its own loopback is its own), or NULL
 * when the list names a loopback address: that is the host's, reached
 * through the proxy. */
const char *td_egress_no_proxy(const struct td_egress *e);

/* Its "headers" (credentials.h), NULL: none. */
struct td_creds;
const struct td_creds *td_egress_creds(const struct td_egress *e);
/* Learn mode's policy: every host allowed (the proxy records each, learn.h). */
struct td_egress *td_egress_any(void);

/* Its limits (toolexecd.tools(5)), per call. */
uint64_t td_egress_max_bytes(const struct td_egress *e);
unsigned td_egress_max_connections(const struct td_egress *e);
/* May a name on the list lead to this address? Not to a loopback, private,
 * link-local, shared (100.64/10), multicast or unspecified one: otherwise
 * whoever controls an allowed name's DNS could aim a call at the host's
 * own services (DNS rebinding). An address written on the list is the
 * operator's explicit word and is not asked about. */
bool td_egress_private(const struct sockaddr *sa);

#endif
