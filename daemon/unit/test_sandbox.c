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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_hand_over),
        cmocka_unit_test(test_hand_over_socket_is_not_inherited),
        cmocka_unit_test(test_low_fds_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
