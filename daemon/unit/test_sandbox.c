/* Unit tests of the spawn path (sandbox.c) that need no daemon: the
 * hand-over socket's descriptor discipline. What is handed over through it
 * is tested end to end where a step uses it (the seccomp listener, the
 * egress proxy's socket). */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "report.h"
#include "sandbox.h"

static char *const sh_argv[] = {"/bin/sh", "-c", "exec ls /proc/self/fd", NULL};
static char *const no_env[] = {NULL};

/* Spawn ls of its own fds; what it printed, and the child reaped. */
static void spawn_listing(bool hand_over, char *out, size_t outlen, struct td_child *c)
{
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    struct td_spawn s = {.argv = sh_argv,
                         .envp = no_env,
                         .cwd = cwd,
                         .uid = (uid_t)-1,
                         .gid = (gid_t)-1,
                         .cgroup_dir = -1,
                         .cgroup_procs = -1,
                         .hand_over = hand_over};
    const char *what = NULL;
    assert_int_equal(td_sandbox_spawn(&s, c, &what), 0);
    close(c->in);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < outlen && (r = read(c->out, out + n, outlen - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    int status;
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(c->out), close(c->err), close(c->report);
}

/* ls sees 0-2 and the one it opened for the listing (the lowest free, 3):
 * neither the report pipe (3) nor the hand-over socket (4) outlives exec. */
static void check_only_std_fds(bool hand_over)
{
    char out[256];
    struct td_child c;
    spawn_listing(hand_over, out, sizeof(out), &c);
    assert_string_equal(out, "0\n1\n2\n3\n");
    for (int k = 0; k < TD_HAND_COUNT; k++)
        assert_int_equal(c.handed[k], -1);
}

static void test_no_hand_over(void **state)
{
    (void)state;
    check_only_std_fds(false);
}

static void test_hand_over_socket_is_not_inherited(void **state)
{
    (void)state;
    check_only_std_fds(true);
}

/* With 3 and 4 free, the pipes land there; the child's dup2 onto 3 and 4
 * must not overwrite its own stdin or stdout on the way. */
static void test_low_fds_free(void **state)
{
    (void)state;
    int saved3 = fcntl(3, F_DUPFD_CLOEXEC, 10), saved4 = fcntl(4, F_DUPFD_CLOEXEC, 10);
    close(3), close(4);
    check_only_std_fds(true);
    if (saved3 >= 0)
        dup2(saved3, 3), close(saved3);
    if (saved4 >= 0)
        dup2(saved4, 4), close(saved4);
}

static void put_recs(int fd, const struct td_report_rec *recs, size_t n)
{
    for (size_t i = 0; i < n; i++) /* each its own write, as the init's are */
        assert_int_equal(write(fd, &recs[i], sizeof(recs[i])), (ssize_t)sizeof(recs[i]));
}

/* The report pipe read as the records come: some now, the rest later, the
 * status last; its end without a status is -1, after one 1 again. */
static void test_report_more(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    struct td_report r;
    memset(&r, 0, sizeof(r));
    assert_int_equal(td_sandbox_report_more(p[0], &r), 0); /* nothing yet */
    put_recs(p[1], (struct td_report_rec[]){{TD_REPORT_CPU, 7, 3}}, 1);
    assert_int_equal(td_sandbox_report_more(p[0], &r), 0);
    assert_true(r.have_usage && r.user_ms == 7 && r.sys_ms == 3 && !r.have_status);
    put_recs(p[1], (struct td_report_rec[]){{TD_REPORT_RSS, 900, 0}, {TD_REPORT_STATUS, 256, 0}},
             2);
    assert_int_equal(td_sandbox_report_more(p[0], &r), 1);
    assert_true(r.have_status && r.status == 256 && r.maxrss_kb == 900);
    close(p[1]);
    assert_int_equal(td_sandbox_report_more(p[0], &r), 1);
    close(p[0]);
    /* more records than one read takes, then the end: all taken, -1 */
    assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 40; i++)
        put_recs(p[1], (struct td_report_rec[]){{TD_REPORT_CPU, i, i}}, 1);
    put_recs(p[1], (struct td_report_rec[]){{TD_REPORT_FAILED, TD_STEP_EXEC, 2}}, 1);
    close(p[1]);
    int rc;
    while ((rc = td_sandbox_report_more(p[0], &r)) == 0)
        ;
    assert_int_equal(rc, -1);
    assert_true(r.failed && r.err == 2 && r.user_ms == 39 && !r.have_status);
    assert_string_equal(r.step, "exec");
    close(p[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_hand_over),
        cmocka_unit_test(test_hand_over_socket_is_not_inherited),
        cmocka_unit_test(test_low_fds_free),
        cmocka_unit_test(test_report_more),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
