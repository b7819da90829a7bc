/*
 * cli_sys.h - small system helpers every part of the CLI shares: the
 * executable, the HTTP front's module (toolexec-mcp-http.so) and the
 * authorization library (mcp_auth.h), which its unit tests, fuzz target
 * and bench link alone. Static inline, so that each takes them in
 * without linking the CLI's common.c or widening libtoolexec's ABI.
 */
#ifndef CLI_SYS_H
#define CLI_SYS_H

#include <time.h>

/* The monotonic clock in milliseconds: deadlines, idle and drain timers. */
static inline long long cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
