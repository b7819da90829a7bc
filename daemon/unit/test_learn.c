/* Unit tests of learn mode's proposal builder (learn.c): paths recorded
 * against a base view become a definition's "filesystem" (real, existing
 * paths; writes as the directories they were made in, out of what the calls
 * made themselves; reads only where the base hides them, four in one
 * directory as the directory; nothing of the call's own), hosts its
 * "network", the denied calls it made "syscalls" "off" with the rest of
 * the default set. The paths are real ones, in a directory made here. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "learn.h"

static char
    root[PATH_MAX]; /* realpath()'s size: _FORTIFY_SOURCE aborts on less (a package build) */

static void mk(const char *rel, bool dir)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    if (dir)
        assert_int_equal(mkdir(p, 0755), 0);
    else {
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fclose(f);
    }
}

static const char *at(const char *rel)
{
    static char buf[4][PATH_MAX + 64];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s%s%s", root, rel[0] ? "/" : "", rel);
    return buf[k];
}

static int setup(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/td-learn-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    assert_non_null(realpath(tmpl, root));
    mk("conf", true);
    mk("conf/a.conf", false);
    for (int i = 0; i < 5; i++) {
        char n[32];
        snprintf(n, sizeof(n), "many/%d", i);
        if (i == 0)
            mk("many", true);
        mk(n, false);
    }
    mk("out", true);
    mk("out/made", true);
    mk("out/made/deeper", true);
    mk("own", true);
    mk("own/call1", true);
    mk("state", false);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static json_t *build(struct td_learn *l)
{
    const char *hidden[] = {root, NULL};
    const char *priv[] = {"/dev", "/proc", NULL};
    const char *scratch[] = {root, NULL};
    const char *deny[] = {"ptrace", "syslog", "bpf", NULL};
    struct td_learn_base b = {
        .hidden = hidden, .private = priv, .scratch = scratch, .own = at("own"), .deny = deny};
    return td_learn_build(l, &b);
}

static void test_nothing_learned(void **state)
{
    (void)state;
    struct td_learn *l = td_learn_new();
    json_t *p = build(l);
    json_t *want = json_pack("{s:{},s:b}", "filesystem", "network", 0);
    assert_true(json_equal(p, want));
    json_decref(p);
    json_decref(want);
    td_learn_free(l);
}

static void test_paths(void **state)
{
    (void)state;
    struct td_learn *l = td_learn_new();
    td_learn_path(l, at("conf/a.conf"), TD_LEARN_READ);
    td_learn_path(l, at("conf/../conf/a.conf"), TD_LEARN_READ); /* the same, real */
    td_learn_path(l, at("conf/gone.conf"), TD_LEARN_READ);      /* a probe: nothing */
    td_learn_path(l, at("conf"), TD_LEARN_READ);                /* a directory: not it */
    for (int i = 0; i < 5; i++) {
        char n[32];
        snprintf(n, sizeof(n), "many/%d", i);
        td_learn_path(l, at(n), TD_LEARN_READ);
    }
    /* made by the calls: out/made and below; a file written there */
    td_learn_path(l, at("out/made"), TD_LEARN_MKDIR);
    td_learn_path(l, at("out/made/deeper"), TD_LEARN_MKDIR);
    td_learn_path(l, at("out/made/deeper/r.txt"), TD_LEARN_CREATE | TD_LEARN_WRITE);
    td_learn_path(l, at("out/made/deeper/r.txt"), TD_LEARN_READ);
    /* an existing file written in place: the file */
    td_learn_path(l, at("state"), TD_LEARN_WRITE | TD_LEARN_READ);
    /* its own: the scratch directory itself, its directory, /dev, /proc */
    td_learn_path(l, at("tmpfile"), TD_LEARN_CREATE | TD_LEARN_WRITE);
    td_learn_path(l, at("own/call1/x"), TD_LEARN_CREATE | TD_LEARN_WRITE | TD_LEARN_READ);
    td_learn_path(l, "/dev/null", TD_LEARN_WRITE);
    td_learn_path(l, "/proc/self/status", TD_LEARN_READ);
    /* shown by the base: not proposed */
    td_learn_path(l, "/etc/hostname", TD_LEARN_READ);
    td_learn_path(l, "relative", TD_LEARN_READ); /* ignored: not absolute */
    json_t *p = build(l);
    json_t *want = json_pack("{s:[s,s],s:[s,s]}", "read", at("conf/a.conf"), at("many"), "write",
                             at("out"), at("state"));
    json_t *fs = json_object_get(p, "filesystem");
    char *got = json_dumps(fs, JSON_SORT_KEYS);
    if (!json_equal(fs, want))
        fail_msg("filesystem: %s", got);
    free(got);
    json_decref(p);
    json_decref(want);
    td_learn_free(l);
}

static void test_hosts_syscalls_and_merge(void **state)
{
    (void)state;
    struct td_learn *a = td_learn_new(), *all = td_learn_new();
    td_learn_host(a, "example.org", 443);
    td_learn_host(a, "::1", 8080);
    td_learn_host(a, "example.org", 443);
    td_learn_syscall(a, "syslog");
    td_learn_merge(all, a);
    td_learn_merge(all, a);
    assert_int_equal(td_learn_calls(all), 2);
    json_t *p = build(all);
    json_t *want =
        json_pack("{s:{},s:{s:[s,s]},s:s,s:[s,s]}", "filesystem", "network", "allow", "[::1]:8080",
                  "example.org:443", "syscalls", "off", "deny_syscalls", "ptrace", "bpf");
    char *got = json_dumps(p, JSON_SORT_KEYS);
    if (!json_equal(p, want))
        fail_msg("proposal: %s", got);
    free(got);
    json_decref(p);
    json_decref(want);
    td_learn_free(a);
    td_learn_free(all);
}

/* Refusals: each the narrowest key that allows it (the file read, the
 * file written, the directory an entry was made or removed in), never a
 * top-level directory; an operator's "hide" reported, never proposed; what
 * no key allows said with why; the C library's userdb probe nothing. */
static void test_refusals(void **state)
{
    (void)state;
    struct td_learn *a = td_learn_new(), *l = td_learn_new();
    json_t *denied =
        json_pack("[{s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s},{s:s,s:s}]", "kind", "filesystem", "path",
                  at("conf/a.conf"), "access", "read", "rule", "hidden by the view", "kind",
                  "filesystem", "path", at("many/new"), "access", "create", "rule",
                  "read-only in the view", "kind", "syscall", "name", "ptrace");
    assert_non_null(denied);
    td_learn_refusals(a, denied);
    json_decref(denied);
    td_learn_refused(a, at("state"), "write", "outside Landlock's rules");
    td_learn_refused(a, at("many/0"), "remove", "read-only in the view");
    td_learn_refused(a, at("out/made/x"), "read", "hide");
    td_learn_refused(a, "/run/systemd/userdb/io.systemd.Machine", "read", "hidden by the view");
    td_learn_refused(a, "/etc/te-learn-new", "create", "read-only in the view");
    td_learn_refused(a, "/etc", "read", "hidden by the view");
    td_learn_refused(a, at("conf/gone"), "read", "hidden by the view");
    td_learn_refused(a, "/dev/shm/prog", "execute", "not executable in the view");
    td_learn_refused(a, at("state"), "read", "permissions");
    td_learn_refused(a, "relative", "read", "hidden by the view");
    td_learn_merge(l, a); /* a tool's record keeps its calls' refusals */
    json_t *p = build(l);
    json_t *want =
        json_pack("{s:[s],s:[s,s]}", "read", at("conf/a.conf"), "write", at("many"), at("state"));
    json_t *fs = json_object_get(p, "filesystem");
    char *got = json_dumps(p, JSON_SORT_KEYS);
    if (!json_equal(fs, want))
        fail_msg("proposal: %s", got);
    json_t *hidden = json_pack("[s]", at("out/made/x"));
    if (!json_equal(json_object_get(p, "hidden_on_purpose"), hidden))
        fail_msg("hidden_on_purpose: %s", got);
    json_t *notes = json_object_get(p, "not_proposed");
    const char *expect[][2] = {{"/etc/te-learn-new", "create"},
                               {"/etc", "read"},
                               {NULL, "read"},
                               {"/dev/shm/prog", "execute"},
                               {NULL, "read"}};
    if (json_array_size(notes) != 5)
        fail_msg("not_proposed: %s", got);
    for (size_t i = 0; i < 5; i++) {
        json_t *n = json_array_get(notes, i);
        const char *path = expect[i][0] ? expect[i][0] : i == 2 ? at("conf/gone") : at("state");
        assert_string_equal(json_string_value(json_object_get(n, "path")), path);
        assert_string_equal(json_string_value(json_object_get(n, "access")), expect[i][1]);
        assert_non_null(json_string_value(json_object_get(n, "why")));
    }
    free(got);
    json_decref(hidden);
    json_decref(p);
    json_decref(want);
    td_learn_free(a);
    td_learn_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_learned),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_hosts_syscalls_and_merge),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
