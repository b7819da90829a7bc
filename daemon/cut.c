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

bool td_cut(char **textp, size_t *len, size_t limit, size_t *kept)
{
    char *text = *textp;
    char marker[200];
    size_t orig = *len;
    int mlen = snprintf(marker, sizeof(marker),
                        "\n\n[... toolexecd omitted %zu of %zu bytes here; ask for a narrower "
                        "result ...]\n\n",
                        orig, orig); /* sized with the largest count: fixed below */
    if ((size_t)mlen + 16 > limit)
        mlen = 0; /* a limit too small for a marker: keep bytes only */
    size_t budget = limit - (size_t)mlen;
    size_t head = budget / 2, tail = budget - head;
    while (head > 0 && ((unsigned char)text[head] & 0xc0) == 0x80)
        head--; /* do not start the cut inside a character */
    size_t tail_from = orig - tail;
    while (tail_from < orig && ((unsigned char)text[tail_from] & 0xc0) == 0x80)
        tail_from++;
    size_t omitted = tail_from - head;
    if (mlen)
        mlen = snprintf(marker, sizeof(marker),
                        "\n\n[... toolexecd omitted %zu of %zu bytes here; ask for a narrower "
                        "result ...]\n\n",
                        omitted, orig);
    char *out = malloc(head + (size_t)mlen + (orig - tail_from) + 1);
    if (!out)
        return false;
    memcpy(out, text, head);
    memcpy(out + head, marker, (size_t)mlen);
    memcpy(out + head + mlen, text + tail_from, orig - tail_from);
    *len = head + (size_t)mlen + (orig - tail_from);
    out[*len] = '\0';
    free(text);
    *textp = out;
    *kept = head + orig - tail_from;
    return true;
}
