/* Unit tests of the egress allow-list's policy (egress.c): what a
 * definition's "network" object may say, and which host and port each
 * kind of entry lets through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "egress.h"

static struct td_egress *policy(const char *text, char *err, size_t errlen)
{
    json_t *v = json_loads(text, 0, NULL);
    assert_non_null(v);
    struct td_egress *e = NULL;
    int rc = td_egress_parse(v, &e, err, errlen);
    json_decref(v);
    return rc == 0 ? e : NULL;
}

static void test_names_ports_and_wildcards(void **state)
{
    (void)state;
    char err[256];
    struct td_egress *e = policy("{\"allow\": [\"api.github.com\", \"*.pypi.org\", "
                                 "\"127.0.0.1:8080\", \"Example.COM.:*\", \"[::1]:9\"]}",
                                 err, sizeof(err));
    assert_non_null(e);
    /* a name without a port: 80 and 443 */
    assert_true(td_egress_allows(e, "api.github.com", 443));
    assert_true(td_egress_allows(e, "api.github.com", 80));
    assert_false(td_egress_allows(e, "api.github.com", 22));
    assert_false(td_egress_allows(e, "github.com", 443));
    assert_false(td_egress_allows(e, "xapi.github.com", 443));
    /* "*.": any depth below, not the domain itself, not a look-alike */
    assert_true(td_egress_allows(e, "files.pypi.org", 443));
    assert_true(td_egress_allows(e, "a.b.pypi.org", 443));
    assert_false(td_egress_allows(e, "pypi.org", 443));
    assert_false(td_egress_allows(e, "evilpypi.org", 443));
    /* an address: only that address and port */
    assert_true(td_egress_allows(e, "127.0.0.1", 8080));
    assert_false(td_egress_allows(e, "127.0.0.1", 8081));
    assert_false(td_egress_allows(e, "localhost", 8080));
    assert_true(td_egress_allows(e, "::1", 9));
    assert_true(td_egress_allows(e, "0:0::1", 9));
    /* case and the trailing dot are normalised at load; any port */
    assert_true(td_egress_allows(e, "example.com", 5432));
    assert_null(td_egress_no_proxy(e)); /* it names the host's loopback */
    td_egress_free(e);
    e = policy("{\"allow\": [], \"max_connections\": 2, \"max_bytes\": 10}", err, sizeof(err));
    assert_non_null(e);
    assert_false(td_egress_allows(e, "example.com", 443));
    assert_string_equal(td_egress_no_proxy(e), "localhost,127.0.0.1,::1");
    td_egress_free(e);
}

static void test_bad_objects_are_refused_by_name(void **state)
{
    (void)state;
    static const struct {
        const char *text, *err;
    } cases[] = {
        {"{}", "allow: expected an array of host names"},
        {"{\"allow\": \"x.org\"}", "allow: expected an array of host names"},
        {"{\"allow\": [\"x.org\"], \"deny\": []}", "deny: unknown key"},
        {"{\"allow\": [1]}", "allow[0]: expected a host name"},
        {"{\"allow\": [\"ok.org\", \"x.org:0\"]}", "allow[1]: \"x.org:0\": the port"},
        {"{\"allow\": [\"x.org:http\"]}", "allow[0]: \"x.org:http\": the port"},
        {"{\"allow\": [\"*\"]}", "allow[0]: \"*\": expected a host name"},
        {"{\"allow\": [\"a.*.org\"]}", "allow[0]: \"a.*.org\": expected"},
        {"{\"allow\": [\"http://x.org/\"]}", "allow[0]: \"http://x.org/\""},
        {"{\"allow\": [], \"max_bytes\": 0}", "max_bytes: expected a positive integer"},
        {"{\"allow\": [], \"max_connections\": \"9\"}", "max_connections: expected a positive"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256] = "";
        assert_null(policy(cases[i].text, err, sizeof(err)));
        if (strncmp(err, cases[i].err, strlen(cases[i].err)) != 0)
            fail_msg("%s: got \"%s\", want \"%s...\"", cases[i].text, err, cases[i].err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_ports_and_wildcards),
        cmocka_unit_test(test_bad_objects_are_refused_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
