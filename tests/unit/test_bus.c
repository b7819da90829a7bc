/* Unit tests of daemon/base/bus.c on its own: every subscriber gets every
 * message, in the order they subscribed; the table is bounded; cleared,
 * nobody hears. */
#include "bus.h"
#include "check.h"

static char order[TD_BUS_MAX * 2 + 1];
static size_t norder;
static const struct td_bus_msg *seen;

static void cb(void *data, const struct td_bus_msg *m)
{
    order[norder++] = *(const char *)data;
    seen = m;
}

int main(void)
{
    static const char names[] = "abcdefghijklmnop";
    CHECK(td_bus_subscribe(cb, (void *)&names[0]) == 0);
    CHECK(td_bus_subscribe(cb, (void *)&names[1]) == 0);
    struct td_bus_msg m = {.kind = TD_BUS_SPAWN, .tool = "t", .us = 5};
    td_bus_publish(&m);
    CHECK_STR(order, "ab");
    CHECK(seen == &m);

    for (size_t i = 2; i < TD_BUS_MAX; i++)
        CHECK(td_bus_subscribe(cb, (void *)&names[i]) == 0);
    CHECK(td_bus_subscribe(cb, (void *)&names[TD_BUS_MAX]) == -1);
    norder = 0;
    memset(order, 0, sizeof(order));
    td_bus_publish(&m);
    CHECK(norder == TD_BUS_MAX);
    CHECK(strncmp(order, names, TD_BUS_MAX) == 0);

    td_bus_clear();
    norder = 0;
    td_bus_publish(&m);
    CHECK(norder == 0);
    CHECK_DONE();
}
