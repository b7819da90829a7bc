/*
 * fuzz_lines - the JSON-lines decoder against a whole-buffer model (the
 * stream split at each newline).
 *
 * Input layout:
 *   [0]       cap selector, low 3 bits: 0 1 4 16 255 4096 65536, 7 = custom
 *             cap from [1..2]
 *   [1..2]    custom cap, big-endian (0..65535)
 *   [3]       flags: low 4 bits = number of split sizes k; bit 4 = ask mode
 *             (growth on request, as the daemon does); bit 5 = in ask mode,
 *             drop the line instead of growing every other time; bit 6 =
 *             keep 0 (a line's buffer freed after every line)
 *   [4..4+k)  chunk sizes, used in turn (a 0 feeds an empty buffer)
 *   rest      the byte stream given to the decoder
 *
 * Invariants: consumed <= len; NEED consumes everything; each line equals
 * the model's and ends at its newline; a line longer than the cap is refused
 * (-EMSGSIZE) exactly once, as soon as the bytes that pass the cap arrive,
 * with nothing of it buffered afterwards, and lines after it are whole; a
 * dropped line yields nothing; the buffer never outgrows the cap (its real
 * allocation included) and the shared account always equals its size; the
 * last line without a newline comes from te_lines_finish() unless refused,
 * dropped or empty.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/allocator_interface.h>
#define HAVE_ALLOCATED_SIZE 1
#endif
#endif

#include "fuzz_common.h"
#include "toolexec.h"

static void check_state(const te_lines *d, size_t cap, size_t account)
{
    CHECK(d->max == cap, "max %zu changed (cap %zu)", d->max, cap);
    CHECK(account == d->cap, "account %zu, buffer %zu", account, d->cap);
    CHECK(d->len <= d->cap, "len %zu > buffer %zu", d->len, d->cap);
    CHECK(d->cap <= cap, "buffer %zu over cap %zu", d->cap, cap);
    CHECK((d->buf == NULL) == (d->cap == 0), "buf %p with cap %zu", (void *)d->buf, d->cap);
    CHECK(!d->skipping || d->len == 0, "skipping with %zu bytes held", d->len);
#ifdef HAVE_ALLOCATED_SIZE
    if (d->buf) {
        size_t sz = __sanitizer_get_allocated_size(d->buf);
        CHECK(sz == d->cap, "allocated %zu bytes, cap says %zu", sz, d->cap);
    }
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t caps[7] = {0, 1, 4, 16, 255, 4096, 65536};
    if (size < 4)
        return 0;
    size_t custom = (size_t)data[1] << 8 | data[2];
    size_t cap = (data[0] & 7) == 7 ? custom : caps[data[0] & 7];
    size_t nsplit = data[3] & 15;
    bool ask = data[3] & 16, drop_some = data[3] & 32, keep0 = data[3] & 64;
    if (size < 4 + nsplit)
        return 0;
    const uint8_t *splits = data + 4;
    const char *s = (const char *)data + 4 + nsplit;
    size_t n = size - 4 - nsplit;
    int any = 0;
    for (size_t i = 0; i < nsplit; i++)
        any |= splits[i];
    if (!any)
        nsplit = 0; /* all zero: one chunk */

    size_t account = 0;
    te_lines d;
    te_lines_init(&d, cap);
    d.ask = ask;
    d.account = &account;
    if (keep0)
        d.keep = 0;
    size_t len;
    CHECK(te_lines_line(&d, &len) == NULL, "fresh decoder has a line");

    size_t sp = 0;                         /* stream bytes consumed by the decoder */
    size_t ls = 0;                         /* start of the current line in the model */
    bool refused = false, dropped = false; /* what happened to it */
    unsigned grows = 0;
    size_t si = 0;
    while (sp < n) {
        size_t want = nsplit ? splits[si++ % nsplit] : n - sp;
        size_t chunk = want < n - sp ? want : n - sp;
        const char *p = s + sp;
        size_t left = chunk;
        do {
            size_t used = (size_t)-1;
            int rc = te_lines_feed(&d, p, left, &used);
            CHECK(used <= left, "consumed %zu of %zu", used, left);
            check_state(&d, cap, account);
            size_t from = sp; /* where this feed started */
            sp += used;
            p += used;
            left -= used;
            const char *nl = memchr(s + ls, '\n', n - ls);
            size_t lend = nl ? (size_t)(nl - s) : n; /* the model's line end */
            /* a refused or dropped line's newline ends it inside the feed,
             * which goes on with the next line */
            while ((refused || dropped) && nl && sp > lend) {
                ls = lend + 1;
                refused = dropped = false;
                nl = memchr(s + ls, '\n', n - ls);
                lend = nl ? (size_t)(nl - s) : n;
            }
            if (from < ls)
                from = ls;
            if (rc == TE_LINES_NEED) {
                CHECK(left == 0, "NEED with %zu bytes unconsumed", left);
                CHECK(sp <= lend, "NEED past the line's newline");
                if (!refused && !dropped)
                    CHECK(d.len == sp - ls, "holds %zu, model %zu", d.len, sp - ls);
                else
                    CHECK(d.len == 0 && d.skipping, "skipping but holds %zu", d.len);
            } else if (rc == TE_LINES_LINE) {
                CHECK(nl && sp == lend + 1, "LINE at %zu, newline at %zu", sp, lend);
                CHECK(!refused && !dropped, "a refused or dropped line came out");
                CHECK(lend - ls <= cap, "line of %zu over cap %zu", lend - ls, cap);
                char *line = te_lines_line(&d, &len);
                CHECK(line != NULL, "LINE but no line");
                CHECK(len == lend - ls && memcmp(line, s + ls, len) == 0, "line differs");
                size_t u2 = (size_t)-1;
                CHECK(te_lines_feed(&d, p, left, &u2) == TE_LINES_LINE && u2 == 0,
                      "feed with a line waiting consumed %zu", u2);
                CHECK(te_lines_finish(&d, &len) == NULL, "finish with a line waiting");
                te_lines_next(&d);
                check_state(&d, cap, account);
                CHECK(te_lines_line(&d, &len) == NULL, "a line after next");
                if (keep0)
                    CHECK(d.buf == NULL, "keep 0 kept %zu bytes", d.cap);
                ls = sp;
                refused = dropped = false;
            } else if (rc == -EMSGSIZE) {
                CHECK(!refused && !dropped, "refused twice or after a drop");
                CHECK(lend - ls > cap, "refused a line of %zu within cap %zu", lend - ls, cap);
                CHECK(sp - ls > cap && from - ls <= cap, "refused late: %zu bytes in, %zu before",
                      sp - ls, from - ls);
                CHECK(sp <= lend, "refusal consumed the newline");
                CHECK(d.buf == NULL && d.len == 0, "refused line still buffered");
                refused = true;
            } else if (rc == TE_LINES_GROW) {
                CHECK(ask, "GROW outside ask mode");
                CHECK(d.want > d.cap && d.want <= cap, "want %zu (buffer %zu, cap %zu)", d.want,
                      d.cap, cap);
                if (drop_some && grows++ % 2) {
                    te_lines_drop(&d);
                    dropped = true;
                } else {
                    CHECK(te_lines_grow(&d) == 0, "grow to %zu failed", d.want);
                    CHECK(d.cap == d.want, "grew to %zu, want %zu", d.cap, d.want);
                }
                check_state(&d, cap, account);
            } else {
                CHECK(0, "unexpected rc %d", rc);
            }
        } while (left);
    }
    CHECK(sp == n, "stream not consumed: %zu of %zu", sp, n);
    char *last = te_lines_finish(&d, &len);
    if (refused || dropped || n == ls) {
        CHECK(last == NULL, "finish gave a refused, dropped or empty line");
    } else {
        CHECK(last != NULL, "finish lost the last line");
        CHECK(len == n - ls && memcmp(last, s + ls, len) == 0, "last line differs");
        te_lines_next(&d);
    }
    te_lines_free(&d);
    CHECK(account == 0 && d.buf == NULL, "free left %zu bytes", account);
    return 0;
}
