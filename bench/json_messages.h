/* json_messages.h - the daemon's messages that bench/json_numbers*.c time
 * (one header: jansson and json-c cannot share a translation unit or a
 * binary, their names clash). */
#ifndef TE_BENCH_JSON_MESSAGES_H
#define TE_BENCH_JSON_MESSAGES_H
#include <stddef.h>
#include <time.h>

static const char *const messages[] = {
    /* a client's run request (JSON line) */
    "{\"op\":\"run\",\"batch\":\"b-1\",\"calls\":[{\"id\":\"c1\",\"name\":\"calc\",\"arguments\":"
    "{\"expression\":\"19.99*3\"}},{\"id\":\"c2\",\"name\":\"stdin\",\"arguments\":{\"price\":19."
    "99,"
    "\"qty\":0.1,\"tags\":[\"a\",\"b\"],\"nested\":{\"x\":1,\"y\":[1,2,3]}}}],\"on_tool_error\":"
    "\"continue\"}",
    /* a worker's response frame */
    "{\"ok\":{\"total\":59.97,\"items\":[{\"sku\":\"A-1\",\"price\":19.99,\"n\":3},{\"sku\":\"B-"
    "2\","
    "\"price\":0.1,\"n\":10}],\"currency\":\"EUR\"}}",
    /* an event line */
    "{\"event\":\"tool_execution_completed\",\"batch\":\"b-1\",\"id\":\"c1\",\"name\":\"calc\","
    "\"result\":{\"ok\":59.97},\"duration_ms\":12,\"resources\":{\"cpu_user_ms\":8,"
    "\"cpu_sys_ms\":2,\"max_rss_kb\":9120},\"content\":\"59.97\"}",
    /* a message with an integer beyond 64 bits (jansson alone refuses it) */
    "{\"ok\":{\"big\":18446744073709551616,\"text\":\"two to the sixty-fourth\"}}",
};
#define NMSG (sizeof(messages) / sizeof(messages[0]))

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
#endif
