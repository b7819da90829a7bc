/* Unit tests of the JSON-lines decoder: lines in every split, the length cap
 * (refused at the byte that passes it, the rest of the line skipped), the
 * caller-driven growth and shared budget the daemon uses, the last line
 * without a newline. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "toolexec.h"

/* Feed s in chunks of k bytes; lines joined by '|', a refused line as "!". */
static void collect(te_lines *d, const char *s, size_t n, size_t k, char *out, size_t outlen)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t at = 0; at < n;) {
        size_t chunk = n - at < k ? n - at : k;
        const char *p = s + at;
        at += chunk;
        while (chunk) {
            size_t used;
            int rc = te_lines_feed(d, p, chunk, &used);
            CHECK(used <= chunk);
            p += used;
            chunk -= used;
            if (rc == TE_LINES_LINE) {
                size_t len;
                char *line = te_lines_line(d, &len);
                CHECK(line != NULL);
                o += (size_t)snprintf(out + o, outlen - o, "%.*s|", (int)len, line);
                te_lines_next(d);
            } else if (rc == -EMSGSIZE) {
                o += (size_t)snprintf(out + o, outlen - o, "!|");
            } else {
                CHECK(rc == TE_LINES_NEED);
                CHECK(chunk == 0);
            }
        }
    }
    size_t len;
    char *last = te_lines_finish(d, &len);
    if (last) {
        snprintf(out + o, outlen - o, "%.*s$", (int)len, last);
        te_lines_next(d);
    }
}

static void every_split(void)
{
    const char *s = "{\"op\":\"run\"}\n\n{\"a\":1}\nxyz\nlast";
    size_t n = strlen(s);
    for (size_t k = 1; k <= n; k++) {
        te_lines d;
        te_lines_init(&d, 64);
        char out[256];
        collect(&d, s, n, k, out, sizeof(out));
        CHECK_STR(out, "{\"op\":\"run\"}||{\"a\":1}|xyz|last$");
        te_lines_free(&d);
    }
}

static void cap(void)
{
    /* max bytes pass, max + 1 are refused, the refused line's rest is skipped
     * and the next line is whole */
    const char *s = "12345678\n123456789abc\nok\n";
    size_t n = strlen(s);
    for (size_t k = 1; k <= n; k++) {
        te_lines d;
        te_lines_init(&d, 8);
        char out[128];
        collect(&d, s, n, k, out, sizeof(out));
        CHECK_STR(out, "12345678|!|ok|");
        te_lines_free(&d);
    }
    /* refused at the byte that passes the cap, buffer freed at once */
    te_lines d;
    te_lines_init(&d, 8);
    size_t used;
    CHECK(te_lines_feed(&d, "12345678", 8, &used) == TE_LINES_NEED && used == 8);
    CHECK(d.buf != NULL && d.len == 8);
    CHECK(te_lines_feed(&d, "9", 1, &used) == -EMSGSIZE && used == 1);
    CHECK(d.buf == NULL && d.cap == 0 && d.len == 0 && d.skipping);
    CHECK(te_lines_feed(&d, "more", 4, &used) == TE_LINES_NEED && used == 4);
    CHECK(d.buf == NULL);
    /* a refused line is not a last line */
    size_t len;
    CHECK(te_lines_finish(&d, &len) == NULL);
    te_lines_free(&d);
    /* cap 0: only empty lines */
    te_lines_init(&d, 0);
    char out[64];
    collect(&d, "\n\nx\n\n", 5, 5, out, sizeof(out));
    CHECK_STR(out, "||!||");
    te_lines_free(&d);
}

static void done_state(void)
{
    te_lines d;
    te_lines_init(&d, 100);
    size_t used, len;
    CHECK(te_lines_line(&d, &len) == NULL);
    CHECK(te_lines_feed(&d, "a\nb\n", 4, &used) == TE_LINES_LINE && used == 2);
    /* not taken yet: feeding again consumes nothing */
    CHECK(te_lines_feed(&d, "b\n", 2, &used) == TE_LINES_LINE && used == 0);
    char *line = te_lines_line(&d, &len);
    CHECK(line && len == 1 && line[0] == 'a');
    CHECK(te_lines_finish(&d, &len) == NULL); /* a whole line is waiting */
    te_lines_next(&d);
    CHECK(te_lines_feed(&d, "b\n", 2, &used) == TE_LINES_LINE && used == 2);
    te_lines_next(&d);
    /* an empty line still gives a pointer */
    CHECK(te_lines_feed(&d, "\n", 1, &used) == TE_LINES_LINE && used == 1);
    line = te_lines_line(&d, &len);
    CHECK(line != NULL && len == 0);
    te_lines_next(&d);
    CHECK(te_lines_finish(&d, &len) == NULL); /* nothing left */
    te_lines_free(&d);
}

/* The daemon's way: growth asked for, a budget shared by decoders. */
static void ask_and_account(void)
{
    size_t budget = 0;
    te_lines a, b;
    te_lines_init(&a, 100000);
    te_lines_init(&b, 100000);
    a.ask = b.ask = true;
    a.account = b.account = &budget;
    a.keep = b.keep = 8192;
    static char big[20000];
    memset(big, 'x', sizeof(big));
    size_t used;
    /* first growth: 4096 */
    CHECK(te_lines_feed(&a, big, 10, &used) == TE_LINES_GROW && used == 0 && a.want == 4096);
    CHECK(a.buf == NULL && budget == 0);
    CHECK(te_lines_grow(&a) == 0 && a.cap == 4096 && budget == 4096);
    CHECK(te_lines_feed(&a, big, 10, &used) == TE_LINES_NEED && used == 10);
    /* doubling to hold what came: 10 + 20000 -> 32768 */
    CHECK(te_lines_feed(&a, big, sizeof(big), &used) == TE_LINES_GROW && used == 0);
    CHECK(a.want == 32768);
    CHECK(te_lines_grow(&a) == 0 && budget == 32768);
    CHECK(te_lines_feed(&a, big, sizeof(big), &used) == TE_LINES_NEED && a.len == 20010);
    /* b grows, then is dropped by the caller (the budget's loser) */
    CHECK(te_lines_feed(&b, big, 5000, &used) == TE_LINES_GROW && b.want == 8192);
    CHECK(te_lines_grow(&b) == 0 && budget == 32768 + 8192);
    CHECK(te_lines_feed(&b, big, 5000, &used) == TE_LINES_NEED);
    te_lines_drop(&b);
    CHECK(budget == 32768 && b.buf == NULL);
    CHECK(te_lines_feed(&b, "yy\nzz\n", 6, &used) == TE_LINES_GROW && used == 3);
    CHECK(te_lines_grow(&b) == 0);
    CHECK(te_lines_feed(&b, "zz\n", 3, &used) == TE_LINES_LINE && used == 3);
    size_t len;
    char *line = te_lines_line(&b, &len);
    CHECK(len == 2 && memcmp(line, "zz", 2) == 0);
    te_lines_next(&b);
    CHECK(budget == 32768 + 4096);
    /* a's line ends: its buffer is over keep and goes, b's (4096) stays */
    CHECK(te_lines_feed(&a, "\n", 1, &used) == TE_LINES_LINE);
    te_lines_line(&a, &len);
    CHECK(len == 20010);
    te_lines_next(&a);
    CHECK(a.buf == NULL && budget == 4096);
    /* growth stops at the cap */
    te_lines c;
    te_lines_init(&c, 5000);
    c.ask = true;
    CHECK(te_lines_feed(&c, big, 4500, &used) == TE_LINES_GROW && c.want == 5000);
    CHECK(te_lines_grow(&c) == 0);
    CHECK(te_lines_feed(&c, big, 4500, &used) == TE_LINES_NEED);
    CHECK(te_lines_feed(&c, big, 501, &used) == -EMSGSIZE && used == 501);
    te_lines_free(&c);
    te_lines_free(&a);
    te_lines_free(&b);
    CHECK(budget == 0);
}

/* te_lines_dump: compact JSON, one newline, no NUL counted; the decoder
 * reads back the same value. */
static void dump_round_trip(void)
{
    json_t *v = json_pack("{s:s,s:[i,i]}", "event", "a\nb", "n", 1, 2);
    size_t len, used;
    char *s = te_lines_dump(v, &len);
    const char want[] = "{\"event\":\"a\\nb\",\"n\":[1,2]}\n";
    CHECK(s && len == sizeof(want) - 1 && memcmp(s, want, len) == 0);
    te_lines d;
    te_lines_init(&d, 1024);
    CHECK(te_lines_feed(&d, s, len, &used) == TE_LINES_LINE && used == len);
    size_t n;
    char *line = te_lines_line(&d, &n);
    json_t *back = json_loadb(line, n, 0, NULL);
    CHECK(back && json_equal(back, v));
    json_decref(back);
    te_lines_free(&d);
    free(s);
    json_decref(v);
}

int main(void)
{
    dump_round_trip();
    every_split();
    cap();
    done_state();
    ask_and_account();
    CHECK_DONE();
}
