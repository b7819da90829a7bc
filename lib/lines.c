/*
 * lines.c - the JSON-lines decoder: bytes in any split, whole lines out
 * (without their newline), each capped in length. A line that passes the cap
 * is refused as soon as the bytes that pass it arrive, and the rest of it, up
 * to its newline, is skipped without being buffered. No I/O here.
 *
 * Only the unfinished line is buffered: feeding stops at the end of each
 * line, and the caller keeps the bytes after it (a read buffer), as
 * te_frame_feed() does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "toolexec.h"

/* First buffer for a line; doubled as the line grows, up to the cap. */
#define TE_LINES_FIRST_CAP 4096

void te_lines_init(te_lines *d, size_t max)
{
    memset(d, 0, sizeof(*d));
    d->max = max;
    d->keep = TE_LINES_KEEP_DEFAULT;
}

/* Give the buffer back (and its share of *account). */
static void release(te_lines *d)
{
    if (d->account)
        *d->account -= d->cap;
    free(d->buf);
    d->buf = NULL;
    d->cap = d->len = 0;
}

void te_lines_free(te_lines *d)
{
    release(d);
    d->skipping = d->done = false;
}

int te_lines_feed(te_lines *d, const void *buf, size_t len, size_t *consumed)
{
    const char *p = buf;
    size_t used = 0;

    *consumed = 0;
    if (d->done)
        return TE_LINES_LINE;
    for (;;) {
        const char *nl = used < len ? memchr(p + used, '\n', len - used) : NULL;
        size_t seg = nl ? (size_t)(nl - (p + used)) : len - used;
        if (d->skipping) {
            used += seg;
            if (!nl) {
                *consumed = used;
                return TE_LINES_NEED;
            }
            used++; /* the refused line ends here */
            d->skipping = false;
            d->len = 0;
            if (d->cap > d->keep)
                release(d);
            continue;
        }
        if (d->len + seg > d->max) {
            /* the segment is the refused line's: skipped with it */
            *consumed = used + seg;
            te_lines_drop(d);
            return -EMSGSIZE;
        }
        if (d->len + seg > d->cap) {
            size_t ncap = d->cap ? d->cap : TE_LINES_FIRST_CAP;
            while (ncap < d->len + seg)
                ncap *= 2;
            if (ncap > d->max)
                ncap = d->max;
            d->want = ncap;
            *consumed = used;
            if (d->ask)
                return TE_LINES_GROW;
            int rc = te_lines_grow(d);
            if (rc < 0) {
                te_lines_drop(d);
                return rc;
            }
        }
        if (seg)
            memcpy(d->buf + d->len, p + used, seg);
        d->len += seg;
        used += seg;
        *consumed = used;
        if (!nl)
            return TE_LINES_NEED;
        *consumed = used + 1;
        d->done = true;
        return TE_LINES_LINE;
    }
}

int te_lines_grow(te_lines *d)
{
    if (d->want <= d->cap)
        return 0;
    char *nb = realloc(d->buf, d->want);
    if (!nb)
        return -ENOMEM;
    if (d->account)
        *d->account += d->want - d->cap;
    d->buf = nb;
    d->cap = d->want;
    return 0;
}

void te_lines_drop(te_lines *d)
{
    d->skipping = true;
    d->done = false;
    release(d);
}

char *te_lines_line(te_lines *d, size_t *len)
{
    static char empty[1];
    if (!d->done)
        return NULL;
    *len = d->len;
    return d->buf ? d->buf : empty;
}

void te_lines_next(te_lines *d)
{
    d->done = false;
    d->len = 0;
    if (d->cap > d->keep)
        release(d);
}

char *te_lines_finish(te_lines *d, size_t *len)
{
    if (d->done || d->skipping || !d->len)
        return NULL;
    d->done = true;
    return te_lines_line(d, len);
}

/* The encoder, for the daemon, the client and the CLI alike. */
char *te_lines_dump(const json_t *v, size_t *len)
{
    char *s = te_json_dumps(v, 0, len);
    if (!s)
        return NULL;
    s[(*len)++] = '\n'; /* over the NUL: te_json_dumps() allocated one byte more */
    return s;
}
