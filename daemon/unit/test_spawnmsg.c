/* Unit tests of spawnmsg.c: a spawn description packed and unpacked is the
 * same description, and anything short, long or malformed is refused whole
 * (the spawner trusts nothing but its peer, and a half-built description
 * must never reach a clone). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "spawnmsg.h"

static char *const argv_[] = {"/init", "/bin/tool", "--flag", NULL};
static char *const envp_[] = {"A=1", "PATH=/usr/bin", NULL};
static const char *const hide_[] = {"/run/s.sock", NULL};
static const char *const llw_[] = {"/tmp", "/dev", NULL};
static const struct td_rlimit rl_[] = {{RLIMIT_NOFILE, {64, 64}},
                                       {RLIMIT_CPU, {RLIM_INFINITY, RLIM_INFINITY}}};
static struct sock_filter prog_[] = {{0x20, 0, 0, 4}, {0x06, 0, 0, 0x7fff0000}};
static const struct sock_fprog filter_ = {2, prog_};
static const struct td_fs_op ops_[] = {
    {TD_FS_OPEN, false, 0, 0, NULL, NULL, NULL},
    {TD_FS_TMPFS, true, 3, 01777, "/tmp", "mode=1777", NULL},
    {TD_FS_CALLDIR, false, 0, 0, NULL, "/", "/work"},
};
static const struct td_fsplan plan_ = {ops_, 3};

static struct td_spawn sample(void)
{
    return (struct td_spawn){.argv = argv_,
                             .init = true,
                             .envp = envp_,
                             .cwd = "/work/c1",
                             .ns_flags = 0x20020000,
                             .work_dir = "/work",
                             .hide = hide_,
                             .uid_map = "1000 1000 1",
                             .gid_map = NULL,
                             .uid = 1879048193,
                             .gid = 1879048193,
                             .rlimits = rl_,
                             .nrlimits = 2,
                             .cgroup_dir = 7,
                             .cgroup_procs = 8,
                             .filter = &filter_,
                             .hand_over = true,
                             .filter_notify = true,
                             .fs = &plan_,
                             .landlock_abi = 4,
                             .ll_write = llw_,
                             .proxy_port = 3128,
                             .in_socket = false,
                             .dev_bound = true};
}

static void assert_strv_equal(char *const *a, char *const *b)
{
    size_t i = 0;
    for (; a[i] && b[i]; i++)
        assert_string_equal(a[i], b[i]);
    assert_null(a[i]);
    assert_null(b[i]);
}

static void test_round_trip(void **state)
{
    (void)state;
    struct td_spawn s = sample();
    uint8_t *buf;
    size_t len;
    assert_int_equal(td_spawnmsg_pack(&s, &buf, &len), 0);
    struct td_spawnmsg m;
    assert_int_equal(td_spawnmsg_unpack(buf, len, &m), 0);
    const struct td_spawn *u = &m.s;
    assert_strv_equal(u->argv, s.argv);
    assert_strv_equal(u->envp, s.envp);
    assert_strv_equal((char *const *)u->hide, (char *const *)s.hide);
    assert_strv_equal((char *const *)u->ll_write, (char *const *)s.ll_write);
    assert_string_equal(u->cwd, s.cwd);
    assert_string_equal(u->work_dir, s.work_dir);
    assert_string_equal(u->uid_map, s.uid_map);
    assert_null(u->gid_map);
    assert_true(u->init && u->hand_over && u->filter_notify && !u->in_socket && u->dev_bound);
    assert_int_equal(u->ns_flags, s.ns_flags);
    assert_int_equal(u->uid, s.uid);
    assert_int_equal(u->gid, s.gid);
    assert_int_equal(u->landlock_abi, 4);
    assert_int_equal(u->proxy_port, 3128);
    assert_int_equal(u->nrlimits, 2);
    assert_memory_equal(u->rlimits, s.rlimits, sizeof(rl_));
    assert_int_equal(u->filter->len, 2);
    assert_memory_equal(u->filter->filter, prog_, sizeof(prog_));
    assert_int_equal(u->fs->n, 3);
    assert_null(u->fs->ops[0].path);
    assert_string_equal(u->fs->ops[1].path, "/tmp");
    assert_string_equal(u->fs->ops[1].arg, "mode=1777");
    assert_true(u->fs->ops[1].optional);
    assert_int_equal(u->fs->ops[1].mode, 01777);
    assert_int_equal(u->fs->ops[1].slot, 3);
    assert_string_equal(u->fs->ops[2].arg2, "/work");
    /* descriptors travel beside the message, never in it */
    assert_int_equal(u->cgroup_dir, -1);
    assert_int_equal(u->cgroup_procs, -1);
    td_spawnmsg_free(&m);
    free(buf);
}

static void test_nulls_round_trip(void **state)
{
    (void)state;
    struct td_spawn s = {.argv = argv_, .envp = envp_, .cwd = "/c", .uid = (uid_t)-1};
    uint8_t *buf;
    size_t len;
    assert_int_equal(td_spawnmsg_pack(&s, &buf, &len), 0);
    struct td_spawnmsg m;
    assert_int_equal(td_spawnmsg_unpack(buf, len, &m), 0);
    assert_null(m.s.filter);
    assert_null(m.s.fs);
    assert_null(m.s.hide);
    assert_null(m.s.work_dir);
    assert_int_equal(m.s.nrlimits, 0);
    assert_int_equal(m.s.uid, (uid_t)-1);
    td_spawnmsg_free(&m);
    free(buf);
}

/* Every prefix is refused, and so is one byte more: checked to its end. */
static void test_truncated_and_trailing(void **state)
{
    (void)state;
    struct td_spawn s = sample();
    uint8_t *buf;
    size_t len;
    assert_int_equal(td_spawnmsg_pack(&s, &buf, &len), 0);
    struct td_spawnmsg m;
    for (size_t n = 0; n < len; n++)
        assert_int_equal(td_spawnmsg_unpack(buf, n, &m), -EINVAL);
    uint8_t *more = malloc(len + 1);
    memcpy(more, buf, len);
    more[len] = 0;
    assert_int_equal(td_spawnmsg_unpack(more, len + 1, &m), -EINVAL);
    free(more);
    free(buf);
}

/* Each byte flipped in turn: refused or unpacked, never a crash (the
 * sanitizers watch), and what unpacks is whole. */
static void test_flipped_bytes(void **state)
{
    (void)state;
    struct td_spawn s = sample();
    uint8_t *buf;
    size_t len;
    assert_int_equal(td_spawnmsg_pack(&s, &buf, &len), 0);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            buf[i] ^= (uint8_t)(1u << bit);
            struct td_spawnmsg m;
            if (td_spawnmsg_unpack(buf, len, &m) == 0) {
                assert_non_null(m.s.argv[0]);
                assert_non_null(m.s.cwd);
                td_spawnmsg_free(&m);
            }
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
    free(buf);
}

static void test_too_big(void **state)
{
    (void)state;
    size_t n = TD_SPAWNMSG_MAX;
    char *big = malloc(n);
    memset(big, 'x', n - 1);
    big[n - 1] = '\0';
    char *env[] = {big, NULL};
    struct td_spawn s = {.argv = argv_, .envp = env, .cwd = "/c"};
    uint8_t *buf = NULL;
    size_t len;
    assert_int_equal(td_spawnmsg_pack(&s, &buf, &len), -E2BIG);
    assert_null(buf);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_nulls_round_trip),
        cmocka_unit_test(test_truncated_and_trailing),
        cmocka_unit_test(test_flipped_bytes),
        cmocka_unit_test(test_too_big),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
