/*
 * fuzz_mcp_sse - the bridge's reading of a Streamable HTTP server's SSE
 * stream (daemon/mcpbridge/bridge_sse.c) on arbitrary bytes: the input is
 * a stream cut into chunks as libcurl would hand them over (each chunk's
 * first byte its length), fed and parsed chunk by chunk, then ended.
 * Invariants: every message queued is a JSON object; what is kept unparsed
 * holds no line end; the messages (and whether it failed) are those of the
 * same stream fed whole, so the cuts never change what is read.
 */
#include <stdint.h>
#include <string.h>

#include "bridge_sse.h"
#include "fuzz_common.h"

/* the stream fed in the given pieces: the messages, or NULL when refused */
static json_t *read_stream(const uint8_t *data, size_t size, int whole)
{
    struct bridge_sse s = {0};
    json_t *q = json_array();
    char why[400];
    int failed = 0;
    size_t at = 0;
    while (at < size && !failed) {
        size_t n = whole ? size - at : 1 + (size_t)data[at];
        if (!whole)
            at++; /* the length byte is not the stream's */
        if (n > size - at)
            n = size - at;
        CHECK(bridge_sse_keep(&s, (const char *)data + at, n), "keep refused %zu bytes", n);
        failed = bridge_sse_feed(&s, q, why, sizeof(why)) < 0;
        CHECK(failed || !memchr(s.buf, '\n', s.len), "a whole line left unparsed");
        at += n;
    }
    if (!failed)
        failed = bridge_sse_end(&s, q, why, sizeof(why)) < 0;
    size_t i;
    json_t *m;
    json_array_foreach(q, i, m) CHECK(json_is_object(m), "message %zu not an object", i);
    CHECK(!failed || why[0], "refused without a reason");
    bridge_sse_free(&s);
    if (failed) {
        json_decref(q);
        return NULL;
    }
    return q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *cut = read_stream(data, size, 0);
    /* the same bytes without the length bytes, whole */
    uint8_t *plain = malloc(size + 1);
    size_t n = 0;
    for (size_t at = 0; at < size;) {
        size_t k = 1 + (size_t)data[at++];
        if (k > size - at)
            k = size - at;
        memcpy(plain + n, data + at, k);
        n += k;
        at += k;
    }
    json_t *whole = read_stream(plain, n, 1);
    CHECK((cut == NULL) == (whole == NULL), "cut %s, whole %s", cut ? "read" : "refused",
          whole ? "read" : "refused");
    CHECK(!cut || json_equal(cut, whole), "the cuts changed the messages");
    json_decref(cut);
    json_decref(whole);
    free(plain);
    return 0;
}
