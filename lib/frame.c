/*
 * frame.c - the length-prefixed frame codec: a 4-byte big-endian length N,
 * then N bytes. Incremental (bytes arrive in any split) and size-capped: an
 * announced length over the cap is refused as soon as the header is complete,
 * before any body byte is buffered; the cap itself is at most
 * TE_FRAME_MAX_LIMIT. No I/O here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "toolexec.h"

void te_frame_decoder_init(te_frame_decoder *d, uint32_t max)
{
    memset(d, 0, sizeof(*d));
    d->max = max > TE_FRAME_MAX_LIMIT ? TE_FRAME_MAX_LIMIT : max;
}

void te_frame_decoder_free(te_frame_decoder *d)
{
    free(d->body);
    d->body = NULL;
    d->hdr_have = d->have = 0;
    d->done = false;
}

int te_frame_feed(te_frame_decoder *d, const void *buf, size_t len, size_t *consumed)
{
    const uint8_t *p = buf;
    size_t used = 0;

    *consumed = 0;
    if (d->done)
        return TE_FRAME_DONE;
    while (d->hdr_have < TE_FRAME_HEADER_LEN && used < len)
        d->hdr[d->hdr_have++] = p[used++];
    if (d->hdr_have < TE_FRAME_HEADER_LEN) {
        *consumed = used;
        return TE_FRAME_NEED;
    }
    if (!d->body) {
        d->len = (uint32_t)d->hdr[0] << 24 | (uint32_t)d->hdr[1] << 16 | (uint32_t)d->hdr[2] << 8 |
                 (uint32_t)d->hdr[3];
        if (d->len > d->max) {
            *consumed = used;
            return -EMSGSIZE;
        }
        size_t size; /* the body and its NUL; len + 1 wraps a 32-bit size_t */
        if (__builtin_add_overflow((size_t)d->len, (size_t)1, &size)) {
            *consumed = used;
            return -EMSGSIZE;
        }
        d->body = malloc(size);
        if (!d->body)
            return -ENOMEM;
        d->have = 0;
    }
    size_t take = d->len - d->have;
    if (take > len - used)
        take = len - used;
    memcpy(d->body + d->have, p + used, take);
    d->have += take;
    used += take;
    *consumed = used;
    if (d->have < d->len)
        return TE_FRAME_NEED;
    d->body[d->len] = '\0';
    d->done = true;
    return TE_FRAME_DONE;
}

char *te_frame_take(te_frame_decoder *d, size_t *len)
{
    if (!d->done)
        return NULL;
    char *body = d->body;
    if (len)
        *len = d->len;
    d->body = NULL;
    d->hdr_have = d->have = 0;
    d->done = false;
    return body;
}

size_t te_frame_pending(const te_frame_decoder *d)
{
    return d->hdr_have + (d->body ? d->have : 0);
}

void te_frame_header(uint32_t len, uint8_t out[TE_FRAME_HEADER_LEN])
{
    out[0] = (uint8_t)(len >> 24);
    out[1] = (uint8_t)(len >> 16);
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
}
