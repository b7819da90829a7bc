/*
 * bus.c - the event bus (bus.h): a fixed table of subscribers, called in
 * the order they subscribed.
 */
#include <stddef.h>

#include "bus.h"

static struct {
    td_bus_cb cb;
    void *data;
} subs[TD_BUS_MAX];
static size_t nsubs;

int td_bus_subscribe(td_bus_cb cb, void *data)
{
    if (nsubs == TD_BUS_MAX)
        return -1;
    subs[nsubs].cb = cb;
    subs[nsubs].data = data;
    nsubs++;
    return 0;
}

void td_bus_publish(const struct td_bus_msg *m)
{
    for (size_t i = 0; i < nsubs; i++)
        subs[i].cb(subs[i].data, m);
}

void td_bus_clear(void)
{
    nsubs = 0;
}
