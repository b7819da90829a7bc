/*
 * cut.c - content cutting on UTF-8 boundaries (see cut.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cut.h"

size_t td_cut_limit(uint64_t batch_limit, uint64_t tool_limit, size_t dflt)
{
    size_t limit = batch_limit ? batch_limit : dflt;
    if (tool_limit && tool_limit < limit)
        limit = tool_limit;
    return limit;
}

void td_cut_plan(size_t orig, size_t limit, unsigned char (*byte)(void *, size_t), void *ctx,
                 struct td_cut_plan *p)
{
    int mlen = snprintf(p->marker, sizeof(p->marker),
                        "\n\n[... toolexecd omitted %zu of %zu bytes here; ask for a narrower "
                        "result ...]\n\n",
                        orig, orig); /* sized with the largest count: fixed below */
    if ((size_t)mlen + 16 > limit)
        mlen = 0; /* a limit too small for a marker: keep bytes only */
    size_t budget = limit - (size_t)mlen;
    size_t head = budget / 2, tail = budget - head;
    while (head > 0 && (byte(ctx, head) & 0xc0) == 0x80)
        head--; /* do not start the cut inside a character */
    size_t tail_from = orig - tail;
    while (tail_from < orig && (byte(ctx, tail_from) & 0xc0) == 0x80)
        tail_from++;
    if (mlen)
        mlen = snprintf(p->marker, sizeof(p->marker),
                        "\n\n[... toolexecd omitted %zu of %zu bytes here; ask for a narrower "
                        "result ...]\n\n",
                        tail_from - head, orig);
    p->mlen = (size_t)mlen;
    p->head = head;
    p->tail_from = tail_from;
}

static unsigned char text_byte(void *text, size_t i)
{
    return ((unsigned char *)text)[i];
}

bool td_cut(char **textp, size_t *len, size_t limit, size_t *kept)
{
    char *text = *textp;
    size_t orig = *len;
    struct td_cut_plan p;
    td_cut_plan(orig, limit, text_byte, text, &p);
    size_t head = p.head, tail_from = p.tail_from;
    char *out = malloc(head + p.mlen + (orig - tail_from) + 1);
    if (!out)
        return false;
    memcpy(out, text, head);
    memcpy(out + head, p.marker, p.mlen);
    memcpy(out + head + p.mlen, text + tail_from, orig - tail_from);
    *len = head + p.mlen + (orig - tail_from);
    out[*len] = '\0';
    free(text);
    *textp = out;
    *kept = head + orig - tail_from;
    return true;
}
