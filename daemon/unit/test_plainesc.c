/* Unit tests of a plain tool's stdout escaped as it arrives (plainesc.c):
 * the escaped text is what te_json_dumps() writes however the bytes are
 * cut into chunks (escapes and UTF-8 characters across every boundary);
 * what is not UTF-8, or may be JSON, is kept as the tool wrote it; every
 * mark decodes to its raw offset; and the content cut of a big result
 * reads only near its two ends (bigres.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "bigres.h"
#include "cut.h"
#include "plainesc.h"

/* Well-formed UTF-8 as jansson takes it (no overlong, surrogate, > U+10FFFF). */
static bool utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], k = c < 0x80   ? 1
                               : c < 0xc2 ? 0
                               : c < 0xe0 ? 2
                               : c < 0xf0 ? 3
                               : c < 0xf5 ? 4
                                          : 0;
        if (!k || i + k > n)
            return false;
        unsigned cp = k == 1 ? c : c & (0xff >> (k + 1));
        for (unsigned j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        i += k;
    }
    return true;
}

/* A string's bytes as te_json_dumps() writes them, one at a time. */
static char *ref_escape(const unsigned char *s, size_t n, size_t *out_n)
{
    char *o = malloc(6 * n + 1);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        const char *e = c == '"'    ? "\\\""
                        : c == '\\' ? "\\\\"
                        : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f"
                        : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t"
                                    : NULL;
        if (e)
            w += (size_t)sprintf(o + w, "%s", e);
        else if (c < 0x20)
            w += (size_t)sprintf(o + w, "\\u%04X", c);
        else
            o[w++] = (char)c;
    }
    *out_n = w;
    return o;
}

/* Every byte class: ASCII, each short escape, other controls, DEL, 2-, 3-
 * and 4-byte characters, so that chunks cut inside each. */
static const char TEXT[] = "a \"q\" \\ \b\f\n\r\t\x01\x1f\x7f \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
                           "\x00 end";

/* Not UTF-8, each after good text: a stray continuation, overlong forms, a
 * surrogate, above U+10FFFF, a character cut by the end. */
static const char *const BAD[] = {"\x80",         "\xc0\x80",         "\xe0\x80\x80",
                                  "\xed\xa0\x80", "\xf5\x80\x80\x80", "\xf4\x90\x80\x80",
                                  "\xe2\x82",     "\xf0\x9f\x98",     "\xc3"};

/* s fed in chunks of `chunk` bytes, the first `first` long (0: chunk). */
static void feed(struct td_plain *p, const char *s, size_t n, size_t first, size_t chunk,
                 size_t from)
{
    for (size_t i = 0; i < n;) {
        size_t k = i == 0 && first ? first : chunk;
        if (k > n - i)
            k = n - i;
        assert_int_equal(td_plain_feed(p, s + i, k, from), 0);
        i += k;
    }
}

static void check(const char *s, size_t n, size_t first, size_t chunk, size_t from)
{
    struct td_plain p = {0};
    feed(&p, s, n, first, chunk, from);
    bool esc = td_plain_done(&p);
    assert_int_equal(p.raw, n);
    if (esc) {
        size_t want_n;
        char *want = ref_escape((const unsigned char *)s, n, &want_n);
        assert_int_equal(p.len, want_n);
        assert_memory_equal(p.buf, want, want_n);
        free(want);
    } else {
        assert_int_equal(p.len, n);
        assert_memory_equal(p.buf, s, n);
    }
    td_plain_free(&p);
}

/* Every cut of the text into two chunks, and chunks of 1 to 9 bytes. */
static void test_every_boundary(void **state)
{
    size_t n = sizeof(TEXT) - 1;
    char s[4 * sizeof(TEXT)];
    for (int r = 0; r < 4; r++)
        memcpy(s + r * n, TEXT, n);
    n *= 4;
    for (size_t from = 1; from <= 40; from += 13) {
        for (size_t first = 1; first < n; first++)
            check(s, n, first, n, from);
        for (size_t chunk = 1; chunk < 10; chunk++)
            check(s, n, 0, chunk, from);
    }
    /* it is escaped, with the bytes kept before esc_from too */
    struct td_plain p = {0};
    feed(&p, s, n, 0, 3, 5);
    assert_true(td_plain_done(&p));
    td_plain_free(&p);
}

/* Not UTF-8, anywhere and however cut: the bytes as they came. */
static void test_not_utf8_kept_raw(void **state)
{
    for (size_t b = 0; b < sizeof(BAD) / sizeof(*BAD); b++) {
        for (size_t at = 0; at <= 2; at++) { /* mid-text, and at the end */
            char s[256];
            size_t n = 0, k = strlen(BAD[b]);
            memcpy(s + n, TEXT, sizeof(TEXT) - 1), n += sizeof(TEXT) - 1;
            memcpy(s + n, BAD[b], k), n += k;
            if (at < 2)
                memcpy(s + n, TEXT, sizeof(TEXT) - 1), n += sizeof(TEXT) - 1;
            for (size_t first = 1; first < n; first++) {
                struct td_plain p = {0};
                feed(&p, s, n, first, at ? 2 : 5, 1);
                assert_false(td_plain_done(&p));
                assert_int_equal(p.len, n);
                assert_memory_equal(p.buf, s, n);
                td_plain_free(&p);
            }
        }
    }
}

/* What may be JSON, white space only, or too short for esc_from: raw. */
static void test_kept_raw(void **state)
{
    const char *cases[] = {"  {\"a\": 1}", "\n[1]", "\"s\"", "-1",  "7",
                           "true",         "null",  "   \n", "fals"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        struct td_plain p = {0};
        feed(&p, cases[i], strlen(cases[i]), 0, 2, 1);
        assert_false(td_plain_done(&p));
        assert_memory_equal(p.buf, cases[i], strlen(cases[i]));
        td_plain_free(&p);
    }
    struct td_plain p = {0};
    feed(&p, TEXT, sizeof(TEXT) - 1, 0, 4, 0); /* esc_from 0: never */
    assert_false(td_plain_done(&p));
    td_plain_free(&p);
    feed(&p, TEXT, 10, 0, 4, 11); /* fewer than esc_from */
    assert_false(td_plain_done(&p));
    td_plain_free(&p);
}

static char *big_text(size_t n)
{
    char *s = malloc(n);
    size_t k = sizeof(TEXT) - 1;
    for (size_t i = 0; i < n; i += k)
        memcpy(s + i, TEXT, n - i < k ? n - i : k);
    for (size_t i = n; i > 0 && (s[i - 1] & 0x80); i--)
        s[i - 1] = '.'; /* no character cut by the end */
    assert_true(utf8_valid((unsigned char *)s, n));
    return s;
}

/* Each mark decodes to the raw bytes before it. */
static void test_marks(void **state)
{
    size_t n = 3u << 20;
    char *s = big_text(n);
    struct td_plain p = {0};
    feed(&p, s, n, 0, 4093, 1u << 20);
    assert_true(td_plain_done(&p));
    /* one where escaping began (1 MiB), then about every TD_ESC_MARK_EVERY */
    assert_true(p.nmarks >= (p.len - (2u << 20)) / (2 * TD_ESC_MARK_EVERY));
    char *copy = malloc(p.len);
    for (size_t m = 0; m < p.nmarks; m++) {
        if (m)
            assert_true(p.marks[m].esc > p.marks[m - 1].esc && p.marks[m].raw > p.marks[m - 1].raw);
        memcpy(copy, p.buf, p.marks[m].esc);
        assert_int_equal(td_unescape(copy, p.marks[m].esc), p.marks[m].raw);
        assert_memory_equal(copy, s, p.marks[m].raw);
    }
    free(copy);
    td_plain_free(&p);
    free(s);
}

/* The content cut of a big escaped text reads its two ends only: the pages
 * between them are made unreadable (decoding from the start, as before the
 * marks, dies there). The cut is td_cut()'s of the text. */
static void test_cut_reads_only_its_ends(void **state)
{
    size_t n = 8u << 20, limit = 100000, page = (size_t)sysconf(_SC_PAGESIZE);
    char *s = big_text(n);
    s[n - 1] = '\n'; /* dropped from the result */
    struct td_plain p = {0};
    feed(&p, s, n, 0, 65536, TD_BIG_MIN);
    assert_true(td_plain_done(&p));
    char *buf = p.buf;
    size_t esc_n = p.len;
    struct td_big *big = NULL;
    json_t *res = td_plain_result(&p, &big);
    assert_non_null(res);
    assert_non_null(big);
    uintptr_t lo = ((uintptr_t)buf + (1u << 20)) & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)buf + esc_n - (1u << 20)) & ~(uintptr_t)(page - 1);
    assert_int_equal(mprotect((void *)lo, hi - lo, PROT_NONE), 0);
    json_t *trunc = NULL;
    char *full = NULL;
    size_t full_len = 0;
    json_t *content = td_content_make(res, limit, false, &trunc, &full, &full_len);
    assert_int_equal(mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE), 0);
    assert_non_null(content);
    assert_non_null(trunc);
    char *want = malloc(n);
    memcpy(want, s, n - 1);
    want[n - 1] = '\0';
    size_t want_n = n - 1, kept;
    assert_true(td_cut(&want, &want_n, limit, &kept));
    assert_int_equal(json_string_length(content), want_n);
    assert_memory_equal(json_string_value(content), want, want_n);
    free(want);
    json_decref(content);
    json_decref(trunc);
    json_decref(res);
    td_big_unref(big);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_boundary),
        cmocka_unit_test(test_not_utf8_kept_raw),
        cmocka_unit_test(test_kept_raw),
        cmocka_unit_test(test_marks),
        cmocka_unit_test(test_cut_reads_only_its_ends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
