/* Unit tests of pidinfo.c: a pidfd's pid and parent, both ways (the
 * PIDFD_GET_INFO ioctl where the kernel has it, /proc where it answers
 * ENOTTY or EINVAL), on a real child in each of its states: alive, exited
 * and not reaped, reaped. The ways must agree. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pidinfo.h"

struct kid {
    pid_t pid;
    int pidfd, go; /* go: its end closed, it exits */
};

static void kid_start(struct kid *k)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    k->pid = fork();
    assert_true(k->pid >= 0);
    if (k->pid == 0) {
        char c;
        close(p[1]);
        _exit(read(p[0], &c, 1) < 0);
    }
    close(p[0]);
    k->go = p[1];
    k->pidfd = (int)syscall(SYS_pidfd_open, k->pid, 0);
    assert_true(k->pidfd >= 0);
}

/* exited, not reaped: a zombie, still its pid's */
static void kid_exit(struct kid *k)
{
    siginfo_t si;
    close(k->go);
    assert_int_equal(waitid(P_PID, (id_t)k->pid, &si, WEXITED | WNOWAIT), 0);
}

static void kid_reap(struct kid *k)
{
    assert_int_equal(waitpid(k->pid, NULL, 0), k->pid);
}

/* the ioctl as the kernel answers it, handed to td_pidfd_ids_from */
static int by_ioctl(int pidfd, pid_t *pid, pid_t *ppid)
{
    struct td_pidfd_info info = {.mask = TD_PIDFD_INFO_PID};
    int rc = ioctl(pidfd, TD_PIDFD_GET_INFO, &info);
    return td_pidfd_ids_from(pidfd, rc < 0 ? -1 : 0, rc < 0 ? errno : 0, &info, pid, ppid);
}

/* a kernel without it: what it answers, and garbage in info */
static int by_proc(int pidfd, int err, pid_t *pid, pid_t *ppid)
{
    struct td_pidfd_info info;
    memset(&info, 0x5a, sizeof(info));
    return td_pidfd_ids_from(pidfd, -1, err, &info, pid, ppid);
}

/* each way, its answer for k: pid and parent, or an error */
static void expect_ids(const struct kid *k, int want)
{
    pid_t pid, ppid;
    for (int way = 0; way < 4; way++) {
        pid = ppid = 0;
        int rc = way == 0   ? td_pidfd_ids(k->pidfd, &pid, &ppid)
                 : way == 1 ? by_ioctl(k->pidfd, &pid, &ppid)
                 : way == 2 ? by_proc(k->pidfd, ENOTTY, &pid, &ppid)
                            : by_proc(k->pidfd, EINVAL, &pid, &ppid);
        assert_int_equal(rc, want);
        if (want == 0) {
            assert_int_equal(pid, k->pid);
            assert_int_equal(ppid, getpid());
            pid = 0; /* and without the parent asked */
            assert_int_equal(way < 2 ? td_pidfd_ids(k->pidfd, &pid, NULL)
                                     : by_proc(k->pidfd, ENOTTY, &pid, NULL),
                             0);
            assert_int_equal(pid, k->pid);
        }
    }
}

static void test_alive(void **state)
{
    (void)state;
    struct kid k;
    kid_start(&k);
    expect_ids(&k, 0);
    kid_exit(&k);
    kid_reap(&k);
    close(k.pidfd);
}

static void test_exited_not_reaped(void **state)
{
    (void)state;
    struct kid k;
    kid_start(&k);
    kid_exit(&k);
    expect_ids(&k, 0);
    kid_reap(&k);
    close(k.pidfd);
}

static void test_reaped(void **state)
{
    (void)state;
    struct kid k;
    kid_start(&k);
    kid_exit(&k);
    kid_reap(&k);
    expect_ids(&k, -ESRCH);
    close(k.pidfd);
}

/* 6.13 or later: the kernel that PIDFD_GET_INFO came in */
static bool kernel_has_pidfd_info(void)
{
    struct utsname u;
    int major = 0, minor = 0;
    return uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
           (major > 6 || (major == 6 && minor >= 13));
}

/* A kernel that has the ioctl answers ours (its number and layout right):
 * the way the daemon takes there, not the fallback. */
static void test_kernel_has_it(void **state)
{
    (void)state;
    struct kid k;
    kid_start(&k);
    struct td_pidfd_info info = {.mask = TD_PIDFD_INFO_PID};
    int rc = ioctl(k.pidfd, TD_PIDFD_GET_INFO, &info);
    if (!kernel_has_pidfd_info()) {
        kid_exit(&k), kid_reap(&k), close(k.pidfd);
        skip(); /* before 6.13: only the fallback is there */
    }
    assert_int_equal(rc, 0);
    assert_true(info.mask & TD_PIDFD_INFO_PID);
    assert_int_equal((pid_t)info.pid, k.pid);
    assert_int_equal((pid_t)info.ppid, getpid());
    kid_exit(&k);
    kid_reap(&k);
    close(k.pidfd);
}

/* Any other error is the answer: no /proc read in its place. */
static void test_other_errors_final(void **state)
{
    (void)state;
    pid_t pid = 0, ppid = 0;
    struct td_pidfd_info info = {0};
    assert_int_equal(td_pidfd_ids_from(0, -1, ESRCH, &info, &pid, &ppid), -ESRCH);
    assert_int_equal(td_pidfd_ids_from(0, -1, EBADF, &info, &pid, &ppid), -EBADF);
    assert_int_equal(pid, 0);
    /* an answer without the pid in it is none */
    assert_int_equal(td_pidfd_ids_from(0, 0, 0, &info, &pid, &ppid), -ESRCH);
    /* not a pidfd: no "Pid:" in its fdinfo */
    assert_int_equal(by_proc(0, ENOTTY, &pid, &ppid), -ESRCH);
    assert_int_equal(td_pidfd_ids(-1, &pid, &ppid), -EBADF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alive),
        cmocka_unit_test(test_exited_not_reaped),
        cmocka_unit_test(test_reaped),
        cmocka_unit_test(test_kernel_has_it),
        cmocka_unit_test(test_other_errors_final),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
