/* Unit tests of --limits parsing (config.c: td_limits_parse), util.c's
 * file helpers and envlist.c's environments. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "envlist.h"
#include "util.h"

static void test_limits_valid(void **state)
{
    struct td_limits l = {.processes = 1024};
    char err[256] = "";
    assert_int_equal(td_limits_parse("cpu_ms=1500,memory_mb=64", &l, err, sizeof(err)), 0);
    assert_int_equal(l.cpu_ms, 1500);
    assert_int_equal(l.memory_mb, 64);
    assert_int_equal(l.processes, 1024); /* not named: kept */
    assert_int_equal(td_limits_parse("processes=8,open_files=32,file_size_mb=1,output_mb=2", &l,
                                     err, sizeof(err)),
                     0);
    assert_int_equal(l.processes, 8);
    assert_int_equal(l.open_files, 32);
    assert_int_equal(l.file_size_mb, 1);
    assert_int_equal(l.output_mb, 2);
    /* the last of a key wins; empty items are skipped */
    assert_int_equal(td_limits_parse("cpu_ms=1,,cpu_ms=2,", &l, err, sizeof(err)), 0);
    assert_int_equal(l.cpu_ms, 2);
    assert_int_equal(td_limits_parse("", &l, err, sizeof(err)), 0);
    assert_int_equal(td_limits_parse("output_mb=18446744073709551615", &l, err, sizeof(err)), 0);
    assert_true(l.output_mb == UINT64_MAX);
}

static void test_limits_invalid(void **state)
{
    static const struct {
        const char *spec, *err;
    } cases[] = {
        {"cpu_ms", "\"cpu_ms\": expected KEY=N with N a positive integer"},
        {"cpu_ms=", "\"cpu_ms\": expected KEY=N with N a positive integer"},
        {"cpu_ms=0", "\"cpu_ms\": expected KEY=N with N a positive integer"},
        {"cpu_ms=-5", "\"cpu_ms\": expected KEY=N with N a positive integer"},
        {"cpu_ms=12x", "\"cpu_ms\": expected KEY=N with N a positive integer"},
        {"cpu_ms=18446744073709551616", "\"cpu_ms\": expected KEY=N with N a positive integer"},
        {"memory_mb=1,stack=5", "\"stack\": unknown limit (cpu_ms, memory_mb, processes, "
                                "open_files, file_size_mb, output_mb)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct td_limits l = {0};
        char err[256] = "";
        assert_int_equal(td_limits_parse(cases[i].spec, &l, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, cases[i].err);
    }
}

static void test_limits_set(void **state)
{
    struct td_limits l = {0};
    assert_int_equal(td_limits_set(&l, "open_files", 7), 0);
    assert_int_equal(l.open_files, 7);
    assert_int_equal(td_limits_set(&l, "open_file", 7), -EINVAL);
    assert_int_equal(td_limits_set(&l, "", 7), -EINVAL);
}

static int entries(DIR *d)
{
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    return n;
}

/* The copy is close-on-exec (a dup() was not), lists from the start each
 * time (it shares the descriptor's position), and leaves the descriptor
 * open. */
static void test_opendir_dup(void **state)
{
    (void)state;
    char dir[] = "/tmp/te-util-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    assert_int_equal(mkdirat(dfd, "a", 0700), 0);
    assert_int_equal(mkdirat(dfd, "b", 0700), 0);
    for (int round = 0; round < 2; round++) {
        DIR *d = td_opendir_dup(dfd);
        assert_non_null(d);
        assert_int_not_equal(dirfd(d), dfd);
        assert_true(fcntl(dirfd(d), F_GETFD) & FD_CLOEXEC);
        assert_int_equal(entries(d), 2);
        closedir(d);
    }
    assert_true(fcntl(dfd, F_GETFD) >= 0);
    assert_null(td_opendir_dup(-1));
    assert_int_equal(errno, EBADF);
    unlinkat(dfd, "a", AT_REMOVEDIR);
    unlinkat(dfd, "b", AT_REMOVEDIR);
    close(dfd);
    rmdir(dir);
}

/* Entries past any count one might have written down: the array grows,
 * always NULL-ended. */
/* asked once, the same on every ask */
static void test_euid(void **state)
{
    (void)state;
    assert_int_equal(td_euid(), geteuid());
    assert_int_equal(td_euid(), geteuid());
}

static void test_envlist(void **state)
{
    (void)state;
    struct td_envlist e = {0};
    char **env = td_envlist_finish(&e);
    assert_non_null(env);
    assert_null(env[0]);
    td_envlist_free(env);
    for (int i = 0; i < 1000; i++)
        td_envlist_add(&e, "V%d=%s", i, i % 2 ? "odd" : "even");
    env = td_envlist_finish(&e);
    assert_non_null(env);
    assert_int_equal(e.n, 0); /* left empty */
    int n = 0;
    for (char **p = env; *p; p++, n++) {
        char want[32];
        snprintf(want, sizeof(want), "V%d=%s", n, n % 2 ? "odd" : "even");
        assert_string_equal(*p, want);
    }
    assert_int_equal(n, 1000);
    td_envlist_free(env);
    td_envlist_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits_valid), cmocka_unit_test(test_limits_invalid),
        cmocka_unit_test(test_limits_set),   cmocka_unit_test(test_opendir_dup),
        cmocka_unit_test(test_envlist),      cmocka_unit_test(test_euid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
