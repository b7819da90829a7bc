/*
 * json.c - JSON text in and out with numbers kept as written (te_json_*).
 *
 * jansson (the daemon's JSON library) prints a real with 17 significant
 * digits (19.99 -> 19.989999999999998) and refuses integers beyond 64 bits
 * and reals beyond a double ("too big integer", "real number overflow").
 * A tool runner must hand on what the tool wrote, so:
 *
 *   - te_json_dumps() prints every real in its shortest round-tripping
 *     form (19.99), and is otherwise byte-for-byte jansson's compact form;
 *   - te_json_loadb() reads numbers jansson cannot hold as "raw numbers":
 *     strings that start with two bytes that are not UTF-8 (so neither the
 *     parser nor json_string() can make one: they cannot be forged by
 *     input), followed by the number's text as written. te_json_dumps()
 *     prints them unquoted, the schema validator compares them as numbers.
 *
 * Kept on jansson rather than moving the daemon to json-c (Debian's other
 * well-kept C JSON library): that would rewrite some 1,050 calls in 47
 * files, and json-c 0.16 does not solve the integers either (it writes
 * 2**64 back as 18446744073709551615). bench/json_numbers measured parse +
 * dump of the daemon's messages (release build, best of 5, a loaded 2-core
 * machine): jansson as it was 11.1 us/message (refusing 2**64), through
 * te_json_* 9.8 us, json-c 6.1 us: faster, but not where time goes (a call
 * costs milliseconds in fork/exec).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolexec.h"

#define RAW_MARK "\xC0\x80" /* an overlong NUL: never valid UTF-8 */
#define RAW_MARK_LEN 2

bool te_json_is_rawnum(const json_t *v)
{
    return json_is_string(v) && json_string_length(v) > RAW_MARK_LEN &&
           memcmp(json_string_value(v), RAW_MARK, RAW_MARK_LEN) == 0;
}

bool te_json_is_text(const json_t *v)
{
    return json_is_string(v) && !te_json_is_rawnum(v);
}

const char *te_json_text_value(const json_t *v)
{
    return te_json_is_text(v) ? json_string_value(v) : NULL;
}

const char *te_json_rawnum_text(const json_t *v)
{
    return te_json_is_rawnum(v) ? json_string_value(v) + RAW_MARK_LEN : NULL;
}

json_t *te_json_rawnum(const char *text, size_t len)
{
    char *s = malloc(len + RAW_MARK_LEN + 1);
    if (!s)
        return NULL;
    memcpy(s, RAW_MARK, RAW_MARK_LEN);
    memcpy(s + RAW_MARK_LEN, text, len);
    s[len + RAW_MARK_LEN] = '\0';
    json_t *v = json_stringn_nocheck(s, len + RAW_MARK_LEN);
    free(s);
    return v;
}

/* ------------------------------------------------------------------------ */
/* Output.                                                                  */

typedef struct out {
    char *p;
    size_t len, cap;
    bool fail;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->fail)
        return;
    if (o->len + n + 2 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (o->len + n + 2 > cap)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->fail = true;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

/* jansson's escaping (dump.c dump_string), on bytes of valid UTF-8. */
static void put_string(out *o, const char *s, size_t n)
{
    put(o, "\"", 1);
    size_t clean = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        put(o, s + clean, i - clean);
        clean = i + 1;
        char esc[8];
        switch (c) {
        case '"':
            put(o, "\\\"", 2);
            break;
        case '\\':
            put(o, "\\\\", 2);
            break;
        case '\b':
            put(o, "\\b", 2);
            break;
        case '\f':
            put(o, "\\f", 2);
            break;
        case '\n':
            put(o, "\\n", 2);
            break;
        case '\r':
            put(o, "\\r", 2);
            break;
        case '\t':
            put(o, "\\t", 2);
            break;
        default:
            snprintf(esc, sizeof(esc), "\\u%04X", c);
            put(o, esc, 6);
        }
    }
    put(o, s + clean, n - clean);
    put(o, "\"", 1);
}

/* d's shortest text when it has at most 15 significant digits (a duration
 * in ms, a price), written without printf: the first k with d * 10^k an
 * integer m below 10^15 that reads back as d. Two decimals of at most 15
 * significant digits are never the same double (DBL_DIG), so m's digits
 * are the fewest: what te_json_real_text()'s search finds (a printf and a
 * strtod per digit: twelve for every call's duration_ms of six), laid out
 * as it lays them out. 0: not found (or buf too small), search. */
static size_t short_text(double d, char *buf, size_t size)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    double a = fabs(d), m = 0;
    if (!(a >= 1e-22) || size < 32) /* 0, or near the subnormals: the search */
        return 0;
    int k = 0;
    for (; k < (int)(sizeof(p10) / sizeof(p10[0])); k++) {
        /* off m by under 0.2 (a's rounding, the product's), so the
         * nearest integer is m when there is one: x + 0.5 is exact (x <
         * 2^50) and the conversion truncates, with no libm (nearbyint was
         * all that every program linking this loaded libm for) */
        double x = a * p10[k];
        if (x >= 1e15)
            return 0;
        m = (double)(long long)(x + 0.5);
        if (m != 0 && m / p10[k] == a) /* both exact: one rounding, m * 10^-k's */
            break;
    }
    if (k == (int)(sizeof(p10) / sizeof(p10[0])))
        return 0;
    char dig[24];
    int len = 0;
    for (long long i = (long long)m; i; i /= 10)
        dig[len++] = (char)('0' + i % 10);
    for (int i = 0; i < len / 2; i++) {
        char t = dig[i];
        dig[i] = dig[len - 1 - i];
        dig[len - 1 - i] = t;
    }
    int q = len;
    while (dig[q - 1] == '0')
        q--;
    int exp = len - 1 - k; /* d = dig[0].dig[1..] * 10^exp */
    char *o = buf;
    if (d < 0)
        *o++ = '-';
    if (exp >= -4) { /* positional (exp < 15 here), as %.*f writes it */
        if (exp < 0) {
            memcpy(o, "0.", 2);
            o += 2;
            memset(o, '0', (size_t)(-exp - 1));
            o += -exp - 1;
            memcpy(o, dig, (size_t)q);
            o += q;
        } else if (q > exp + 1) {
            memcpy(o, dig, (size_t)exp + 1);
            o += exp + 1;
            *o++ = '.';
            memcpy(o, dig + exp + 1, (size_t)(q - exp - 1));
            o += q - exp - 1;
        } else { /* an integer: its zeros, and ".0" */
            memcpy(o, dig, (size_t)exp + 1);
            o += exp + 1;
            memcpy(o, ".0", 2);
            o += 2;
        }
    } else { /* 1.5e-7, as %.*e with the exponent trimmed */
        *o++ = dig[0];
        if (q > 1) {
            *o++ = '.';
            memcpy(o, dig + 1, (size_t)q - 1);
            o += q - 1;
        }
        o += sprintf(o, "e-%d", -exp);
    }
    *o = '\0';
    return (size_t)(o - buf);
}

size_t te_json_real_text(double d, char *buf, size_t size)
{
    size_t short_len = short_text(d, buf, size);
    if (short_len)
        return short_len;
    /* The fewest significant digits that read back as the same double. */
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, size, "%.*e", prec - 1, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    snprintf(buf, size, "%.*e", prec - 1, d);
    char *e = strchr(buf, 'e');
    int exp = e ? atoi(e + 1) : 0;
    /* Positional between 1e-4 and 1e16, as Python's repr and JavaScript
     * write it (100.0, 0.001), with a ".0" so that it stays a real; beyond,
     * jansson's exponent form without '+' or leading zeros (1e22, 5e-324). */
    if (e && exp >= -4 && exp < 16) {
        int decimals = prec - 1 - exp;
        snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 0, d);
    } else if (e) {
        char *p = e + 1, *w = e + 1;
        if (*p == '-')
            *w++ = *p++;
        else if (*p == '+')
            p++;
        while (*p == '0' && p[1])
            p++;
        memmove(w, p, strlen(p) + 1);
    }
    for (char *p = buf; *p; p++)
        if (*p == ',')
            *p = '.'; /* whatever the locale says */
    if (!strchr(buf, '.') && !strchr(buf, 'e')) {
        size_t n = strlen(buf);
        if (n + 3 <= size)
            memcpy(buf + n, ".0", 3);
    }
    return strlen(buf);
}

static int dump(out *o, const json_t *v, int depth)
{
    if (depth > 2048)
        return -1; /* as jansson, which also refuses cycles this way */
    char buf[64];
    switch (json_typeof(v)) {
    case JSON_NULL:
        put(o, "null", 4);
        break;
    case JSON_TRUE:
        put(o, "true", 4);
        break;
    case JSON_FALSE:
        put(o, "false", 5);
        break;
    case JSON_INTEGER:
        put(o, buf,
            (size_t)snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v)));
        break;
    case JSON_REAL:
        put(o, buf, te_json_real_text(json_real_value(v), buf, sizeof(buf)));
        break;
    case JSON_STRING:
        if (te_json_is_rawnum(v))
            put(o, json_string_value(v) + RAW_MARK_LEN, json_string_length(v) - RAW_MARK_LEN);
        else
            put_string(o, json_string_value(v), json_string_length(v));
        break;
    case JSON_ARRAY:
        put(o, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                put(o, ",", 1);
            if (dump(o, json_array_get(v, i), depth + 1))
                return -1;
        }
        put(o, "]", 1);
        break;
    case JSON_OBJECT: {
        put(o, "{", 1);
        const char *key;
        size_t klen;
        json_t *m;
        bool first = true;
        json_object_keylen_foreach((json_t *)v, key, klen, m)
        {
            if (!first)
                put(o, ",", 1);
            first = false;
            put_string(o, key, klen);
            put(o, ":", 1);
            if (dump(o, m, depth + 1))
                return -1;
        }
        put(o, "}", 1);
        break;
    }
    }
    return o->fail ? -1 : 0;
}

char *te_json_dumps(const json_t *v, size_t flags, size_t *len)
{
    if (!v || (!(flags & JSON_ENCODE_ANY) && !json_is_object(v) && !json_is_array(v)))
        return NULL;
    out o = {0};
    if (dump(&o, v, 0) < 0) {
        free(o.p);
        return NULL;
    }
    put(&o, "", 0);
    if (!o.p) /* nothing written cannot happen; keep the contract anyway */
        return NULL;
    o.p[o.len] = '\0';
    if (len)
        *len = o.len;
    return o.p;
}

/* ------------------------------------------------------------------------ */
/* Input.                                                                   */

/* Whether the number token s[0..n) is one jansson cannot hold: an integer
 * beyond 64 bits, or a real beyond a double's range (1e400, 1e-400). */
static bool too_big(const char *s, size_t n)
{
    char tmp[64];
    char *heap = NULL, *t = tmp;
    if (n >= sizeof(tmp)) {
        if (!(t = heap = malloc(n + 1)))
            return false;
    }
    memcpy(t, s, n);
    t[n] = '\0';
    bool is_real = strpbrk(t, ".eE") != NULL;
    bool big;
    errno = 0;
    if (!is_real) {
        (void)strtoll(t, NULL, 10);
        big = errno == ERANGE;
    } else {
        double d = strtod(t, NULL);
        big = errno == ERANGE && (isinf(d) || d == 0);
    }
    free(heap);
    return big;
}

/* The length of the number token at s (JSON grammar, loosely), or 0. */
static size_t number_len(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    size_t digits = i;
    while (i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
                     ((s[i] == '+' || s[i] == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E'))))
        i++;
    return i > digits ? i : 0;
}

/* Replace the placeholders in v by raw numbers. */
static int restore(json_t *v, const char *tag, size_t taglen, json_t **raws, size_t nraws)
{
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *e = json_array_get(v, i);
            if (json_is_string(e) && json_string_length(e) > taglen &&
                memcmp(json_string_value(e), tag, taglen) == 0) {
                size_t k = strtoul(json_string_value(e) + taglen, NULL, 10);
                if (k < nraws && json_array_set(v, i, raws[k]))
                    return -1;
            } else if (restore(e, tag, taglen, raws, nraws)) {
                return -1;
            }
        }
    } else if (json_is_object(v)) {
        const char *key;
        json_t *e;
        void *iter = json_object_iter(v);
        while (iter) {
            key = json_object_iter_key(iter);
            e = json_object_iter_value(iter);
            (void)key;
            if (json_is_string(e) && json_string_length(e) > taglen &&
                memcmp(json_string_value(e), tag, taglen) == 0) {
                size_t k = strtoul(json_string_value(e) + taglen, NULL, 10);
                if (k < nraws && json_object_iter_set(v, iter, raws[k]))
                    return -1;
            } else if (restore(e, tag, taglen, raws, nraws)) {
                return -1;
            }
            iter = json_object_iter_next(v, iter);
        }
    }
    return 0;
}

/* The text again, each number jansson cannot hold replaced by a string
 * "<tag><index>" (tag chosen to occur nowhere in the text), and the raw
 * numbers in *raws. NULL when there is none. */
static char *placeholders(const char *text, size_t len, char *tag, size_t tagsize, json_t ***raws,
                          size_t *nraws, size_t *outlen)
{
    /* A tag no string of the text contains: grow it until absent. */
    size_t taglen = (size_t)snprintf(tag, tagsize, "te-num#");
    while (memmem(text, len, tag, taglen) && taglen + 2 < tagsize) {
        tag[taglen++] = '#';
        tag[taglen] = '\0';
    }
    out o = {0};
    size_t cap = 0;
    *raws = NULL;
    *nraws = 0;
    bool in_string = false, found = false;
    size_t clean = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
            continue;
        }
        if (c != '-' && (c < '0' || c > '9'))
            continue;
        size_t n = number_len(text + i, len - i);
        if (!n)
            continue;
        if (too_big(text + i, n)) {
            if (*nraws == cap) {
                cap = cap ? cap * 2 : 8;
                json_t **p = realloc(*raws, cap * sizeof(**raws));
                if (!p)
                    goto fail;
                *raws = p;
            }
            json_t *raw = te_json_rawnum(text + i, n);
            if (!raw)
                goto fail;
            (*raws)[(*nraws)++] = raw;
            put(&o, text + clean, i - clean);
            char ph[96];
            put(&o, ph, (size_t)snprintf(ph, sizeof(ph), "\"%s%zu\"", tag, *nraws - 1));
            clean = i + n;
            found = true;
        }
        i += n - 1;
    }
    if (!found)
        goto fail;
    put(&o, text + clean, len - clean);
    if (o.fail)
        goto fail;
    *outlen = o.len;
    return o.p;
fail:
    for (size_t k = 0; k < *nraws; k++)
        json_decref((*raws)[k]);
    free(*raws);
    *raws = NULL;
    *nraws = 0;
    free(o.p);
    return NULL;
}

/* Whether the text has an exponent of three digits or more below zero
 * ("1e-400"): jansson reads a real too small for a double as 0 without a
 * word. A cheap look first: the full pass costs a second parse. */
static bool maybe_underflow(const char *text, size_t len)
{
    for (const char *p = text; (p = memchr(p, '-', (size_t)(text + len - p)));) {
        size_t left = (size_t)(text + len - p);
        if (p > text + 1 && (p[-1] == 'e' || p[-1] == 'E') && p[-2] >= '0' && p[-2] <= '9' &&
            left > 3 && p[1] >= '0' && p[1] <= '9' && p[2] >= '0' && p[2] <= '9' && p[3] >= '0' &&
            p[3] <= '9')
            return true;
        p++;
    }
    return false;
}

static json_t *loadb(const char *text, size_t len, size_t flags, json_error_t *err);

json_t *te_json_loadb(const char *text, size_t len, size_t flags, json_error_t *err)
{
    json_error_t local;
    if (!err)
        err = &local;
    json_t *v = loadb(text, len, flags, err);
    if (!v) /* jansson quotes the bytes near an error as they came, cut at a
             * byte count: half a UTF-8 sequence cannot go into JSON */
        te_utf8_repair(err->text);
    return v;
}

static json_t *loadb(const char *text, size_t len, size_t flags, json_error_t *err)
{
    json_t *v = json_loadb(text, len, flags, err);
    if (v ? !maybe_underflow(text, len) : json_error_code(err) != json_error_numeric_overflow)
        return v;
    json_t *parsed = v; /* parsed, but a real may have underflowed to 0 */
    char tag[40];
    json_t **raws;
    size_t nraws, n2;
    char *text2 = placeholders(text, len, tag, sizeof(tag), &raws, &nraws, &n2);
    if (!text2)
        return parsed; /* NULL: err still says what jansson said */
    json_decref(parsed);
    json_error_t err2;
    v = json_loadb(text2, n2, flags, &err2);
    free(text2);
    if (v && json_is_string(v) && strncmp(json_string_value(v), tag, strlen(tag)) == 0) {
        json_decref(v); /* the whole text was one number */
        v = json_incref(raws[0]);
    } else if (v && restore(v, tag, strlen(tag), raws, nraws)) {
        json_decref(v);
        v = NULL;
        snprintf(err->text, sizeof(err->text), "out of memory");
    } else if (!v) {
        *err = err2;
    }
    for (size_t k = 0; k < nraws; k++)
        json_decref(raws[k]);
    free(raws);
    return v;
}

json_t *te_json_loads(const char *text, size_t flags, json_error_t *err)
{
    return te_json_loadb(text, strlen(text), flags, err);
}

void te_json_error_where(const json_error_t *e, char *buf, size_t len)
{
    /* at the end: "line L" alone, not a column 0 of a line past the last */
    if (strstr(e->text, "end of file") || json_error_code(e) == json_error_premature_end_of_input) {
        snprintf(buf, len, "line %d", e->line);
        return;
    }
    int col = e->column;
    const char *near = strstr(e->text, " near '");
    if (near) {
        /* the token's characters (jansson counts UTF-8 characters) but the last */
        const char *p = near + 7, *end = strrchr(p, '\'');
        for (int n = 0; end && p < end; p++)
            if (((unsigned char)*p & 0xc0) != 0x80 && ++n > 1 && col > 1)
                col--;
    }
    snprintf(buf, len, "line %d column %d", e->line, col);
}
