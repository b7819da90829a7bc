/*
 * bigres.c - a big result held once (see bigres.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigres.h"
#include "cut.h"
#include "plainesc.h"
#include "toolexec.h"
#include "cleanup.h"
#include "util.h"

/* Not UTF-8 (an overlong '\x01'), so no input can forge one: the raw
 * numbers of lib/json.c use "\xC0\x80" the same way. */
#define MARK "\xC0\x81"
#define MARK_LEN 2
#define ID_LEN 16

struct td_big {
    unsigned long long id;
    unsigned refs;
    char *buf;                 /* owned: the frame or stdout S arrived in */
    const char *esc;           /* S as te_json_dumps() escapes it, no quotes, in buf */
    size_t esc_n, n;           /* esc's length; S's own */
    struct td_esc_mark *marks; /* where decode() may start (plainesc.h) */
    size_t nmarks;
    struct td_big *next;
};

static struct td_big *live;
static unsigned long long last_id;

/* Bytes a JSON string holds as they are: te_json_dumps() escapes only
 * '"', '\\' and those below 0x20; 0x80 and up are UTF-8, checked apart. */
static bool plain[256];

static void init_plain(void)
{
    for (int c = 0x20; c < 0x80; c++)
        plain[c] = c != '"' && c != '\\';
}

static size_t ws(const unsigned char *s, size_t i, size_t len)
{
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

static long hex4(const unsigned char *s, bool *upper)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int c = s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10, *upper = false;
        else
            return -1;
        v = v << 4 | d;
    }
    return v;
}

static char short_escape(unsigned cp)
{
    switch (cp) {
    case '"':
        return '"';
    case '\\':
        return '\\';
    case '\b':
        return 'b';
    case '\f':
        return 'f';
    case '\n':
        return 'n';
    case '\r':
        return 'r';
    case '\t':
        return 't';
    }
    return 0;
}

/* One \u escape at s (left bytes): its code point (a surrogate pair
 * joined), *used its length; -1 where jansson would refuse it (\u0000
 * too: the daemon parses without JSON_ALLOW_NUL). */
static long u_escape(const unsigned char *s, size_t left, size_t *used, bool *upper)
{
    long cp = left >= 6 ? hex4(s + 2, upper) : -1;
    *used = 6;
    if (cp >= 0xd800 && cp <= 0xdbff) {
        long lo = left >= 12 && s[6] == '\\' && s[7] == 'u' ? hex4(s + 8, upper) : -1;
        if (lo < 0xdc00 || lo > 0xdfff)
            return -1;
        *used = 12;
        return 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    return cp <= 0 || (cp >= 0xdc00 && cp <= 0xdfff) ? -1 : cp;
}

/* cp as te_json_dumps() writes it inside a string; at most 6 bytes. */
static size_t put_canonical(unsigned char *out, long cp)
{
    char e = short_escape((unsigned)cp);
    if (e) {
        out[0] = '\\', out[1] = (unsigned char)e;
        return 2;
    }
    if (cp < 0x20) {
        char tmp[8];
        snprintf(tmp, sizeof(tmp), "\\u%04X", (unsigned)cp);
        memcpy(out, tmp, 6);
        return 6;
    }
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | cp >> 6), out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The string token whose text starts at s (after its quote): the index of
 * its closing quote, or -1 when jansson would refuse it. *dec: its decoded
 * length; *canon: whether it is written as te_json_dumps() would. */
static long scan(const unsigned char *s, size_t lim, size_t *dec, bool *canon)
{
    size_t i = 0, d = 0;
    for (;;) {
        size_t i0 = i;
        while (i < lim && plain[s[i]])
            i++;
        d += i - i0;
        if (i >= lim)
            return -1;
        unsigned char c = s[i];
        if (c == '"')
            break;
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            if (i + 1 >= lim)
                return -1;
            unsigned char e = s[i + 1];
            if (e == '/' || (e && e != 'u' && strchr("\"\\bfnrt", e))) {
                *canon = *canon && e != '/';
                i += 2, d++;
                continue;
            }
            size_t used;
            bool upper = true;
            long cp = e == 'u' ? u_escape(s + i, lim - i, &used, &upper) : -1;
            if (cp < 0)
                return -1;
            if (cp >= 0x20 || short_escape((unsigned)cp) || !upper)
                *canon = false;
            d += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; /* its UTF-8 length */
            i += used;
            continue;
        }
        size_t k = td_utf8_seq(s + i, lim - i);
        if (!k)
            return -1;
        i += k, d += k;
    }
    *dec = d;
    return (long)i;
}

/* The token's escapes rewritten in place as te_json_dumps() writes them;
 * never longer (a raw byte it would escape is not JSON). Returns the new
 * length. */
static size_t canonicalize(unsigned char *s, size_t end)
{
    size_t r = 0, w = 0;
    while (r < end) {
        if (s[r] != '\\' || (s[r + 1] != '/' && s[r + 1] != 'u')) {
            size_t k = s[r] == '\\' ? 2 : 1;
            memmove(s + w, s + r, k);
            r += k, w += k;
            continue;
        }
        size_t used = 2;
        bool upper;
        long cp = s[r + 1] == '/' ? '/' : u_escape(s + r, end - r, &used, &upper);
        unsigned char tmp[8];
        size_t k = put_canonical(tmp, cp);
        memcpy(s + w, tmp, k);
        r += used, w += k;
    }
    return w;
}

/* A big result, not yet owning anything, and its {"ok": marker}. */
static struct td_big *big_new(json_t **res)
{
    struct td_big *b = calloc(1, sizeof(*b));
    char m[MARK_LEN + ID_LEN + 1];
    if (!b)
        return NULL;
    b->id = ++last_id;
    b->refs = 1;
    snprintf(m, sizeof(m), MARK "%016llx", b->id);
    json_t *s = json_stringn_nocheck(m, MARK_LEN + ID_LEN);
    if (!s || !(*res = json_pack("{s:o}", "ok", s))) {
        free(b);
        return NULL;
    }
    return b;
}

static struct td_big *big_adopt(struct td_big *b, char *buf, const char *esc, size_t esc_n,
                                size_t n)
{
    b->buf = buf;
    b->esc = esc;
    b->esc_n = esc_n;
    b->n = n;
    b->next = live;
    live = b;
    return b;
}

json_t *td_big_frame(char *body, size_t len, struct td_big **big)
{
    const unsigned char *s = (const unsigned char *)body;
    if (!plain['a'])
        init_plain();
    size_t i = ws(s, 0, len), dec = 0;
    if (len < TD_BIG_MIN || i >= len || s[i] != '{')
        return NULL;
    i = ws(s, i + 1, len);
    if (len - i < 4 || memcmp(s + i, "\"ok\"", 4) != 0)
        return NULL;
    i = ws(s, i + 4, len);
    if (i >= len || s[i] != ':' || (i = ws(s, i + 1, len)) >= len || s[i] != '"')
        return NULL;
    size_t from = i + 1;
    bool canon = true;
    long end = scan(s + from, len - from, &dec, &canon);
    if (end < 0 || dec < TD_BIG_MIN)
        return NULL;
    size_t j = ws(s, from + (size_t)end + 1, len);
    if (j >= len || s[j] != '}' || ws(s, j + 1, len) != len)
        return NULL;
    json_t *res = NULL;
    struct td_big *b = big_new(&res);
    if (!b)
        return NULL;
    size_t esc_n = canon ? (size_t)end : canonicalize((unsigned char *)body + from, (size_t)end);
    *big = big_adopt(b, body, body + from, esc_n, dec);
    return res;
}

json_t *td_big_plain(char **bufp, size_t len, struct td_big **big)
{
    unsigned char *s = (unsigned char *)*bufp;
    if (!plain['a'])
        init_plain();
    size_t i = ws(s, 0, len);
    /* text that may be JSON is parsed as such (proto/PROTOCOL.md, 2.3) */
    if (len < TD_BIG_MIN || i == len || !s[i] || strchr("{[\"-0123456789tfn", s[i]))
        return NULL;
    size_t n = len - (s[len - 1] == '\n'), extra = 0;
    for (size_t k = 0; k < n;) {
        while (k < n && plain[s[k]])
            k++;
        if (k >= n)
            break;
        if (s[k] < 0x80) {
            extra += short_escape(s[k]) ? 1 : 5;
            k++;
        } else {
            size_t q = td_utf8_seq(s + k, n - k);
            if (!q)
                return NULL; /* not text: base64, as before */
            k += q;
        }
    }
    json_t *res = NULL;
    struct td_big *b = big_new(&res);
    char *grown = b ? realloc(*bufp, n + extra + 1) : NULL;
    if (!grown) {
        json_decref(res);
        free(b);
        return NULL;
    }
    /* escaped in place from the end: the one copy of the text stays one
     * (realloc of a block this large moves pages, not bytes) */
    s = (unsigned char *)grown;
    for (size_t r = n, w = n + extra; r > 0;) {
        unsigned char c = s[--r];
        if (c >= 0x80 || plain[c]) {
            s[--w] = c;
        } else {
            unsigned char tmp[8];
            size_t k = put_canonical(tmp, c);
            w -= k;
            memcpy(s + w, tmp, k);
        }
    }
    *bufp = NULL;
    *big = big_adopt(b, grown, grown, n + extra, n);
    return res;
}

/* p's bytes, escaped as they came (plainesc.h), as a big text: without
 * one trailing newline (its escape the last two bytes). */
static json_t *big_escaped(struct td_plain *p, struct td_big **big)
{
    json_t *res = NULL;
    struct td_big *b = big_new(&res);
    if (!b)
        return NULL;
    bool nl = p->last == '\n';
    *big = big_adopt(b, p->buf, p->buf, p->len - (nl ? 2 : 0), p->raw - nl);
    b->marks = p->marks;
    b->nmarks = p->nmarks;
    p->buf = NULL;
    p->marks = NULL;
    td_plain_free(p);
    return res;
}

json_t *td_plain_result(struct td_plain *p, struct td_big **big)
{
    json_t *res = NULL;
    if (td_plain_done(p)) /* escaped only where a big result may be made */
        return big ? big_escaped(p, big) : NULL;
    if (big && p->buf)
        res = td_big_plain(&p->buf, p->len, big);
    if (res)
        return res;
    size_t len = p->len, n = len;
    const char *out = p->buf ? p->buf : "";
    json_t *v = te_json_loadb(out, n, JSON_DECODE_ANY, NULL);
    if (!v) {
        if (n && out[n - 1] == '\n')
            n--;
        v = json_stringn(out, n);
    }
    if (!v) /* not text: hand it over intact rather than as a broken string */
        v = td_base64_value(out, len);
    return v ? json_pack("{s:o}", "ok", v) : NULL;
}

void td_big_unref(struct td_big *b)
{
    if (!b || --b->refs > 0)
        return;
    for (struct td_big **p = &live; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    free(b->buf);
    free(b->marks);
    free(b);
}

static struct td_big *find(const char *id)
{
    char hex[ID_LEN + 1];
    memcpy(hex, id, ID_LEN);
    hex[ID_LEN] = '\0';
    unsigned long long v = strtoull(hex, NULL, 16);
    for (struct td_big *b = live; b; b = b->next)
        if (b->id == v)
            return b;
    return NULL;
}

struct td_big *td_big_of(const json_t *v)
{
    if (!live || !json_is_string(v) || json_string_length(v) != MARK_LEN + ID_LEN ||
        memcmp(json_string_value(v), MARK, MARK_LEN) != 0)
        return NULL;
    return find(json_string_value(v) + MARK_LEN);
}

/* S's bytes [from, to) into out: decoded from esc, skipping what is before. */
static void decode(const struct td_big *b, size_t from, size_t to, char *out)
{
    if (b->esc_n == b->n) {
        memcpy(out, b->esc + from, to - from);
        return;
    }
    const unsigned char *s = (const unsigned char *)b->esc;
    size_t i = 0, d = 0, ml = 0, mh = b->nmarks;
    while (ml < mh) { /* the last mark at or before from: the cut's tail is O(its window) */
        size_t mid = ml + (mh - ml) / 2;
        if (b->marks[mid].raw <= from && b->marks[mid].esc <= b->esc_n)
            ml = mid + 1;
        else
            mh = mid;
    }
    if (ml)
        i = b->marks[ml - 1].esc, d = b->marks[ml - 1].raw;
    while (i < b->esc_n && d < to) {
        /* no further than to: a run that long already ends the window */
        size_t lim = b->esc_n - i < to - d ? b->esc_n - i : to - d;
        const unsigned char *bs = memchr(s + i, '\\', lim);
        size_t run = bs ? (size_t)(bs - (s + i)) : lim;
        const unsigned char *p = s + i;
        unsigned char one;
        if (!run) { /* an escape, as te_json_dumps() writes them */
            char e = (char)s[i + 1];
            bool upper;
            one = e == 'u'   ? (unsigned char)hex4(s + i + 2, &upper)
                  : e == 'b' ? '\b'
                  : e == 'f' ? '\f'
                  : e == 'n' ? '\n'
                  : e == 'r' ? '\r'
                  : e == 't' ? '\t'
                             : (unsigned char)e;
            i += e == 'u' ? 6 : 2;
            p = &one;
            run = 1;
        } else {
            i += run;
        }
        size_t lo = d > from ? d : from, hi = d + run < to ? d + run : to;
        if (lo < hi)
            memcpy(out + (lo - from), p + (lo - d), hi - lo);
        d += run;
    }
}

/* Near the cut's two ends, the only bytes td_cut_plan() asks for. */
struct windows {
    const char *head, *tail;
    size_t tail_at;
};

static unsigned char window_byte(void *ctx, size_t i)
{
    struct windows *w = ctx;
    return (unsigned char)(i < w->tail_at ? w->head[i] : w->tail[i - w->tail_at]);
}

static json_t *big_content(struct td_big *b, const json_t *marker, size_t limit, bool spill,
                           json_t **truncated, char **full, size_t *full_len)
{
    if (b->n <= limit)
        return json_incref((json_t *)marker);
    /* td_cut_plan() keeps at most limit / 2 + 1 head bytes and limit tail bytes */
    size_t head_n = limit / 2 + 1, tail_at = b->n - limit;
    te_autofree char *head = malloc(head_n), *tail = malloc(limit);
    if (!head || !tail)
        return NULL;
    decode(b, 0, head_n, head);
    decode(b, tail_at, b->n, tail);
    struct windows w = {.head = head, .tail = tail, .tail_at = tail_at};
    struct td_cut_plan p;
    td_cut_plan(b->n, limit, window_byte, &w, &p);
    size_t kept_tail = b->n - p.tail_from, len = p.head + p.mlen + kept_tail;
    te_autofree char *out = malloc(len + 1);
    if (!out)
        return NULL;
    memcpy(out, head, p.head);
    memcpy(out + p.head, p.marker, p.mlen);
    memcpy(out + p.head + p.mlen, tail + (p.tail_from - tail_at), kept_tail);
    *truncated = json_pack("{s:I,s:I}", "original_bytes", (json_int_t)b->n, "kept_bytes",
                           (json_int_t)(p.head + kept_tail));
    if (spill && (*full = malloc(b->n))) {
        decode(b, 0, b->n, *full);
        *full_len = b->n;
    }
    return td_json_text(out, len);
}

json_t *td_content_make_encoded(const json_t *result, char *text, size_t len, size_t limit,
                                bool spill, json_t **truncated, char **full, size_t *full_len)
{
    *truncated = NULL;
    *full = NULL;
    json_t *ok = json_object_get(result, "ok");
    struct td_big *b = td_big_of(ok);
    if (b) {
        free(text);
        return big_content(b, ok, limit, spill, truncated, full, full_len);
    }
    int rc;
    if (!text)
        text = te_content_encode(result, SIZE_MAX, &len, &rc);
    if (text && len > limit) {
        /* by length: content may hold NUL bytes */
        if (spill && (*full = malloc(len))) {
            memcpy(*full, text, len);
            *full_len = len;
        }
        size_t orig = len, kept;
        if (td_cut(&text, &len, limit, &kept))
            *truncated = json_pack("{s:I,s:I}", "original_bytes", (json_int_t)orig, "kept_bytes",
                                   (json_int_t)kept);
    }
    json_t *content = td_json_text(text ? text : "", text ? len : 0);
    free(text);
    return content;
}

json_t *td_content_make(const json_t *result, size_t limit, bool spill, json_t **truncated,
                        char **full, size_t *full_len)
{
    return td_content_make_encoded(result, NULL, 0, limit, spill, truncated, full, full_len);
}

int td_content_check_keep(const json_t *result, size_t limit, char **kept, size_t *kept_len)
{
    if (kept)
        *kept = NULL;
    struct td_big *b = td_big_of(json_object_get(result, "ok"));
    if (b)
        return b->n > limit ? -E2BIG : 0;
    size_t len;
    int rc = 0;
    char *text = te_content_encode(result, limit, &len, &rc);
    if (!text)
        return rc ? rc : -EINVAL;
    if (kept) {
        *kept = text;
        *kept_len = len;
    } else {
        free(text);
    }
    return 0;
}

int td_content_check(const json_t *result, size_t limit)
{
    return td_content_check_keep(result, limit, NULL, NULL);
}

struct line_hold {
    unsigned nbig;
    struct td_big **bigs;
    uv_buf_t bufs[];
};

void *td_big_split(char *line, size_t len, uv_buf_t **bufs, unsigned *n, size_t *bytes)
{
    if (!live)
        return NULL;
    unsigned k = 0;
    for (const char *p = line; (p = memmem(p, (size_t)(line + len - p), MARK, MARK_LEN));
         p += MARK_LEN)
        k++;
    if (!k)
        return NULL;
    struct line_hold *h = calloc(1, sizeof(*h) + (2 * k + 1) * sizeof(uv_buf_t));
    if (!h || !(h->bigs = calloc(k, sizeof(*h->bigs)))) {
        free(h);
        return NULL;
    }
    unsigned nb = 0;
    size_t total = 0;
    const char *at = line;
    for (const char *p = line; (p = memmem(p, (size_t)(line + len - p), MARK, MARK_LEN));) {
        struct td_big *b = line + len - p >= MARK_LEN + ID_LEN ? find(p + MARK_LEN) : NULL;
        h->bufs[nb++] = uv_buf_init((char *)at, (unsigned)(p - at));
        if (b) { /* a marker whose result is gone reads as "" */
            b->refs++;
            h->bigs[h->nbig++] = b;
            h->bufs[nb++] = uv_buf_init((char *)b->esc, (unsigned)b->esc_n);
            total += b->esc_n;
        }
        total += (size_t)(p - at);
        at = p = p + (line + len - p >= MARK_LEN + ID_LEN ? MARK_LEN + ID_LEN : MARK_LEN);
    }
    h->bufs[nb++] = uv_buf_init((char *)at, (unsigned)(line + len - at));
    *bytes = total + (size_t)(line + len - at);
    *bufs = h->bufs;
    *n = nb;
    return h;
}

void td_big_line_free(void *hold)
{
    struct line_hold *h = hold;
    if (!h)
        return;
    for (unsigned i = 0; i < h->nbig; i++)
        td_big_unref(h->bigs[i]);
    free(h->bigs);
    free(h);
}

static bool has_marker(const json_t *v)
{
    const char *key;
    json_t *m;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, key, m) if (has_marker(m)) return true;
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, m) if (has_marker(m)) return true;
    }
    return td_big_of(v) != NULL;
}

static json_t *materialize(json_t *v)
{
    struct td_big *b = td_big_of(v);
    const char *key;
    json_t *m, *out = NULL;
    size_t i;
    if (b) {
        char *text = malloc(b->n ? b->n : 1);
        if (text)
            decode(b, 0, b->n, text);
        out = text ? json_stringn_nocheck(text, b->n) : NULL; /* checked as it came */
        free(text);
    } else if (json_is_object(v)) {
        out = json_object();
        json_object_foreach(v, key, m) json_object_set_new(out, key, materialize(m));
    } else if (json_is_array(v)) {
        out = json_array();
        json_array_foreach(v, i, m) json_array_append_new(out, materialize(m));
    } else {
        out = json_incref(v);
    }
    return out;
}

json_t *td_big_materialize(json_t *ev)
{
    if (!live || !ev || !has_marker(ev))
        return ev;
    json_t *copy = materialize(ev);
    json_decref(ev);
    return copy;
}
