/*
 * stats.h - counters for {"op": "stats"}.
 */
#ifndef TD_STATS_H
#define TD_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

/* Subscribes to the event bus for the calls, spawns and batches it counts. */
void td_stats_init(void);
uint64_t td_stats_batches_served(void);
/* What the stats event reports as it stands, given by whoever asks. */
struct td_stats_gauges {
    unsigned running, processes, queued, max_workers, clients, subscribers, batches;
};
json_t *td_stats_event(const struct td_stats_gauges *g);
void td_stats_free(void);

#endif
