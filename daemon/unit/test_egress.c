/* Unit tests of the egress allow-list's policy (egress.c): what a
 * definition's "network" object may say, and which host and port each
 * kind of entry lets through. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

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

static bool private_addr(const char *text)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, text, &s4->sin_addr) == 1)
        s4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &s6->sin6_addr) == 1)
        s6->sin6_family = AF_INET6;
    else
        fail_msg("%s: not an address", text);
    return td_egress_private((struct sockaddr *)&ss);
}

/* What a listed name may not resolve to (DNS rebinding onto the host). */
static void test_private_addresses(void **state)
{
    (void)state;
    static const char *const no[] = {"127.0.0.1",
                                     "127.9.9.9",
                                     "10.1.2.3",
                                     "172.16.0.1",
                                     "172.31.255.255",
                                     "192.168.1.1",
                                     "169.254.169.254",
                                     "100.64.0.1",
                                     "0.0.0.0",
                                     "224.0.0.1",
                                     "255.255.255.255",
                                     "::1",
                                     "::",
                                     "fe80::1",
                                     "fd00::1",
                                     "ff02::1",
                                     "::ffff:127.0.0.1",
                                     "::ffff:10.0.0.1"};
    static const char *const yes[] = {"93.184.216.34", "172.15.0.1", "172.32.0.1",
                                      "100.128.0.1",   "8.8.8.8",    "2606:2800:220:1::1",
                                      "::ffff:8.8.8.8"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (!private_addr(no[i]))
            fail_msg("%s: should be refused", no[i]);
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (private_addr(yes[i]))
            fail_msg("%s: should be allowed", yes[i]);
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
        cmocka_unit_test(test_private_addresses),
        cmocka_unit_test(test_bad_objects_are_refused_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
