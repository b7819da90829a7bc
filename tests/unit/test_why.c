/* Unit tests of the denial sentences (lib/why.c): one for each kind of
 * entry of "denied", the run request's "policy" named where it narrows the
 * key that decides, never a way around either; and the reasons a model
 * reads after a call's content, bounded in lines and bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "why.h"

static json_t *j(const char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    assert_non_null(v);
    return v;
}

/* Words that would point a model around its confinement rather than at
 * what decides it. */
static void assert_no_way_around(const char *s)
{
    static const char *const never[] = {"bypass",  "disable",      "instead", "workaround",
                                        "\"off\"", "another tool", "--",      "sudo"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
        if (strstr(s, never[i]))
            fail_msg("\"%s\" in: %s", never[i], s);
}

/* te_why(denial) is want, with the batch's and the call's policies. */
static void check(const char *denial, const char *batch, const char *call, const char *want)
{
    json_t *d = j(denial), *b = batch ? j(batch) : NULL, *c = call ? j(call) : NULL;
    char *got = te_why(d, b, c);
    assert_non_null(got);
    assert_string_equal(got, want);
    assert_no_way_around(got);
    free(got);
    json_decref(d);
    json_decref(b);
    json_decref(c);
}

static void test_syscall(void **state)
{
    (void)state;
    check("{\"kind\":\"syscall\",\"name\":\"bpf\"}", NULL, NULL,
          "The system call bpf was refused (EPERM) by the tool's system-call filter; only the "
          "tool's definition (\"syscalls\", \"deny_syscalls\") can allow it.");
    /* a policy narrows no system call: the same sentence */
    check("{\"kind\":\"syscall\",\"name\":\"socket(AF_PACKET)\"}", "{\"network\":false}", NULL,
          "The system call socket(AF_PACKET) was refused (EPERM) by the tool's system-call "
          "filter; only the tool's definition (\"syscalls\", \"deny_syscalls\") can allow it.");
}

static void test_network_host(void **state)
{
    (void)state;
    const char *e = "{\"kind\":\"network\",\"host\":\"evil.example\",\"port\":80}";
    check(e, NULL, NULL,
          "Network access to evil.example port 80 was refused: it is not in the tool's network "
          "allow-list; only the tool's definition (\"network\": {\"allow\": "
          "[\"evil.example:80\"]}) allows it, within what a run request's \"policy\" leaves.");
    const char *narrowed =
        "Network access to evil.example port 80 was refused: it is not in this call's network "
        "allow-list, which the run request's \"policy\" narrows; only that policy and the tool's "
        "definition together (\"network\": {\"allow\": [\"evil.example:80\"]} in each) allow it.";
    check(e, "{\"network\":{\"allow\":[\"a.example:443\"]}}", NULL, narrowed);
    check(e, NULL, "{\"network\":{\"allow\":[]}}", narrowed);
    /* a policy of the file system alone: the network is the tool's */
    check(e, "{\"filesystem\":{\"write\":[]}}", "{\"timeout_ms\":5}",
          "Network access to evil.example port 80 was refused: it is not in the tool's network "
          "allow-list; only the tool's definition (\"network\": {\"allow\": "
          "[\"evil.example:80\"]}) allows it, within what a run request's \"policy\" leaves.");
}

static void test_network_reasons(void **state)
{
    (void)state;
    const char *priv = "{\"kind\":\"network\",\"host\":\"db.example\",\"port\":5432,\"reason\":"
                       "\"private_address\"}";
    check(priv, NULL, NULL,
          "Network access to db.example port 5432 was refused: the name resolved only to "
          "loopback or private addresses, which a listed name never reaches; only listing the "
          "address itself in the tool's definition (\"network\": {\"allow\": [...]}) allows it.");
    check(priv, NULL, "{\"network\":{\"allow\":[\"db.example:5432\"]}}",
          "Network access to db.example port 5432 was refused: the name resolved only to "
          "loopback or private addresses, which a listed name never reaches; only listing the "
          "address itself in the tool's definition (\"network\": {\"allow\": [...]}) and in the "
          "run request's \"policy\", which narrows this call's, allows it.");
    check("{\"kind\":\"network\",\"host\":\"127.0.0.1\",\"port\":8080,\"reason\":\"max_bytes\"}",
          NULL, NULL,
          "Network access to 127.0.0.1 port 8080 was refused: this call's max_bytes limit was "
          "reached (the tool's definition, \"network\": {\"max_bytes\": N}, sets it).");
    check("{\"kind\":\"network\",\"reason\":\"max_connections\"}", NULL, NULL,
          "A network connection was refused: this call had its most proxy connections open at "
          "once (the tool's definition, \"network\": {\"max_connections\": N}, sets that).");
    check("{\"kind\":\"network\",\"reason\":\"connections_total\"}", NULL, NULL,
          "A network connection was refused: this call made the most proxy connections a call "
          "may make in all (connections_total, fixed).");
}

static void test_egress_failure(void **state)
{
    (void)state;
    check("{\"kind\":\"egress_failure\",\"host\":\"api.example\",\"port\":443,"
          "\"cause\":\"could not connect: connection refused\"}",
          NULL, NULL,
          "Connecting to api.example port 443 failed (not a refusal): could not connect: "
          "connection refused.");
    check("{\"kind\":\"egress_failure\",\"host\":\"api.example\",\"port\":443}", NULL, NULL,
          "Connecting to api.example port 443 failed (not a refusal): unknown.");
}

static void test_filesystem(void **state)
{
    (void)state;
    check("{\"kind\":\"filesystem\",\"path\":\"/root/.bashrc\",\"access\":\"read\","
          "\"rule\":\"hidden by the view\"}",
          NULL, NULL,
          "Reading /root/.bashrc was refused: the tool's view hides it; only the tool's "
          "definition (\"filesystem\": {\"read\": [\"/root/.bashrc\"]}) allows it, within what a "
          "run request's \"policy\" leaves.");
    /* what is made or removed: its directory is what must be writable */
    check("{\"kind\":\"filesystem\",\"path\":\"/srv/out/new\",\"access\":\"create\","
          "\"rule\":\"read-only in the view\"}",
          NULL, NULL,
          "Creating /srv/out/new was refused: the tool's view shows it read-only; only the "
          "tool's definition (\"filesystem\": {\"write\": [\"/srv/out\"]}) allows it, within "
          "what a run request's \"policy\" leaves.");
    check("{\"kind\":\"filesystem\",\"path\":\"/x\",\"access\":\"remove\","
          "\"rule\":\"outside Landlock's rules\"}",
          NULL, NULL,
          "Removing /x was refused: Landlock lets the call write only where the tool's "
          "definition says; only the tool's definition (\"filesystem\": {\"write\": [\"/\"]}) "
          "allows it, within what a run request's \"policy\" leaves.");
    check("{\"kind\":\"filesystem\",\"path\":\"/opt/a\",\"access\":\"read\","
          "\"rule\":\"not in the minimal root\"}",
          NULL, NULL,
          "Reading /opt/a was refused: the tool's minimal root does not show it; only the tool's "
          "definition (\"filesystem\": {\"read\": [\"/opt/a\"]}) allows it, within what a run "
          "request's \"policy\" leaves.");
    check("{\"kind\":\"filesystem\",\"path\":\"/etc/shadow\",\"access\":\"read\","
          "\"rule\":\"hide\"}",
          NULL, NULL,
          "Reading /etc/shadow was refused: the tool's definition hides it on purpose "
          "(\"filesystem\": {\"hide\": [...]}); only its operator can change that.");
    check("{\"kind\":\"filesystem\",\"path\":\"/etc/x\",\"access\":\"write\","
          "\"rule\":\"permissions\"}",
          NULL, NULL,
          "Writing /etc/x was refused by the file's own permissions for the call's user; no key "
          "of the tool's definition changes them.");
    check("{\"kind\":\"filesystem\",\"path\":\"/tmp/a.out\",\"access\":\"execute\","
          "\"rule\":\"not executable in the view\"}",
          NULL, NULL,
          "Executing /tmp/a.out was refused: the tool's view mounts it without execution (not "
          "executable in the view); no key of the tool's definition makes it executable.");
    /* an access the list does not know keeps its entry's words */
    check("{\"kind\":\"filesystem\",\"path\":\"/a\",\"access\":\"link\",\"rule\":\"odd\"}", NULL,
          NULL,
          "Access to /a was refused: odd; only the tool's definition (\"filesystem\": "
          "{\"write\": [\"/a\"]}) allows it, within what a run request's \"policy\" leaves.");
}

static void test_filesystem_narrowed(void **state)
{
    (void)state;
    const char *w = "{\"kind\":\"filesystem\",\"path\":\"/srv/out/f\",\"access\":\"write\","
                    "\"rule\":\"read-only in the view\"}";
    const char *narrowed =
        "Writing /srv/out/f was refused: the tool's view shows it read-only; the run request's "
        "\"policy\" narrows this call's file system, and only that policy and the tool's "
        "definition together (\"filesystem\": {\"write\": [\"/srv/out/f\"]} in each) allow it.";
    check(w, "{\"filesystem\":{\"write\":[\"/srv/tmp\"]}}", NULL, narrowed);
    check(w, NULL, "{\"filesystem\":{\"hide\":[\"/srv/out/secret\"]}}", narrowed);
    /* a network policy leaves the file system the tool's */
    check(w, "{\"network\":false}", NULL,
          "Writing /srv/out/f was refused: the tool's view shows it read-only; only the tool's "
          "definition (\"filesystem\": {\"write\": [\"/srv/out/f\"]}) allows it, within what a "
          "run request's \"policy\" leaves.");
    const char *hidden =
        "{\"kind\":\"filesystem\",\"path\":\"/srv/k\",\"access\":\"read\",\"rule\":\"hide\"}";
    check(hidden, NULL, "{\"filesystem\":{\"hide\":[\"/srv/k\"]}}",
          "Reading /srv/k was refused: the tool's definition or the run request's \"policy\" "
          "hides it on purpose (\"filesystem\": {\"hide\": [...]}); only whoever wrote them can "
          "change that.");
    /* a policy that hides nothing did not hide it */
    check(hidden, "{\"filesystem\":{\"write\":[]}}", NULL,
          "Reading /srv/k was refused: the tool's definition hides it on purpose "
          "(\"filesystem\": {\"hide\": [...]}); only its operator can change that.");
    /* what no policy decides stays the definition's or the file's */
    check("{\"kind\":\"filesystem\",\"path\":\"/etc/x\",\"access\":\"write\","
          "\"rule\":\"permissions\"}",
          "{\"filesystem\":{\"write\":[]}}", NULL,
          "Writing /etc/x was refused by the file's own permissions for the call's user; no key "
          "of the tool's definition changes them.");
}

static void test_unknown_entry(void **state)
{
    (void)state;
    check("{\"kind\":\"quantum\",\"what\":1}", NULL, NULL,
          "Refused: {\"kind\":\"quantum\",\"what\":1}");
    check("{\"kind\":\"filesystem\",\"path\":\"/a\"}", NULL, NULL,
          "Refused: {\"kind\":\"filesystem\",\"path\":\"/a\"}");
    check("{\"kind\":\"network\"}", NULL, NULL, "Refused: {\"kind\":\"network\"}");
}

static void test_denied_copy(void **state)
{
    (void)state;
    json_t *d = j("[{\"kind\":\"syscall\",\"name\":\"bpf\"},"
                  "{\"kind\":\"network\",\"host\":\"h\",\"port\":1}]");
    json_t *w = te_why_denied(d, NULL, NULL);
    assert_non_null(w);
    assert_int_equal(json_array_size(w), 2);
    /* "why" last, the entry's own keys as they were */
    char *first = json_dumps(json_array_get(w, 0), JSON_COMPACT);
    assert_string_equal(first, "{\"kind\":\"syscall\",\"name\":\"bpf\",\"why\":\"The system call "
                               "bpf was refused (EPERM) by the tool's system-call filter; only "
                               "the tool's definition (\\\"syscalls\\\", \\\"deny_syscalls\\\") "
                               "can allow it.\"}");
    free(first);
    assert_null(json_object_get(json_array_get(d, 0), "why")); /* a copy */
    json_decref(w);
    json_decref(d);
    d = j("[]");
    assert_null(te_why_denied(d, NULL, NULL));
    json_decref(d);
    assert_null(te_why_denied(NULL, NULL, NULL));
    d = j("[\"not an object\"]");
    assert_null(te_why_denied(d, NULL, NULL));
    json_decref(d);
}

static json_t *whys(size_t n, const char *why)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s,s:s}", "kind", "x", "why", why));
    return a;
}

static void test_text(void **state)
{
    (void)state;
    json_t *d = whys(2, "One.");
    size_t len;
    char *s = te_why_text("", 0, d, &len);
    assert_string_equal(s, "[toolexec] Refused during the call:\n- One.\n- One.");
    assert_int_equal(len, strlen(s));
    free(s);
    /* after the content, a blank line; the content's NUL bytes kept */
    s = te_why_text("a\0b", 3, d, &len);
    static const char want[] = "a\0b\n\n[toolexec] Refused during the call:\n- One.\n- One.";
    assert_int_equal(len, sizeof(want) - 1);
    assert_memory_equal(s, want, len);
    assert_int_equal(s[len], '\0');
    free(s);
    json_decref(d);
}

static void test_text_bounds(void **state)
{
    (void)state;
    json_t *d = whys(TE_WHY_LINES_MAX + 3, "Short.");
    size_t len;
    char *s = te_why_text("{}", 2, d, &len);
    size_t lines = 0;
    for (const char *p = s; (p = strstr(p, "\n- Short.")); p++)
        lines++;
    assert_int_equal(lines, TE_WHY_LINES_MAX);
    assert_non_null(strstr(s, "\n- and 3 more."));
    free(s);
    json_decref(d);

    /* a long sentence is cut on a character's boundary: "é" is 2 bytes */
    char long_why[2 * TE_WHY_LINE_MAX + 1];
    for (size_t i = 0; i + 1 < sizeof(long_why); i += 2)
        memcpy(long_why + i, "\xc3\xa9", 2);
    long_why[sizeof(long_why) - 1] = '\0';
    d = whys(1, long_why);
    s = te_why_text("", 0, d, &len);
    const char *line = strstr(s, "\n- ") + 3;
    size_t n = strlen(line);
    assert_true(n <= TE_WHY_LINE_MAX);
    assert_true(n > TE_WHY_LINE_MAX - 8);
    assert_string_equal(line + n - 3, "...");
    assert_true(((unsigned char)line[n - 4] & 0xc0) != 0xc0); /* no lead byte left alone */
    json_t *valid = json_string(s);                           /* valid UTF-8 */
    assert_non_null(valid);
    json_decref(valid);
    free(s);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syscall),
        cmocka_unit_test(test_network_host),
        cmocka_unit_test(test_network_reasons),
        cmocka_unit_test(test_egress_failure),
        cmocka_unit_test(test_filesystem),
        cmocka_unit_test(test_filesystem_narrowed),
        cmocka_unit_test(test_unknown_entry),
        cmocka_unit_test(test_denied_copy),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_text_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
