/*
 * fuzz_audit - `toolexec audit verify`'s check of each line
 * (daemon/cli/auditverify.c) on mutated audit files.
 *
 * Input layout:
 *   [0]    which line the tamper step changes
 *   [1]    which byte of it
 *   rest   an audit file: lines split at each newline, the last one
 *          possibly without its newline
 *
 * Invariants: every line is counted once as a record and each yields at
 * most three problems (its link, a chain_break record, a missing newline);
 * the JSON objects of the input chained again as the daemon writes them
 * (compact, "prev_sha256" the SHA-256 of the line before, chain_break
 * records left out) verify with no problem; one byte changed in any line
 * but the last of that chain is reported.
 */
#include <stdint.h>
#include <string.h>

#include "auditverify.h"
#include "fuzz_common.h"
#include "toolexec.h"

#define MAX_LINES 256

struct line {
    char *p;
    size_t len;
    bool ended;
};

static FILE *sink(void)
{
    static FILE *null;
    if (!null)
        null = fopen("/dev/null", "w");
    return null;
}

static unsigned long verify(const struct line *l, size_t n, unsigned long *records)
{
    struct auditverify v;
    auditverify_init(&v, sink());
    for (size_t i = 0; i < n; i++)
        auditverify_line(&v, "fuzz", i + 1, l[i].p, l[i].len, l[i].ended);
    *records = v.records;
    return v.breaks;
}

/* The input's JSON objects as a fresh, intact chain; their count. */
static size_t rechain(const struct line *in, size_t n, struct line *out)
{
    char prev[TE_SHA256_HEX_LEN + 1] =
        "0000000000000000000000000000000000000000000000000000000000000000";
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        json_error_t err;
        json_t *o = te_json_loadb(in[i].p, in[i].len, 0, &err);
        const char *kind = json_string_value(json_object_get(o, "record"));
        if (!json_is_object(o) || (kind && strcmp(kind, "chain_break") == 0)) {
            json_decref(o);
            continue;
        }
        json_object_set_new(o, "prev_sha256", json_string(prev));
        size_t len = 0;
        char *text = te_json_dumps(o, 0, &len);
        json_decref(o);
        if (!text)
            continue;
        CHECK(!memchr(text, '\n', len), "a dumped record holds a newline: %s", text);
        te_sha256_hex(text, len, prev);
        out[m++] = (struct line){text, len, true};
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t which = data[0], at = data[1];
    char *file = malloc(size - 2 + 1);
    if (!file)
        return 0;
    memcpy(file, data + 2, size - 2);
    size_t len = size - 2;
    struct line lines[MAX_LINES];
    size_t n = 0;
    for (size_t start = 0; start < len && n < MAX_LINES;) {
        char *nl = memchr(file + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - file) : len;
        lines[n++] = (struct line){file + start, end - start, nl != NULL};
        start = end + 1;
    }

    unsigned long records;
    unsigned long breaks = verify(lines, n, &records);
    CHECK(records == n, "%lu records for %zu lines", records, n);
    CHECK(breaks <= 3 * n, "%lu problems in %zu lines", breaks, n);

    struct line chain[MAX_LINES];
    size_t m = rechain(lines, n, chain);
    breaks = verify(chain, m, &records);
    CHECK(records == m && breaks == 0, "a fresh chain of %zu records: %lu problems", m, breaks);

    if (m >= 2) {
        struct line *l = &chain[which % (m - 1)];
        if (l->len) {
            size_t i = at % l->len;
            char was = l->p[i];
            l->p[i] = (char)(was ^ 1) == '\n' ? 'x' : (char)(was ^ 1);
            breaks = verify(chain, m, &records);
            CHECK(breaks >= 1, "a byte of line %zu of %zu changed, no problem reported",
                  (size_t)(l - chain) + 1, m);
        }
    }
    for (size_t i = 0; i < m; i++)
        free(chain[i].p);
    free(file);
    return 0;
}
