/*
 * util.c - small helpers shared by the daemon's modules.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "toolexecd.h"

json_t *td_json_text(const char *p, size_t n)
{
    json_t *s = json_stringn(p, n);
    if (s)
        return s;
    /* Not valid UTF-8: replace each bad byte with U+FFFD. */
    char *out = malloc(n * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = te_utf8_seq(p + i, n - i);
        if (l) {
            memcpy(out + o, p + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    s = json_stringn(out, o);
    free(out);
    return s;
}

static const char *const limit_keys[] = {"cpu_ms",     "memory_mb",    "processes",
                                         "open_files", "file_size_mb", "output_mb"};

int td_limits_set(struct td_limits *l, const char *key, uint64_t v)
{
    uint64_t *fields[] = {&l->cpu_ms,     &l->memory_mb,    &l->processes,
                          &l->open_files, &l->file_size_mb, &l->output_mb};
    for (size_t i = 0; i < sizeof(limit_keys) / sizeof(limit_keys[0]); i++) {
        if (strcmp(key, limit_keys[i]) == 0) {
            *fields[i] = v;
            return 0;
        }
    }
    return -EINVAL;
}

int td_limits_parse(const char *spec, struct td_limits *l, char *err, size_t errlen)
{
    char *copy = strdup(spec), *save = NULL;
    int rc = copy ? 0 : -ENOMEM;
    for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item && rc == 0;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '='), *end;
        unsigned long long v = 0;
        if (eq) {
            *eq = '\0';
            errno = 0;
            v = strtoull(eq + 1, &end, 10);
        }
        if (!eq || errno || end == eq + 1 || *end || v == 0 || eq[1] == '-') {
            snprintf(err, errlen, "\"%s\": expected KEY=N with N a positive integer", item);
            rc = -EINVAL;
        } else if (td_limits_set(l, item, v) < 0) {
            snprintf(err, errlen,
                     "\"%s\": unknown limit (cpu_ms, memory_mb, processes, "
                     "open_files, file_size_mb, output_mb)",
                     item);
            rc = -EINVAL;
        }
    }
    free(copy);
    return rc;
}

/* Base64 (RFC 4648) by hand: an encoder is a dozen lines, not worth a
 * dependency on a crypto or utility library. */
json_t *td_base64_value(const char *p, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *in = (const unsigned char *)p;
    size_t olen = (n + 2) / 3 * 4;
    char *out = malloc(olen + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? alphabet[v & 63] : '=';
    }
    json_t *obj = json_pack("{s:s,s:s%,s:I}", "encoding", "base64", "data", out, olen, "size_bytes",
                            (json_int_t)n);
    free(out);
    return obj;
}
