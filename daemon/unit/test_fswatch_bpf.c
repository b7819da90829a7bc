/*
 * test_fswatch_bpf.c - fswatch.bpf.c as the kernel runs it, both of its
 * objects: the one with bpf_loop and the one fswatch.c falls back to on a
 * kernel without it (before Linux 5.17), which nothing else loads here.
 * Each loaded and attached as fswatch.c does; a child of this test, as a
 * uid watched, fails system calls in a directory it may not search: the
 * records in the ring (each call's path, error, number, flags and
 * directory; a repeat sent once; each budget kept) and the counters are
 * what the program promises, the same for both. A process that does not
 * descend from the daemon named is not watched. Root only (CAP_BPF,
 * CAP_PERFMON), skipped elsewhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cmocka.h>
#include <linux/openat2.h>

#include "fswatch_noloop_obj.h"
#include "fswatch_obj.h"
#include "fswatch_rec.h"
#include "kbtf.h"

#define UID 2147000123u /* no one's */
#define MAXREC 1024

struct seen {
    struct td_fsw_rec r[MAXREC];
    size_t n;
};

static int on_rec(void *ctx, void *data, size_t size)
{
    struct seen *s = ctx;
    assert_int_equal(size, sizeof(struct td_fsw_rec));
    if (s->n < MAXREC)
        memcpy(&s->r[s->n++], data, sizeof(struct td_fsw_rec));
    return 0;
}

static char dir[] = "/tmp/te-fswbpf-XXXXXX";

static void path(char *buf, const char *name)
{
    if (snprintf(buf, TD_FSW_PATH_MAX, "%s/%s", dir, name) >= TD_FSW_PATH_MAX)
        abort();
}

/* What the child does as UID: each a refusal (the directory is root's,
 * 0700) or a name that is not there. */
static void child_calls(void)
{
    char p[TD_FSW_PATH_MAX], q[TD_FSW_PATH_MAX];
    if (setresgid(UID, UID, UID) < 0 || setresuid(UID, UID, UID) < 0)
        _exit(2);
    path(p, "open");
    syscall(SYS_open, p, O_RDONLY);
    path(p, "openat");
    for (int i = 0; i < 3; i++) /* sent once, counted thrice */
        syscall(SYS_openat, AT_FDCWD, p, O_WRONLY | O_CREAT, 0600);
    path(p, "creat");
    syscall(SYS_creat, p, 0600);
    struct open_how how = {.flags = O_RDWR};
    path(p, "openat2");
    syscall(SYS_openat2, AT_FDCWD, p, &how, sizeof(how));
    path(p, "symlinkat");
    syscall(SYS_symlinkat, "x", AT_FDCWD, p);
    path(p, "linkat");
    syscall(SYS_linkat, AT_FDCWD, "/etc/passwd", 7, p, 0);
    path(p, "unlinkat");
    syscall(SYS_unlinkat, 5, p, AT_REMOVEDIR);
    path(p, "access"); /* not a call watched */
    syscall(SYS_access, p, R_OK);
    /* a long name, twice: hashed across its words, sent once */
    memset(q, 'l', 200);
    q[200] = 0;
    path(p, q);
    syscall(SYS_open, p, O_RDONLY);
    syscall(SYS_open, p, O_RDONLY);
    /* past each budget */
    for (int i = 0; i < TD_FSW_REFUSED_BUDGET + 20; i++) {
        snprintf(q, sizeof(q), "many-%03d", i);
        path(p, q);
        syscall(SYS_open, p, O_RDONLY);
    }
    for (int i = 0; i < TD_FSW_NOENT_BUDGET + 20; i++) {
        snprintf(p, sizeof(p), "/te-fswbpf-absent-%d/%03d", (int)getppid(), i);
        syscall(SYS_open, p, O_RDONLY);
    }
    _exit(0);
}

static void run_child(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        child_calls();
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static const struct td_fsw_rec *find(const struct seen *s, const char *name, size_t *count)
{
    char p[TD_FSW_PATH_MAX];
    const struct td_fsw_rec *r = NULL;
    path(p, name);
    *count = 0;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->r[i].path, p) == 0)
            r = &s->r[i], ++*count;
    return r;
}

static void expect(const struct seen *s, const char *name, unsigned nr, unsigned flags, int dirfd)
{
    size_t count;
    const struct td_fsw_rec *r = find(s, name, &count);
    if (!r)
        fail_msg("no record of %s", name);
    assert_int_equal(count, 1);
    assert_int_equal(r->uid, UID);
    assert_true(r->err == EACCES || r->err == EPERM);
    assert_int_equal(r->nr, nr);
    assert_int_equal(r->flags, flags);
    assert_int_equal(r->dirfd, dirfd);
}

/* needs_loop: refused by a kernel without bpf_loop, which fswatch.c
 * then falls back from */
static void watch(const unsigned char *obj, size_t len, bool needs_loop)
{
    if (geteuid() != 0)
        skip();
    uint32_t off_tgid, off_parent;
    if (td_kbtf_task_offsets(&off_tgid, &off_parent) < 0)
        skip();
    struct bpf_object *o = bpf_object__open_mem(obj, len, NULL);
    assert_non_null(o);
    int rc = bpf_object__load(o);
    if (rc == -EPERM || rc == -ENOSYS || (rc < 0 && needs_loop))
        skip(); /* no BPF for this root (a container's), or no bpf_loop */
    assert_int_equal(rc, 0);
    struct bpf_link *link =
        bpf_program__attach(bpf_object__find_program_by_name(o, "fsw_sys_exit"));
    assert_non_null(link);
    int calls = bpf_object__find_map_fd_by_name(o, "calls");
    int self = bpf_object__find_map_fd_by_name(o, "self");
    struct seen *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    struct ring_buffer *rb =
        ring_buffer__new(bpf_object__find_map_fd_by_name(o, "ring"), on_rec, s, NULL);
    assert_non_null(rb);
    __u32 zero = 0, uid = UID;
    struct td_fsw_call c = {0};
    assert_int_equal(bpf_map_update_elem(calls, &uid, &c, BPF_ANY), 0);
    strcpy(dir, "/tmp/te-fswbpf-XXXXXX");
    assert_non_null(mkdtemp(dir));

    /* named as the daemon: another process, its child's sibling */
    pid_t other = fork();
    assert_true(other >= 0);
    if (other == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with this test, however it ends */
        if (getppid() == 1)
            _exit(0);
        pause();
        _exit(0);
    }
    struct td_fsw_self me = {.tgid = (__u32)other, .off_tgid = off_tgid, .off_parent = off_parent};
    assert_int_equal(bpf_map_update_elem(self, &zero, &me, BPF_ANY), 0);
    run_child();
    kill(other, SIGKILL);
    waitpid(other, NULL, 0);
    ring_buffer__consume(rb);
    assert_int_equal(s->n, 0);
    assert_int_equal(bpf_map_lookup_elem(calls, &uid, &c), 0);
    assert_int_equal(c.refused, 0);

    /* named as the daemon: this test, which the child descends from */
    me.tgid = (__u32)getpid();
    assert_int_equal(bpf_map_update_elem(self, &zero, &me, BPF_ANY), 0);
    run_child();
    ring_buffer__consume(rb);
    expect(s, "open", TD_FSW_NR_OPEN, O_RDONLY, TD_FSW_AT_FDCWD);
    expect(s, "openat", TD_FSW_NR_OPENAT, O_WRONLY | O_CREAT, TD_FSW_AT_FDCWD);
    expect(s, "creat", TD_FSW_NR_CREAT, O_CREAT | O_WRONLY | O_TRUNC, TD_FSW_AT_FDCWD);
    expect(s, "openat2", TD_FSW_NR_OPENAT2, O_RDWR, TD_FSW_AT_FDCWD);
    expect(s, "symlinkat", TD_FSW_NR_SYMLINKAT, 0, TD_FSW_AT_FDCWD);
    expect(s, "linkat", TD_FSW_NR_LINKAT, 0, 7);
    expect(s, "unlinkat", TD_FSW_NR_UNLINKAT, AT_REMOVEDIR, 5);
    char q[TD_FSW_PATH_MAX];
    memset(q, 'l', 200);
    q[200] = 0;
    expect(s, q, TD_FSW_NR_OPEN, O_RDONLY, TD_FSW_AT_FDCWD);
    size_t count;
    assert_null(find(s, "access", &count));
    size_t refused = 0, noent = 0;
    for (size_t i = 0; i < s->n; i++) {
        assert_int_equal(s->r[i].uid, UID);
        if (s->r[i].err == ENOENT) {
            assert_int_equal(strncmp(s->r[i].path, "/te-fswbpf-absent-", 18), 0);
            noent++;
        } else {
            refused++;
        }
    }
    assert_int_equal(refused, TD_FSW_REFUSED_BUDGET);
    assert_int_equal(noent, TD_FSW_NOENT_BUDGET);
    /* every refusal counted, listed or not: 3 opens of one name, the long
     * one twice, 6 others and the many */
    assert_int_equal(bpf_map_lookup_elem(calls, &uid, &c), 0);
    assert_int_equal(c.refused, 3 + 2 + 6 + TD_FSW_REFUSED_BUDGET + 20);
    assert_int_equal(c.lost, 0);

    ring_buffer__free(rb);
    bpf_link__destroy(link);
    bpf_object__close(o);
    rmdir(dir);
    free(s);
}

static void with_bpf_loop(void **state)
{
    (void)state;
    watch(td_fswatch_obj, sizeof(td_fswatch_obj), true);
}

static void without_bpf_loop(void **state)
{
    (void)state;
    watch(td_fswatch_obj_noloop, sizeof(td_fswatch_obj_noloop), false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(with_bpf_loop),
        cmocka_unit_test(without_bpf_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
