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
    (void)state;
    struct td_exit e;
    struct td_exit_limit l;
    td_exit_decide(W_EXITCODE(0, SIGKILL), &no_ru, 0, false, &e);
    assert_true(td_exit_limit(&e, &(struct td_exit_seen){.memory_mb = 64, .oom_kills = 1}, &l));
    assert_string_equal(e.detail, "terminated; signal 9 (SIGKILL); out of memory at its limit "
                                  "of 64 MiB (limits.memory_mb)");
    assert_string_equal(l.name, "memory_mb");
    assert_int_equal(l.value, 64);
    assert_string_equal(l.reached, "oom_kill");
}

static void test_limits_seen(void **state)
{
    (void)state;
    struct td_exit e;
    struct td_exit_limit l;
    struct rusage ru = {.ru_utime = {2, 0}};
    td_exit_decide(W_EXITCODE(0, SIGXCPU), &ru, 2000, false, &e);
    assert_true(td_exit_limit(&e, &(struct td_exit_seen){.cpu_ms = 2000}, &l));
    assert_string_equal(l.name, "cpu_ms");
    assert_string_equal(l.reached, "SIGXCPU");
    assert_non_null(strstr(e.detail, "CPU time at its limit of 2000 ms (limits.cpu_ms)"));

    td_exit_decide(W_EXITCODE(0, SIGXFSZ), &no_ru, 0, false, &e);
    assert_true(td_exit_limit(&e, &(struct td_exit_seen){.file_size_mb = 1}, &l));
    assert_string_equal(l.name, "file_size_mb");
    assert_string_equal(l.reached, "SIGXFSZ");
    /* SIGXFSZ without a file size limit: someone sent it */
    td_exit_decide(W_EXITCODE(0, SIGXFSZ), &no_ru, 0, false, &e);
    assert_false(td_exit_limit(&e, &(struct td_exit_seen){0}, &l));

    /* a fork refused, then an exit with an error status */
    td_exit_decide(W_EXITCODE(2, 0), &no_ru, 0, false, &e);
    assert_true(td_exit_limit(&e, &(struct td_exit_seen){.processes = 8, .pids_refusals = 3}, &l));
    assert_string_equal(e.detail, "exited with status 2; new processes refused at its limit of "
                                  "8 (limits.processes)");
    assert_string_equal(l.reached, "pids.max");

    td_exit_decide(W_EXITCODE(2, 0), &no_ru, 0, false, &e);
    assert_false(td_exit_limit(&e, &(struct td_exit_seen){.processes = 8, .memory_mb = 64}, &l));
    assert_string_equal(e.detail, "exited with status 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_status), cmocka_unit_test(test_signals),
        cmocka_unit_test(test_core_dump),   cmocka_unit_test(test_unnamed_signal),
        cmocka_unit_test(test_cpu_limit),   cmocka_unit_test(test_oom),
        cmocka_unit_test(test_limits_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
