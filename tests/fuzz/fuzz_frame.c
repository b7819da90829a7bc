/*
 * fuzz_frame - the frame decoder against a trivial whole-buffer model.
 *
 * Input layout:
 *   [0]       cap selector, low 3 bits: 0 1 4 16 255 4096 65536, 7 = custom
 *             cap from [1..2]; 6 with [1..2] = ffff: TE_FRAME_MAX_DEFAULT
 *   [1..2]    custom cap, big-endian (0..65535)
 *   [3]       flags: low 4 bits = number of split sizes k; bit 4 = feed
 *             again after a completed frame before taking it
 *   [4..4+k)  chunk sizes, used in turn (a 0 feeds an empty buffer)
 *   rest      the byte stream given to the decoder
 *
 * Invariants: consumed <= len; NEED consumes everything; every frame equals
 * the model's (announced length, same bytes, NUL-terminated); -EMSGSIZE
 * exactly when the model's header announces more than the cap, with d->len
 * the announced length and nothing buffered; the body buffer is never larger
 * than cap + 1 bytes; te_frame_pending() counts the unfinished frame's bytes.
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

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void check_state(const te_frame_decoder *d, uint32_t cap)
{
    CHECK(d->max == cap, "max %u changed (cap %u)", d->max, cap);
    CHECK(d->hdr_have <= TE_FRAME_HEADER_LEN, "hdr_have %zu", d->hdr_have);
    if (d->body) {
        CHECK(d->hdr_have == TE_FRAME_HEADER_LEN, "body without a whole header");
        CHECK(d->len <= cap, "body allocated for len %u over cap %u", d->len, cap);
        CHECK(d->have <= d->len, "have %zu > len %u", d->have, d->len);
#ifdef HAVE_ALLOCATED_SIZE
        size_t sz = __sanitizer_get_allocated_size(d->body);
        CHECK(sz <= (size_t)cap + 1, "allocated %zu bytes, cap %u", sz, cap);
        CHECK(sz >= (size_t)d->len + 1, "allocated %zu bytes for len %u", sz, d->len);
#endif
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t caps[7] = {0, 1, 4, 16, 255, 4096, 65536};
    if (size < 4)
        return 0;
    uint32_t custom = (uint32_t)data[1] << 8 | data[2];
    uint32_t cap = (data[0] & 7) == 7 ? custom : caps[data[0] & 7];
    /* The daemon's default cap only on request: a 16 MiB body buffer under
     * ASan costs more than the rest of a run. */
    if ((data[0] & 7) == 6 && custom == 0xffff)
        cap = TE_FRAME_MAX_DEFAULT;
    size_t nsplit = data[3] & 15;
    int feed_again = data[3] & 16;
    if (size < 4 + nsplit)
        return 0;
    const uint8_t *splits = data + 4;
    const uint8_t *s = data + 4 + nsplit;
    size_t n = size - 4 - nsplit;
    int any = 0;
    for (size_t i = 0; i < nsplit; i++)
        any |= splits[i];
    if (!any)
        nsplit = 0; /* all zero: one chunk */

    te_frame_decoder d;
    te_frame_decoder_init(&d, cap);
    CHECK(te_frame_pending(&d) == 0, "fresh decoder has pending bytes");
    CHECK(te_frame_take(&d, NULL) == NULL, "fresh decoder has a frame");

    size_t sp = 0; /* stream bytes consumed by the decoder */
    size_t mp = 0; /* start of the current frame in the model */
    size_t si = 0; /* next split size */
    int stop = 0;
    while (!stop && sp < n) {
        size_t want = nsplit ? splits[si++ % nsplit] : n - sp;
        size_t chunk = want < n - sp ? want : n - sp;
        const uint8_t *p = s + sp;
        size_t left = chunk;
        do {
            size_t used = (size_t)-1;
            int rc = te_frame_feed(&d, p, left, &used);
            CHECK(used <= left, "consumed %zu of %zu", used, left);
            check_state(&d, cap);
            sp += used;
            p += used;
            left -= used;
            if (rc == TE_FRAME_NEED) {
                CHECK(left == 0, "NEED with %zu bytes unconsumed", left);
                CHECK(!d.done, "NEED but done");
                CHECK(te_frame_pending(&d) == sp - mp, "pending %zu, model %zu",
                      te_frame_pending(&d), sp - mp);
                if (sp - mp >= TE_FRAME_HEADER_LEN) {
                    uint32_t ann = be32(s + mp);
                    CHECK(ann <= cap, "NEED for announced %u over cap %u", ann, cap);
                    CHECK(sp - mp < TE_FRAME_HEADER_LEN + (size_t)ann, "NEED on a whole frame");
                }
                CHECK(te_frame_take(&d, NULL) == NULL, "take succeeded while NEED");
            } else if (rc == TE_FRAME_DONE) {
                CHECK(sp - mp >= TE_FRAME_HEADER_LEN, "DONE without a header");
                uint32_t ann = be32(s + mp);
                CHECK(ann <= cap, "DONE for announced %u over cap %u", ann, cap);
                CHECK(sp - mp == TE_FRAME_HEADER_LEN + (size_t)ann,
                      "DONE after %zu bytes for a frame of %u", sp - mp, ann);
                CHECK(d.done, "DONE but !done");
                CHECK(te_frame_pending(&d) == sp - mp, "pending %zu at DONE, frame %zu",
                      te_frame_pending(&d), sp - mp);
                if (feed_again) {
                    size_t u2 = (size_t)-1;
                    int rc2 = te_frame_feed(&d, p, left, &u2);
                    CHECK(rc2 == TE_FRAME_DONE && u2 == 0, "feed on a done decoder: rc %d used %zu",
                          rc2, u2);
                }
                size_t blen = (size_t)-1;
                char *body = te_frame_take(&d, &blen);
                CHECK(body != NULL, "DONE but take gave NULL");
                CHECK(blen == ann, "body length %zu, announced %u", blen, ann);
                CHECK(memcmp(body, s + mp + TE_FRAME_HEADER_LEN, blen) == 0, "body bytes differ");
                CHECK(body[blen] == '\0', "body not NUL-terminated");
                uint8_t hdr[TE_FRAME_HEADER_LEN];
                te_frame_header((uint32_t)blen, hdr);
                CHECK(memcmp(hdr, s + mp, TE_FRAME_HEADER_LEN) == 0, "header does not round-trip");
                free(body);
                CHECK(te_frame_pending(&d) == 0, "pending after take");
                CHECK(te_frame_take(&d, NULL) == NULL, "second take gave a frame");
                check_state(&d, cap);
                mp = sp;
            } else if (rc == -EMSGSIZE) {
                CHECK(sp - mp == TE_FRAME_HEADER_LEN, "EMSGSIZE after %zu bytes", sp - mp);
                uint32_t ann = be32(s + mp);
                CHECK(ann > cap, "EMSGSIZE for %u within cap %u", ann, cap);
                CHECK(d.len == ann, "d.len %u, announced %u", d.len, ann);
                CHECK(d.body == NULL, "body buffered for an oversized frame");
                stop = 1; /* the daemon gives up on the worker here */
            } else {
                CHECK(0, "unexpected rc %d", rc);
            }
        } while (!stop && left);
    }
    if (!stop) {
        size_t used = (size_t)-1;
        int rc = te_frame_feed(&d, s + n, 0, &used);
        CHECK(rc == TE_FRAME_NEED && used == 0, "empty feed at the end: rc %d used %zu", rc, used);
        CHECK(sp == n, "stream not consumed: %zu of %zu", sp, n);
        CHECK(te_frame_pending(&d) == n - mp, "final pending %zu, model %zu", te_frame_pending(&d),
              n - mp);
    }
    te_frame_decoder_free(&d);
    CHECK(te_frame_pending(&d) == 0, "pending after free");
    return 0;
}
