/*
 * bridge_sse.c - a Streamable HTTP answer's body: bytes kept, bounded, and
 * an SSE stream's events parsed as they come (the server's, so anything
 * at all). Lines end in LF or CRLF; "data:" lines make an event's data
 * (one leading space dropped, joined by LF); an empty line ends the event,
 * whose data is one JSON-RPC message (a JSON object); an event without
 * data, or with empty data (the TypeScript SDK's priming event, an id for
 * resuming), carries none. Comments (":"), event, id and retry lines are
 * nothing to us.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_sse.h"
#include "toolexec.h" /* te_json_loadb: numbers as written */

static bool append(char **b, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n > BRIDGE_BODY_MAX)
        return false;
    if (*cap - *len < n + 1) {
        size_t c = *cap ? *cap : 65536;
        while (c - *len < n + 1)
            c *= 2;
        char *nb = realloc(*b, c);
        if (!nb)
            return false;
        *b = nb;
        *cap = c;
    }
    memcpy(*b + *len, p, n);
    *len += n;
    return true;
}

bool bridge_sse_keep(struct bridge_sse *s, const char *p, size_t n)
{
    return append(&s->buf, &s->len, &s->cap, p, n);
}

/* One line (its end stripped). */
static int line(struct bridge_sse *s, const char *l, size_t n, json_t *queue, char *why,
                size_t whylen)
{
    if (n == 0) {
        if (s->dlen <= 1) { /* no data, or empty */
            s->dlen = 0;
            return 0;
        }
        json_error_t jerr;
        json_t *m = te_json_loadb(s->data, s->dlen - 1, JSON_REJECT_DUPLICATES, &jerr);
        s->dlen = 0;
        if (!json_is_object(m)) {
            snprintf(why, whylen, "sent an event that is not a JSON-RPC message (%s)",
                     m ? "not an object" : jerr.text);
            json_decref(m);
            return -1;
        }
        json_array_append_new(queue, m);
        return 0;
    }
    const char *colon = memchr(l, ':', n);
    size_t f = colon ? (size_t)(colon - l) : n;
    if (f != 4 || memcmp(l, "data", 4) != 0)
        return 0;
    const char *v = colon ? colon + 1 : l + n;
    size_t vn = (size_t)(l + n - v);
    if (vn && *v == ' ')
        v++, vn--;
    if (!append(&s->data, &s->dlen, &s->dcap, v, vn) ||
        !append(&s->data, &s->dlen, &s->dcap, "\n", 1)) {
        snprintf(why, whylen, "sent an event over %u bytes", BRIDGE_BODY_MAX);
        return -1;
    }
    return 0;
}

int bridge_sse_feed(struct bridge_sse *s, json_t *queue, char *why, size_t whylen)
{
    size_t at = 0;
    char *nl;
    while (s->len > at && (nl = memchr(s->buf + at, '\n', s->len - at))) {
        size_t n = (size_t)(nl - (s->buf + at));
        if (line(s, s->buf + at, n && s->buf[at + n - 1] == '\r' ? n - 1 : n, queue, why, whylen) <
            0)
            return -1;
        at += n + 1;
    }
    if (at) /* what is not a whole line yet stays at the front */
        memmove(s->buf, s->buf + at, s->len - at);
    s->len -= at;
    return 0;
}

int bridge_sse_end(struct bridge_sse *s, json_t *queue, char *why, size_t whylen)
{
    return line(s, "", 0, queue, why, whylen);
}

void bridge_sse_reset(struct bridge_sse *s)
{
    s->len = s->dlen = 0;
}

void bridge_sse_free(struct bridge_sse *s)
{
    free(s->buf);
    free(s->data);
    *s = (struct bridge_sse){0};
}
