/* Unit tests of a call's denial list (denials.c): distinct entries kept up
 * to the cap, the rest counted, and the event fields built from them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

static void test_socket_named_by_family(void **state)
{
    (void)state;
    struct td_denials d = {0};
    char name[48] = "";
    td_denials_socket(&d, AF_PACKET, name, sizeof(name));
    assert_string_equal(name, "socket(AF_PACKET)");
    name[0] = '\0';
    td_denials_socket(&d, AF_PACKET, name, sizeof(name)); /* seen: not again */
    assert_string_equal(name, "");
    td_denials_socket(&d, AF_NETLINK, NULL, 0);
    td_denials_socket(&d, 99, NULL, 0);               /* no name: its number */
    td_denials_socket(&d, (1ull << 40) | 2, NULL, 0); /* high garbage: as it came */
    json_t *f = td_denials_fields(&d);
    char *got = json_dumps(json_object_get(f, "denied"), JSON_COMPACT);
    assert_string_equal(got, "[{\"kind\":\"syscall\",\"name\":\"socket(AF_PACKET)\"},"
                             "{\"kind\":\"syscall\",\"name\":\"socket(AF_NETLINK)\"},"
                             "{\"kind\":\"syscall\",\"name\":\"socket(99)\"},"
                             "{\"kind\":\"syscall\",\"name\":\"socket(1099511627778)\"}]");
    free(got);
    json_decref(f);
    td_denials_clear(&d);
    td_denials_socket(&d, AF_PACKET, NULL, 0); /* cleared: noted again */
    assert_int_equal(json_array_size(d.list), 1);
    td_denials_clear(&d);
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

static void test_filesystem_entries_and_their_count(void **state)
{
    (void)state;
    struct td_denials d = {0};
    td_denials_filesystem(&d, "/root/.bashrc", "read", "hidden by the view");
    td_denials_filesystem(&d, "/root/.bashrc", "read", "hidden by the view"); /* a repeat */
    td_denials_filesystem(&d, "/usr/x", "create", "read-only in the view");
    d.fs_count = 100002; /* fswatch.c's count: listed or not */
    json_t *f = td_denials_fields(&d);
    char *got = json_dumps(f, JSON_COMPACT);
    assert_string_equal(got, "{\"denied\":[{\"kind\":\"filesystem\",\"path\":\"/root/.bashrc\","
                             "\"access\":\"read\",\"rule\":\"hidden by the view\"},"
                             "{\"kind\":\"filesystem\",\"path\":\"/usr/x\",\"access\":"
                             "\"create\",\"rule\":\"read-only in the view\"}],"
                             "\"denied_filesystem\":100002}");
    free(got);
    json_decref(f);
    td_denials_clear(&d);
    assert_int_equal(d.fs_count, 0);
    assert_null(td_denials_fields(&d));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_denied_adds_no_fields),
        cmocka_unit_test(test_entries_and_repeats),
        cmocka_unit_test(test_socket_named_by_family),
        cmocka_unit_test(test_cap_and_count_of_the_rest),
        cmocka_unit_test(test_filesystem_entries_and_their_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
