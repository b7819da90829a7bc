/* Unit tests of exit-cause mapping (exitcause.c): statuses from real child
 * processes where a test can make one, built with the wait(2) macros where
 * it cannot (a core dump depends on the host's core_pattern). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "exitcause.h"

static const struct rusage no_ru;

/* The status of a real child that exits with code, or dies of sig. */
static int child_status(int code, int sig)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (sig) {
            signal(sig, SIG_DFL);
            raise(sig);
        }
        _exit(code);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void test_exit_status(void **state)
{
    struct td_exit e;
    static const int codes[] = {0, 1, 127};
    for (size_t i = 0; i < 3; i++) {
        td_exit_decide(child_status(codes[i], 0), &no_ru, 0, false, &e);
        assert_false(e.signaled);
        assert_int_equal(e.code, codes[i]);
        char want[64];
        snprintf(want, sizeof(want), "exited with status %d", codes[i]);
        assert_string_equal(e.detail, want);
    }
    /* a framed tool owed a response */
    td_exit_decide(child_status(1, 0), &no_ru, 0, true, &e);
    assert_string_equal(e.detail, "exited with status 1 without a response");
}

static void test_signals(void **state)
{
    struct td_exit e;
    td_exit_decide(child_status(0, SIGKILL), &no_ru, 0, false, &e);
    assert_true(e.signaled);
    assert_int_equal(e.signal, 9);
    assert_string_equal(e.signame, "SIGKILL");
    assert_false(e.core_dumped);
    assert_string_equal(e.detail, "terminated; signal 9 (SIGKILL)");
    td_exit_decide(child_status(0, SIGTERM), &no_ru, 0, true, &e);
    assert_string_equal(e.signame, "SIGTERM");
    assert_string_equal(e.detail, "terminated; signal 15 (SIGTERM)"); /* framed or not */
    assert_false(e.cpu_limit);
}

static void test_core_dump(void **state)
{
    struct td_exit e;
    td_exit_decide(W_EXITCODE(0, SIGSEGV) | WCOREFLAG, &no_ru, 0, false, &e);
    assert_true(e.core_dumped);
    assert_string_equal(e.signame, "SIGSEGV");
    assert_string_equal(e.detail, "terminated; signal 11 (SIGSEGV), core dumped");
}

/* A signal without an abbreviation is named by its number. */
static void test_unnamed_signal(void **state)
{
    struct td_exit e;
    td_exit_decide(W_EXITCODE(0, SIGRTMIN + 1), &no_ru, 0, false, &e);
    char want[16];
    snprintf(want, sizeof(want), "SIG%d", SIGRTMIN + 1);
    assert_string_equal(e.signame, want);
}

/* RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one (then the
 * CPU used tells it from any other SIGKILL). */
static void test_cpu_limit(void **state)
{
    struct td_exit e;
    struct rusage ru = {.ru_utime = {1, 200000}, .ru_stime = {0, 300000}}; /* 1.5 s */
    td_exit_decide(W_EXITCODE(0, SIGXCPU), &ru, 1000, false, &e);
    assert_true(e.cpu_limit);
    assert_int_equal(e.cpu_ms, 1500);
    td_exit_decide(W_EXITCODE(0, SIGKILL), &ru, 1000, false, &e);
    assert_true(e.cpu_limit);
    td_exit_decide(W_EXITCODE(0, SIGKILL), &ru, 1500, false, &e);
    assert_true(e.cpu_limit); /* at the limit */
    td_exit_decide(W_EXITCODE(0, SIGKILL), &ru, 1501, false, &e);
    assert_false(e.cpu_limit); /* killed below it: something else */
    td_exit_decide(W_EXITCODE(0, SIGXCPU), &ru, 0, false, &e);
    assert_false(e.cpu_limit); /* no limit set */
    td_exit_decide(W_EXITCODE(0, SIGTERM), &ru, 1000, false, &e);
    assert_false(e.cpu_limit);
    td_exit_decide(W_EXITCODE(3, 0), &ru, 1000, false, &e);
    assert_false(e.cpu_limit);
}

static void test_oom(void **state)
{
    struct td_exit e;
    td_exit_decide(W_EXITCODE(0, SIGKILL), &no_ru, 0, false, &e);
    td_exit_oom(&e, 64);
    assert_string_equal(e.detail,
                        "terminated; signal 9 (SIGKILL); out of memory at its limit of 64 MiB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_status), cmocka_unit_test(test_signals),
        cmocka_unit_test(test_core_dump),   cmocka_unit_test(test_unnamed_signal),
        cmocka_unit_test(test_cpu_limit),   cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
