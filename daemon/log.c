/*
 * log.c - one line per message on stderr; a service manager collects it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "toolexecd.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int td_log_level_parse(const char *s)
{
    for (int i = 0; i <= TD_LOG_DEBUG; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

void td_log(int level, const char *fmt, ...)
{
    if (level > td_cfg.log_level)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* one fprintf per line so concurrent writers never interleave mid-line */
    fprintf(stderr, "toolexecd: %s: %s\n", level_names[level], line);
}
