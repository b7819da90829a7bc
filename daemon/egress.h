/*
 * egress.h - "network": {"allow": [...]}: a call in a network namespace of
 * its own with only loopback, and an HTTP proxy the daemon serves inside it
 * that lets CONNECT tunnels and plain HTTP requests out to the hosts the
 * definition allows, and to nothing else.
 */
#ifndef TD_EGRESS_H
#define TD_EGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* The proxy's port on the call's own loopback (127.0.0.1): every call has a
 * namespace of its own, so one fixed port serves them all (squid's). */
#define TD_EGRESS_PORT 3128
#define TD_EGRESS_URL "http://127.0.0.1:3128"

/* Defaults of the object's limits (toolexecd.tools(5)). */
#define TD_EGRESS_MAX_CONNECTIONS 64       /* open at once, per call */
#define TD_EGRESS_MAX_BYTES (1ull << 30)   /* relayed, both ways, per call */
#define TD_EGRESS_MAX_TOTAL 4096           /* accepted in all, per call */
#define TD_EGRESS_HEAD_MAX 16384           /* a request's line and headers */
#define TD_EGRESS_HEAD_TIMEOUT_MS 10000    /* to send them (slowloris) */
#define TD_EGRESS_CONNECT_TIMEOUT_MS 10000 /* to resolve and connect out */

struct td_egress;      /* a definition's policy */
struct td_egress_call; /* one call's proxy */
struct td_denials;

/* The "network" object of a definition; 0, or -1 with why in err. */
int td_egress_parse(json_t *v, struct td_egress **out, char *err, size_t errlen);
void td_egress_free(struct td_egress *e);
/* May a request go to host (lower case, no trailing dot) port? */
bool td_egress_allows(const struct td_egress *e, const char *host, unsigned port);
/* What a worker's NO_PROXY says (its own loopback is its own), or NULL
 * when the list names a loopback address: that is the host's, reached
 * through the proxy. */
const char *td_egress_no_proxy(const struct td_egress *e);

/* Serve the listening socket fd (made in the call's namespace and handed
 * over by its child, sandbox.c) on the loop for one call, adding what it
 * refuses to denied. Takes fd; NULL when it could not (fd closed). */
struct td_egress_call *td_egress_start(const struct td_egress *e, int fd, struct td_denials *denied,
                                       const char *batch_id, const char *call_id);
/* The call ended: every proxy connection of it is closed now, its counts
 * logged; nothing is added to denied from here on. Frees itself once its
 * handles are closed. NULL is a no-op. */
void td_egress_stop(struct td_egress_call *c);
#endif
