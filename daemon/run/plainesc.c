/*
 * plainesc.c - a plain tool's stdout, escaped as it arrives (see
 * plainesc.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plainesc.h"

/* Per byte, as te_json_dumps() writes it inside a string: 0 as it is; a
 * letter or '"' or '\\': a backslash and it ('u': \u00XX); 0x80: the
 * start of a UTF-8 character, checked. */
static unsigned char cls[256];

static void init_cls(void)
{
    for (int c = 0; c < 0x20; c++)
        cls[c] = 'u';
    cls['\b'] = 'b', cls['\f'] = 'f', cls['\n'] = 'n', cls['\r'] = 'r', cls['\t'] = 't';
    cls['"'] = '"', cls['\\'] = '\\';
    for (int c = 0x80; c < 0x100; c++)
        cls[c] = 0x80;
}

size_t td_utf8_seq(const unsigned char *s, size_t left)
{
    unsigned c = s[0], k, cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 4, cp = c & 0x07;
    else
        return 0;
    if (left < k)
        return 0;
    for (unsigned i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return k;
}

/* The length a character starting with c has; 0: no character starts so. */
static unsigned utf8_need(unsigned char c)
{
    return c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}

/* s[0..left) may be the start of a character that the next bytes end. */
static bool utf8_begun(const unsigned char *s, size_t left)
{
    if (left >= utf8_need(s[0]))
        return false; /* complete or no start at all: utf8_seq() said no */
    for (size_t i = 1; i < left; i++)
        if ((s[i] & 0xc0) != 0x80)
            return false;
    return true;
}

static int reserve(struct td_plain *p, size_t more)
{
    if (p->cap - p->len >= more)
        return 0;
    size_t c = p->cap ? p->cap : 4096;
    while (c - p->len < more)
        c *= 2;
    char *b = realloc(p->buf, c); /* a large block moves its pages, not its bytes */
    if (!b)
        return -ENOMEM;
    p->buf = b;
    p->cap = c;
    return 0;
}

/* Room escape() may use for n bytes and a character begun before them:
 * 6 per byte (\u00XX) and a word it stores whole. */
#define ROOM(n) (6 * ((n) + 4) + 16)

#define ONES 0x0101010101010101ull

/* s[0..n) escaped onto buf. Returns the bytes taken: n, or fewer where a
 * character begun at n's end went to pend, or where (*bad) a byte is not
 * UTF-8. */
static size_t escape(struct td_plain *p, const unsigned char *s, size_t n, bool *bad)
{
    static const char hex[] = "0123456789ABCDEF";
    char *o = p->buf + p->len;
    size_t i = 0;
    *bad = false;
    for (;;) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* eight bytes at a time up to the first that needs more than a
         * copy (below 0x20, '"', '\\', 0x80 and up); the lowest flagged
         * byte is exact, later ones may not be */
        while (n - i >= 8) {
            uint64_t x, q, b;
            memcpy(&x, s + i, 8);
            q = x ^ (ONES * '"');
            b = x ^ (ONES * '\\');
            uint64_t m = ((x - ONES * 0x20) & ~x) | ((q - ONES) & ~q) | ((b - ONES) & ~b) | x;
            m &= ONES * 0x80;
            memcpy(o, &x, 8);
            if (!m) {
                o += 8, i += 8;
                continue;
            }
            unsigned j = (unsigned)__builtin_ctzll(m) >> 3;
            o += j, i += j;
            break;
        }
#endif
        if (i >= n)
            break;
        unsigned char c = s[i], k = cls[c];
        if (!k) {
            *o++ = (char)c;
            i++;
        } else if (k == 'u') {
            memcpy(o, "\\u00", 4);
            o[4] = hex[c >> 4], o[5] = hex[c & 15];
            o += 6, i++;
        } else if (k < 0x80) {
            o[0] = '\\', o[1] = (char)k;
            o += 2, i++;
        } else {
            size_t q = td_utf8_seq(s + i, n - i);
            if (q) {
                memcpy(o, s + i, q);
                o += q, i += q;
            } else {
                if (utf8_begun(s + i, n - i)) {
                    memcpy(p->pend, s + i, n - i);
                    p->npend = (unsigned)(n - i);
                } else {
                    *bad = true;
                }
                break;
            }
        }
    }
    p->len = (size_t)(o - p->buf);
    return i;
}

static void add_mark(struct td_plain *p)
{
    size_t last = p->nmarks ? p->marks[p->nmarks - 1].esc : 0;
    if (p->len - last < TD_ESC_MARK_EVERY)
        return;
    if (p->nmarks == p->mcap) {
        size_t c = p->mcap ? 2 * p->mcap : 64;
        struct td_esc_mark *m = realloc(p->marks, c * sizeof(*m));
        if (!m)
            return; /* a reader then starts at an earlier mark */
        p->marks = m;
        p->mcap = c;
    }
    p->marks[p->nmarks++] = (struct td_esc_mark){.esc = p->len, .raw = p->raw - p->npend};
}

size_t td_unescape(char *s, size_t n)
{
    size_t r = 0, w = 0;
    while (r < n) {
        char *bs = memchr(s + r, '\\', n - r);
        size_t run = (bs ? (size_t)(bs - s) : n) - r;
        memmove(s + w, s + r, run);
        r += run, w += run;
        if (!bs)
            break;
        char e = s[r + 1], c = e;
        if (e == 'u') {
            unsigned v = 0;
            for (int i = 2; i < 6; i++) {
                char h = s[r + i];
                v = v << 4 | (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
            }
            c = (char)v;
        } else {
            c = e == 'b'   ? '\b'
                : e == 'f' ? '\f'
                : e == 'n' ? '\n'
                : e == 'r' ? '\r'
                : e == 't' ? '\t'
                           : e;
        }
        s[w++] = c;
        r += e == 'u' ? 6 : 2;
    }
    return w;
}

/* Not text after all: buf back to the bytes the tool wrote, pend and
 * rest[0..n) after them; kept so to the end. */
static int to_raw(struct td_plain *p, const char *rest, size_t n)
{
    p->len = td_unescape(p->buf, p->len);
    p->esc = false;
    free(p->marks);
    p->marks = NULL;
    p->nmarks = p->mcap = 0;
    if (reserve(p, p->npend + n) < 0)
        return -ENOMEM;
    memcpy(p->buf + p->len, p->pend, p->npend);
    p->len += p->npend;
    p->npend = 0;
    if (n)
        memcpy(p->buf + p->len, rest, n);
    p->len += n;
    return 0;
}

/* The bytes kept so far escaped into a new buffer, when their first byte
 * that is not white space says they are not JSON (proto/PROTOCOL.md, 2.3;
 * as td_big_plain() decides). */
static void start(struct td_plain *p)
{
    const unsigned char *s = (const unsigned char *)p->buf;
    size_t i = 0;
    while (i < p->len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    if (i == p->len || !s[i] || strchr("{[\"-0123456789tfn", s[i]))
        return;
    struct td_plain e = {.raw = p->raw, .last = p->last, .decided = true, .esc = true};
    bool bad;
    if (reserve(&e, ROOM(p->len)) < 0)
        return; /* kept raw: the end decides as before */
    if (escape(&e, s, p->len, &bad) < p->len && bad) {
        free(e.buf);
        return;
    }
    free(p->buf);
    *p = e;
    add_mark(p);
}

int td_plain_feed(struct td_plain *p, const char *s, size_t n, size_t esc_from)
{
    if (!cls['"'])
        init_cls();
    if (!n)
        return 0;
    if (!p->esc) {
        if (reserve(p, n) < 0)
            return -ENOMEM;
        memcpy(p->buf + p->len, s, n);
        p->len += n;
        p->raw += n;
        p->last = (unsigned char)s[n - 1];
        if (!p->decided && esc_from && p->raw >= esc_from) {
            p->decided = true;
            start(p);
        }
        return 0;
    }
    if (reserve(p, ROOM(n)) < 0)
        return -ENOMEM;
    p->raw += n;
    p->last = (unsigned char)s[n - 1];
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    if (p->npend) { /* the character begun at the last chunk's end */
        unsigned need = utf8_need(p->pend[0]);
        size_t take = need - p->npend < n ? need - p->npend : n;
        memcpy(p->pend + p->npend, u, take);
        p->npend += (unsigned)take;
        i = take;
        if (p->npend < need)
            return 0;
        if (td_utf8_seq(p->pend, need) != need)
            return to_raw(p, s + i, n - i);
        memcpy(p->buf + p->len, p->pend, need);
        p->len += need;
        p->npend = 0;
    }
    bool bad;
    size_t used = escape(p, u + i, n - i, &bad);
    if (bad)
        return to_raw(p, s + i + used, n - i - used);
    add_mark(p);
    return 0;
}

bool td_plain_done(struct td_plain *p)
{
    if (p->esc && p->npend)
        to_raw(p, NULL, 0); /* ends inside a character: not text */
    return p->esc;
}

void td_plain_free(struct td_plain *p)
{
    free(p->buf);
    free(p->marks);
    *p = (struct td_plain){0};
}
