/* Unit tests of a call's denial list (denials.c): distinct entries kept up
 * to the cap, the rest counted, and the event fields built from them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "denials.h"

static void test_nothing_denied_adds_no_fields(void **state)
{
    (void)state;
    struct td_denials d = {0};
    assert_null(td_denials_fields(&d));
    assert_null(td_denials_fields(NULL));
}

static void test_entries_and_repeats(void **state)
{
    (void)state;
    struct td_denials d = {0};
    td_denials_syscall(&d, "ptrace");
    td_denials_syscall(&d, "ptrace");
    td_denials_network(&d, "evil.example", 443);
    json_t *f = td_denials_fields(&d);
    json_t *want = json_loads("{\"denied\":[{\"kind\":\"syscall\",\"name\":\"ptrace\"},"
                              "{\"kind\":\"network\",\"host\":\"evil.example\",\"port\":443}]}",
                              0, NULL);
    assert_non_null(want);
    assert_true(json_equal(f, want));
    json_decref(f);
    json_decref(want);
    td_denials_clear(&d);
    assert_null(td_denials_fields(&d));
}

static void test_cap_and_count_of_the_rest(void **state)
{
    (void)state;
    struct td_denials d = {0};
    char host[32];
    for (int i = 0; i < TD_DENIALS_MAX + 5; i++) {
        snprintf(host, sizeof(host), "h%d.example", i);
        td_denials_network(&d, host, 443);
    }
    td_denials_network(&d, "h0.example", 443); /* kept already: not counted */
    json_t *f = td_denials_fields(&d);
    assert_int_equal(json_array_size(json_object_get(f, "denied")), TD_DENIALS_MAX);
    assert_int_equal(json_integer_value(json_object_get(f, "denied_more")), 5);
    json_decref(f);
    td_denials_clear(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_denied_adds_no_fields),
        cmocka_unit_test(test_entries_and_repeats),
        cmocka_unit_test(test_cap_and_count_of_the_rest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
