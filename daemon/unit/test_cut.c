/* Unit tests of content cutting (cut.c): the cut never splits a UTF-8
 * character, keeps head and tail, and says what it left out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cut.h"

/* Well-formed UTF-8 (RFC 3629: no overlongs, surrogates or > U+10FFFF). */
static bool utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = c < 0x80             ? 1
                   : (c & 0xe0) == 0xc0 ? 2
                   : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4
                                        : 0;
        if (!k || i + k > n || c == 0xc0 || c == 0xc1 || c > 0xf4)
            return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
        i += k;
    }
    return true;
}

static char *repeat(const char *unit, size_t times, size_t *len)
{
    size_t u = strlen(unit);
    char *s = malloc(u * times + 1);
    for (size_t i = 0; i < times; i++)
        memcpy(s + i * u, unit, u);
    s[u * times] = '\0';
    *len = u * times;
    return s;
}

static void test_limit(void **state)
{
    assert_int_equal(td_cut_limit(0, 0, 4096), 4096);    /* the default */
    assert_int_equal(td_cut_limit(100, 0, 4096), 100);   /* the batch's */
    assert_int_equal(td_cut_limit(100, 50, 4096), 50);   /* the tool's, lower */
    assert_int_equal(td_cut_limit(100, 200, 4096), 100); /* the tool's, higher: not raised */
    assert_int_equal(td_cut_limit(0, 50, 4096), 50);
}

static void test_ascii_head_tail_marker(void **state)
{
    size_t len = 1000, kept = 0;
    char *orig = malloc(len + 1), *text;
    for (size_t i = 0; i < len; i++)
        orig[i] = (char)('a' + i % 26);
    orig[len] = '\0';
    text = strdup(orig);
    assert_true(td_cut(&text, &len, 300, &kept));
    assert_true(len <= 300);
    const char *m = strstr(text, "\n\n[... toolexecd omitted ");
    assert_non_null(m);
    size_t head = (size_t)(m - text);
    unsigned long omitted, total;
    assert_int_equal(
        sscanf(m, "\n\n[... toolexecd omitted %lu of %lu bytes here;", &omitted, &total), 2);
    assert_int_equal(total, 1000);
    assert_int_equal(omitted + kept, 1000);
    const char *end = strstr(m, "narrower result ...]\n\n");
    assert_non_null(end);
    end += strlen("narrower result ...]\n\n");
    size_t tail = len - (size_t)(end - text);
    assert_int_equal(head + tail, kept);
    assert_memory_equal(text, orig, head);              /* the head */
    assert_memory_equal(end, orig + 1000 - tail, tail); /* the tail */
    assert_true(head > 0 && tail > 0 && (head > tail ? head - tail : tail - head) <= 1);
    assert_int_equal(text[len], '\0');
    free(text);
    free(orig);
}

/* Two-, three- and four-byte characters, at every cut position: what is
 * kept is whole characters, within the limit. */
static void test_multibyte_at_cut(void **state)
{
    const char *units[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                           "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"};
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        size_t ulen = strlen(units[u]);
        for (size_t limit = 1; limit < 101 * ulen; limit++) { /* cut only what is longer */
            size_t len, kept;
            char *text = repeat(units[u], 101, &len);
            size_t orig = len;
            assert_true(td_cut(&text, &len, limit, &kept));
            assert_true(len <= limit);
            assert_true(kept <= orig);
            assert_true(utf8_valid((const unsigned char *)text, len));
            free(text);
        }
    }
}

/* A limit too small for the marker keeps bytes only: the exact results;
 * the euro sign is kept whole or not at all. */
static void test_small_limit_exact(void **state)
{
    static const struct {
        size_t limit;
        const char *out;
    } cases[] = {{3, "xy!"}, {4, "xxy!"}, {5, "xxyy!"}, {6, "xxyy!"}, {7, "xxyy!"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = strdup("xx\xe2\x82\xacyy!"); /* 8 bytes: the euro sign is 3 */
        size_t len = 8, kept;
        assert_true(td_cut(&text, &len, cases[i].limit, &kept));
        assert_int_equal(len, strlen(cases[i].out));
        assert_memory_equal(text, cases[i].out, len);
        assert_int_equal(kept, len);
        free(text);
    }
}

/* Bytes that are all continuation bytes (invalid UTF-8): no boundary to cut
 * at, so nothing of them is kept; the marker says so. */
static void test_invalid_bytes(void **state)
{
    size_t len, kept;
    char *text = repeat("\x80", 1000, &len);
    assert_true(td_cut(&text, &len, 300, &kept));
    assert_int_equal(kept, 0);
    const char *want = "\n\n[... toolexecd omitted 1000 of 1000 bytes here; ask for a narrower "
                       "result ...]\n\n";
    assert_int_equal(len, strlen(want));
    assert_string_equal(text, want);
    free(text);
    /* lone lead bytes are not continuations: cut as any byte */
    text = repeat("\xff", 1000, &len);
    assert_true(td_cut(&text, &len, 300, &kept));
    assert_true(kept > 0 && len <= 300);
    free(text);
}

/* Content with NUL bytes is cut by length, not at the first NUL. */
static void test_nul_bytes(void **state)
{
    size_t len = 500, kept;
    char *text = calloc(1, len + 1);
    text[499] = 'Z';
    assert_true(td_cut(&text, &len, 200, &kept));
    assert_true(len <= 200 && len > 150);
    assert_int_equal(text[len - 1], 'Z');
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_ascii_head_tail_marker),
        cmocka_unit_test(test_multibyte_at_cut),
        cmocka_unit_test(test_small_limit_exact),
        cmocka_unit_test(test_invalid_bytes),
        cmocka_unit_test(test_nul_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
