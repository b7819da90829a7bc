/*
 * utf8.c - UTF-8 sequences checked and text repaired: what the daemon says
 * goes into JSON, which takes only valid UTF-8, and its sources (jansson's
 * quotes of bad input, a tool's words, a message cut at a byte count) need
 * not be. Pure functions, no I/O.
 */
#include <stdbool.h>
#include <string.h>

#include "toolexec.h"

size_t te_utf8_seq(const void *start, size_t n)
{
    const unsigned char *p = start;
    unsigned c = p[0], cp, min;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    cp = c & (0xffu >> (len + 1));
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void te_utf8_repair(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t l = te_utf8_seq(s + i, n - i);
        if (l) {
            i += l;
            continue;
        }
        /* a sequence cut off at the very end (a truncated message) goes;
         * a bad byte elsewhere becomes '?' */
        size_t rest = n - i;
        unsigned c = (unsigned char)s[i];
        size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
        bool cut = want && rest < want;
        for (size_t k = 1; cut && k < rest; k++)
            cut = ((unsigned char)s[i + k] & 0xc0) == 0x80;
        if (cut) {
            s[i] = '\0';
            return;
        }
        s[i++] = '?';
    }
}
