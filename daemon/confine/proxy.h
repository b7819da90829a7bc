/*
 * proxy.h - one call's egress proxy (proxy.c), serving the allow-list of
 * egress.h on a socket inside the call's network namespace.
 */
#ifndef TD_PROXY_H
#define TD_PROXY_H

#define TD_PROXY_MAX_TOTAL 4096           /* connections accepted in all, per call */
#define TD_PROXY_HEAD_MAX 16384           /* a request's line and headers */
#define TD_PROXY_HEAD_TIMEOUT_MS 10000    /* to send them (slowloris) */
#define TD_PROXY_CONNECT_TIMEOUT_MS 10000 /* to resolve and connect out */

struct td_egress;
struct td_proxy;
struct td_denials;

/* Serve the listening socket fd (made in the call's namespace and handed
 * over by its child, sandbox.c; for a warm call by its PID 1, lib/warmp1.c,
 * and sent on by its template, lib/warm.c, with "forked": template.c) on
 * the loop for one call, adding what it refuses to denied. Takes fd; NULL
 * when it could not (fd closed). */
struct td_proxy *td_proxy_start(const struct td_egress *e, int fd, struct td_denials *denied,
                                const char *batch_id, const char *call_id);
/* The call ended: every proxy connection of it is closed now, its counts
 * logged; nothing is added to denied from here on. Frees itself once its
 * handles are closed. NULL is a no-op. */
void td_proxy_stop(struct td_proxy *p);

#endif
