/* Unit tests of the system-call filters (sysfilter.c): a tool's keys,
 * refused with the file and key named, and which filter a call gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sysfilter.h"

static int parse(const char *def, struct td_sysfilter_conf **c, char *err, size_t len)
{
    json_t *j = json_loads(def, 0, NULL);
    assert_non_null(j);
    int rc = td_sysfilter_parse("t.json", j, c, err, len);
    json_decref(j);
    return rc;
}

static void test_refusals_name_file_and_key(void **state)
{
    (void)state;
    struct td_sysfilter_conf *c;
    char err[256];
    assert_int_equal(parse("{\"syscalls\": \"strict\"}", &c, err, sizeof(err)), -22);
    assert_string_equal(err, "t.json: syscalls: expected \"default\" or \"off\"");
    assert_int_equal(parse("{\"syscalls\": 1}", &c, err, sizeof(err)), -22);
    assert_int_equal(parse("{\"deny_syscalls\": \"ptrace\"}", &c, err, sizeof(err)), -22);
    assert_string_equal(err, "t.json: deny_syscalls: expected an array of system call names");
    assert_int_equal(parse("{\"deny_syscalls\": [\"ptrace\", \"ptarce\"]}", &c, err, sizeof(err)),
                     -22);
    assert_string_equal(err, "t.json: deny_syscalls[1]: unknown system call \"ptarce\"");
    assert_int_equal(parse("{\"deny_syscalls\": [7]}", &c, err, sizeof(err)), -22);
    assert_string_equal(err, "t.json: deny_syscalls[0]: expected a system call name");
    assert_null(c);
}

static void test_which_filter_a_call_gets(void **state)
{
    (void)state;
    assert_int_equal(td_sysfilter_setup(), 0);
    struct td_sysfilter_conf *c;
    char err[256];
    /* neither key, or "default" alone: the common filters */
    assert_int_equal(parse("{}", &c, err, sizeof(err)), 0);
    assert_null(c);
    assert_int_equal(
        parse("{\"syscalls\": \"default\", \"deny_syscalls\": []}", &c, err, sizeof(err)), 0);
    assert_null(c);
    const struct td_sysfilter *on = td_sysfilter_get(NULL, TD_NET_HOST);
    const struct td_sysfilter *off = td_sysfilter_get(NULL, TD_NET_NONE);
    assert_non_null(on);
    assert_non_null(off);
    assert_ptr_not_equal(on, off);
    /* an egress allow-list: AF_INET* for the proxy, still no AF_UNIX */
    const struct td_sysfilter *proxy = td_sysfilter_get(NULL, TD_NET_PROXY);
    assert_non_null(proxy);
    assert_ptr_not_equal(proxy, on);
    assert_ptr_not_equal(proxy, off);
    /* "off": nothing with network, the AF_UNIX rule without */
    assert_int_equal(parse("{\"syscalls\": \"off\"}", &c, err, sizeof(err)), 0);
    assert_non_null(c);
    assert_null(td_sysfilter_get(c, TD_NET_HOST));
    const struct td_sysfilter *unix_only = td_sysfilter_get(c, TD_NET_NONE);
    assert_non_null(unix_only);
    assert_false(unix_only->notify); /* nothing in it is reported */
    assert_true(unix_only->prog.len < off->prog.len);
    td_sysfilter_conf_free(c);
    /* a tool's own list: its own filters, built once here */
    assert_int_equal(
        parse("{\"deny_syscalls\": [\"sched_yield\", \"ptrace\"]}", &c, err, sizeof(err)), 0);
    const struct td_sysfilter *own = td_sysfilter_get(c, TD_NET_HOST);
    assert_ptr_not_equal(own, on);
    assert_ptr_equal(own, td_sysfilter_get(c, TD_NET_HOST));
    assert_true(own->prog.len > on->prog.len);
    assert_int_equal(own->notify, on->notify);
    td_sysfilter_conf_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals_name_file_and_key),
        cmocka_unit_test(test_which_filter_a_call_gets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
