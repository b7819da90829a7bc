/*
 * plainesc.h - a plain tool's stdout, escaped as it arrives.
 *
 * A plain tool's text result becomes a JSON string. Escaping it once the
 * tool had exited (in place, byte by byte) and decoding the escaped text
 * from its start to find the content cut's tail made a 64 MiB text result
 * cost 2.3-3.6x the tool's own time (perf: td_big_plain ~70 %, decode ~22 %
 * of the daemon's CPU). Here the bytes are kept as they came until there
 * are esc_from of them; from then on, when the text cannot be JSON (its
 * first byte that is not white space says so), each chunk is escaped as it
 * is read, as te_json_dumps() writes a string, while the tool writes the
 * next one; marks every TD_ESC_MARK_EVERY escaped bytes say which raw
 * offset an escaped offset stands for, so a reader of a window (the cut's
 * tail) starts near it. Text that turns out not to be UTF-8 is turned back
 * into the bytes the tool wrote (the result is then base64, as before).
 * Measured (bench/bigresult.py --mib 64, 2 CPUs, two runs): plain text
 * 3.09x / 2.02x the tool's time before, 1.31x / 1.35x after; plain 'x'
 * 2.70x / 1.45x before, 1.03x / 1.05x after; peak unchanged (1.10x).
 *
 * Pure (no libuv, no JSON): tested in daemon/unit/test_plainesc.c.
 */
#ifndef TD_PLAINESC_H
#define TD_PLAINESC_H

#include <stdbool.h>
#include <stddef.h>

#define TD_ESC_MARK_EVERY (64u << 10)

/* esc: an escaped offset at no escape's middle; raw: the tool's bytes it
 * stands for. */
struct td_esc_mark {
    size_t esc, raw;
};

struct td_plain {
    char *buf;          /* the tool's bytes, or escaped when esc */
    size_t len, cap;    /* in buf */
    size_t raw;         /* bytes the tool wrote */
    bool esc;           /* buf holds them escaped (but pend) */
    bool decided;       /* whether to escape is known */
    unsigned char last; /* the tool's last byte */
    unsigned char pend[4];
    unsigned npend; /* a character begun at a chunk's end */
    struct td_esc_mark *marks;
    size_t nmarks, mcap; /* ascending in both offsets */
};

/* n more bytes of the tool's stdout; esc_from: escape from that many on
 * (0: never, e.g. an output validator reads the raw text). -ENOMEM, with
 * p left as it was but for the bytes not taken. */
int td_plain_feed(struct td_plain *p, const char *s, size_t n, size_t esc_from);
/* At the tool's end: true when buf holds all its bytes escaped; false when
 * it holds them raw (a character left incomplete is raw again). */
bool td_plain_done(struct td_plain *p);
/* buf and marks freed; p zeroed. */
void td_plain_free(struct td_plain *p);

/* The length of the well-formed UTF-8 sequence at s (as jansson checks it:
 * no overlong form, no surrogate, at most U+10FFFF); 0 if there is none. */
size_t td_utf8_seq(const unsigned char *s, size_t left);
/* Escaped text (as written here and by te_json_dumps()) decoded in place;
 * returns its decoded length. */
size_t td_unescape(char *s, size_t n);

#endif
