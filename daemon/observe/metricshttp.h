/*
 * metricshttp.h - --metrics-listen ADDR:PORT: an HTTP listener on the
 * daemon's loop that serves GET /metrics (libmicrohttpd).
 */
#ifndef TD_METRICSHTTP_H
#define TD_METRICSHTTP_H

#include <stddef.h>

/* The text to serve (malloc'd, *len its length; NULL: 500). */
typedef char *(*td_metrics_render_fn)(size_t *len);

/* Listen on "ADDR:PORT" ("127.0.0.1:9464", "[::1]:9464"; port 0 picks
 * one), closing a connection idle for timeout_s seconds; connections made
 * by the daemon's calls are refused. -1 with a message naming what was
 * wrong. */
int td_metrics_http_start(const char *addr, unsigned timeout_s, td_metrics_render_fn render,
                          char *err, size_t errlen);
/* The bound "ADDR:PORT", for the start-up log line; "" when off. */
const char *td_metrics_http_where(void);
/* Stop listening and close the loop's handles (at shutdown); idempotent. */
void td_metrics_http_stop(void);

#endif
