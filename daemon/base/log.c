/*
 * log.c - one line per message on stderr; a service manager collects it.
 *
 * Plain text by default; with "<N>" syslog-priority prefixes when stderr is
 * the journal (systemd sets JOURNAL_STREAM to stderr's device:inode), so
 * the journal records each line's priority; or one JSON object per line
 * (--log-format json). Lines about a call carry its batch and call id, as
 * fields in JSON.
 *
 * Every field is escaped here, the one place all lines pass: a batch id, a
 * tool's stderr or a file name comes from someone else, and a raw newline
 * would forge a line, a terminal escape would act on the operator's
 * terminal. Control characters (C0, DEL, C1) and backslash become \n, \t,
 * \\ or \xNN in text; in JSON they are \u escapes. Invalid UTF-8 becomes '?'.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifdef TD_HAVE_SYSTEMD
#include <systemd/sd-journal.h>
#endif

#include "log.h"
#include "toolexec.h"
#include "util.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* syslog priorities: err, warning, info, debug */
static const int level_prio[] = {3, 4, 6, 7};
static bool to_journal;
static bool as_json;

/* Kept here, not in config.c, so that logging needs nothing above it. */
static int max_level = TD_LOG_INFO;

void td_log_set_level(int level)
{
    max_level = level;
}

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

/* The C1 controls U+0080..U+009F (CSI is U+009B) are 0xc2 0x80..0x9f. */
static bool c1_at(const char *s)
{
    return (unsigned char)s[0] == 0xc2 && (unsigned char)s[1] >= 0x80 &&
           (unsigned char)s[1] <= 0x9f;
}

/* Text: src (valid UTF-8) into dst with control characters and backslash
 * escaped; cut at a character boundary when dst is full. */
static void escape_text(char *dst, size_t size, const char *src)
{
    size_t o = 0;
    for (const char *p = src; *p; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[8];
        if (c == '\\')
            strcpy(esc, "\\\\");
        else if (c == '\n')
            strcpy(esc, "\\n");
        else if (c == '\t')
            strcpy(esc, "\\t");
        else if (c == '\r')
            strcpy(esc, "\\r");
        else if (c < 0x20 || c == 0x7f)
            snprintf(esc, sizeof(esc), "\\x%02x", c);
        else if (c1_at(p)) {
            snprintf(esc, sizeof(esc), "\\u%04x", (unsigned char)*++p);
        } else {
            /* a whole UTF-8 character, or nothing of it */
            size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
            if (o + n >= size)
                break;
            memcpy(dst + o, p, n);
            o += n;
            p += n - 1;
            continue;
        }
        size_t n = strlen(esc);
        if (o + n >= size)
            break;
        memcpy(dst + o, esc, n);
        o += n;
    }
    dst[o] = '\0';
}

/* JSON: jansson writes C0 controls as \u escapes but DEL and C1 raw; they
 * only occur inside strings, so writing them as \u escapes keeps the
 * value. Returns a new line. */
static char *escape_json(const char *line)
{
    size_t n = strlen(line);
    char *out = malloc(n * 6 + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = line; *p; p++) {
        if (*p == 0x7f)
            o += sprintf(o, "\\u007f");
        else if (c1_at(p))
            o += sprintf(o, "\\u%04x", (unsigned char)*++p);
        else
            *o++ = *p;
    }
    *o = '\0';
    return out;
}

static void emit_fields(int level, const char *batch, const char *call, const json_t *fields,
                        const char *fmt, va_list ap);

static void emit(int level, const char *batch, const char *call, const char *fmt, va_list ap)
{
    emit_fields(level, batch, call, NULL, fmt, ap);
}

/* A field's value as text: a string itself, anything else compact JSON. */
static char *field_text(const json_t *v)
{
    if (te_json_is_text(v))
        return strdup(json_string_value(v));
    return te_json_dumps(v, JSON_ENCODE_ANY, NULL);
}

#ifdef TD_HAVE_SYSTEMD
/* A record as journal fields: MESSAGE, PRIORITY, TOOLEXECD_BATCH,
 * TOOLEXECD_CALL and TOOLEXECD_<FIELD> for each field. 0, or -1 when the
 * journal cannot take it (the line goes to stderr then). */
static int journal_send(int level, const char *batch, const char *call, const json_t *fields,
                        const char *msg)
{
    size_t n = 4 + json_object_size(fields), k = 0;
    struct iovec *iov = calloc(n, sizeof(*iov));
    char **bufs = calloc(n, sizeof(*bufs));
    int rc = -1;
    if (!iov || !bufs)
        goto out;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (asprintf(&bufs[k], __VA_ARGS__) < 0) {                                                 \
            bufs[k] = NULL;                                                                        \
            goto out;                                                                              \
        }                                                                                          \
        iov[k].iov_base = bufs[k];                                                                 \
        iov[k].iov_len = strlen(bufs[k]);                                                          \
        k++;                                                                                       \
    } while (0)
    ADD("MESSAGE=%s", msg);
    ADD("PRIORITY=%d", level_prio[level]);
    if (batch)
        ADD("TOOLEXECD_BATCH=%s", batch);
    if (call)
        ADD("TOOLEXECD_CALL=%s", call);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)fields, key, v)
    {
        char name[64], *text = field_text(v);
        size_t i = 0;
        for (; key[i] && i < sizeof(name) - 1; i++)
            name[i] = (char)(key[i] >= 'a' && key[i] <= 'z' ? key[i] - 32 : key[i]);
        name[i] = '\0';
        if (!text)
            goto out;
        if (asprintf(&bufs[k], "TOOLEXECD_%s=%s", name, text) < 0) {
            bufs[k] = NULL;
            free(text);
            goto out;
        }
        free(text);
        iov[k].iov_base = bufs[k];
        iov[k].iov_len = strlen(bufs[k]);
        k++;
    }
#undef ADD
    rc = sd_journal_sendv(iov, (int)k) < 0 ? -1 : 0;
out:
    for (size_t i = 0; bufs && i < k; i++)
        free(bufs[i]);
    free(bufs);
    free(iov);
    return rc;
}
#endif

static void emit_fields(int level, const char *batch, const char *call, const json_t *fields,
                        const char *fmt, va_list ap)
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
        if (o && fields)
            json_object_update_missing(o, (json_t *)fields);
        char *dump = o ? te_json_dumps(o, 0, NULL) : NULL;
        json_decref(o);
        char *line = dump ? escape_json(dump) : NULL;
        free(dump);
        if (line)
            fprintf(stderr, "%s%s\n",
                    to_journal ? (const char *[]){"<3>", "<4>", "<6>", "<7>"}[level] : "", line);
        free(line);
        return;
    }
#ifdef TD_HAVE_SYSTEMD
    if (fields && to_journal && journal_send(level, batch, call, fields, msg) == 0)
        return;
#endif
    if (fields) {
        /* text: the fields as key=value after the message */
        size_t used = strlen(msg);
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)fields, key, v)
        {
            char *text = field_text(v);
            if (text && used < sizeof(msg))
                used += (size_t)snprintf(msg + used, sizeof(msg) - used, " %s=%s", key, text);
            free(text);
        }
        te_utf8_repair(msg);
    }
    char where[512] = "", ewhere[4 * sizeof(where)], emsg[4 * sizeof(msg)];
    if (batch && call)
        snprintf(where, sizeof(where), "batch %s call %s: ", batch, call);
    else if (batch)
        snprintf(where, sizeof(where), "batch %s: ", batch);
    te_utf8_repair(where);
    escape_text(ewhere, sizeof(ewhere), where);
    escape_text(emsg, sizeof(emsg), msg);
    /* one fprintf per line so concurrent writers never interleave mid-line */
    if (to_journal)
        fprintf(stderr, "<%d>%s%s\n", level_prio[level], ewhere, emsg);
    else
        fprintf(stderr, "toolexecd: %s: %s%s\n", level_names[level], ewhere, emsg);
}

void td_log(int level, const char *fmt, ...)
{
    if (level > max_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, NULL, NULL, fmt, ap);
    va_end(ap);
}

void td_logc(int level, const char *batch, const char *call, const char *fmt, ...)
{
    if (level > max_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, batch, call, fmt, ap);
    va_end(ap);
}

void td_log_record(int level, const char *batch, const char *call, const json_t *fields,
                   const char *fmt, ...)
{
    if (level > max_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit_fields(level, batch, call, fields, fmt, ap);
    va_end(ap);
}

bool td_log_enabled(int level)
{
    return level <= max_level;
}

bool td_log_structured(void)
{
    return as_json || to_journal;
}
