/*
 * cut.h - content cutting: a call's content longer than its limit keeps its
 * head and tail, cut on UTF-8 boundaries, with a marker between saying what
 * was left out. Pure (no libuv, no JSON): tested in daemon/unit/test_cut.c.
 */
#ifndef TD_CUT_H
#define TD_CUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The content limit of a call: the batch's max_content_bytes (0: the
 * default), lowered by the tool's (0: none). */
size_t td_cut_limit(uint64_t batch_limit, uint64_t tool_limit, size_t dflt);

/* Cut *text (*len bytes, NUL-terminated, longer than limit) to at most
 * limit bytes: on success *text is a new buffer (the old one freed), *len
 * its length and *kept the bytes of the original it keeps; false (out of
 * memory) leaves all as they were. */
bool td_cut(char **text, size_t *len, size_t limit, size_t *kept);

/* The cut of orig bytes (more than limit) whose byte i is byte(ctx, i):
 * head bytes kept from the start, the marker, the bytes from tail_from on.
 * byte() is asked only near head and tail_from (a big result's text is
 * not in one piece: bigres.c). */
struct td_cut_plan {
    char marker[200];
    size_t mlen, head, tail_from;
};
void td_cut_plan(size_t orig, size_t limit, unsigned char (*byte)(void *ctx, size_t i), void *ctx,
                 struct td_cut_plan *p);

#endif
