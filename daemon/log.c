/*
 * log.c - one line per message on stderr; a service manager collects it.
 *
 * Plain text by default; with "<N>" syslog-priority prefixes when stderr is
 * the journal (systemd sets JOURNAL_STREAM to stderr's device:inode), so
 * the journal records each line's priority; or one JSON object per line
 * (--log-format json). Lines about a call carry its batch and call id, as
 * fields in JSON.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "toolexecd.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* syslog priorities: err, warning, info, debug */
static const int level_prio[] = {3, 4, 6, 7};
static bool to_journal;
static bool as_json;

int td_log_level_parse(const char *s)
{
    for (int i = 0; i <= TD_LOG_DEBUG; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

int td_log_setup(const char *format)
{
    if (format && strcmp(format, "json") == 0)
        as_json = true;
    else if (format && strcmp(format, "text") != 0)
        return -1;
    const char *js = getenv("JOURNAL_STREAM");
    struct stat st;
    unsigned long long dev, ino;
    if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
        (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
        to_journal = true;
    return 0;
}

static void emit(int level, const char *batch, const char *call, const char *fmt, va_list ap)
{
    char msg[2048];
    if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
        return;
    te_utf8_repair(msg);
    if (as_json) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        json_t *o = json_pack("{s:f,s:s,s:s}", "ts", ts.tv_sec + ts.tv_nsec / 1e9, "level",
                              level_names[level], "msg", msg);
        if (o && batch)
            json_object_set_new(o, "batch", td_json_text(batch, strlen(batch)));
        if (o && call)
            json_object_set_new(o, "call", td_json_text(call, strlen(call)));
        char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (line)
            fprintf(stderr, "%s%s\n",
                    to_journal ? (const char *[]){"<3>", "<4>", "<6>", "<7>"}[level] : "", line);
        free(line);
        return;
    }
    char where[512] = "";
    if (batch && call)
        snprintf(where, sizeof(where), "batch %s call %s: ", batch, call);
    else if (batch)
        snprintf(where, sizeof(where), "batch %s: ", batch);
    te_utf8_repair(where);
    /* one fprintf per line so concurrent writers never interleave mid-line */
    if (to_journal)
        fprintf(stderr, "<%d>%s%s\n", level_prio[level], where, msg);
    else
        fprintf(stderr, "toolexecd: %s: %s%s\n", level_names[level], where, msg);
}

void td_log(int level, const char *fmt, ...)
{
    if (level > td_cfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, NULL, NULL, fmt, ap);
    va_end(ap);
}

void td_logc(int level, const char *batch, const char *call, const char *fmt, ...)
{
    if (level > td_cfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, batch, call, fmt, ap);
    va_end(ap);
}
