/*
 * metrics.h - the Prometheus text exposition ({"op": "metrics"} and
 * --metrics-listen's /metrics). Counters are pushed by their owners: calls,
 * spawns and batches over the event bus, the tail's lagged lines by a call
 * from tail.c; gauges are given by whoever asks for the text.
 */
#ifndef TD_METRICS_H
#define TD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h" /* struct td_stats_gauges */

/* Subscribes to the event bus. */
void td_metrics_init(void);
/* A tail subscriber was told it lagged: dropped lines were not sent. */
void td_metrics_tail_lagged(uint64_t dropped);
/* An MCP server's call said its tools changed (relisted false), or its
 * tools were listed again for such notices (relisted true): mcplist.c. */
void td_metrics_mcp_tools_changed(bool relisted);
/* The text as it stands (malloc'd; NULL on no memory), *len its length. */
char *td_metrics_text(const struct td_stats_gauges *g, size_t *len);
void td_metrics_free(void);

/* The content type of the text (Prometheus text format 0.0.4). */
#define TD_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
