/*
 * test_kbtf.c - struct task_struct's offsets from BTF (confine/kbtf.c): a
 * small BTF made here (plain members, bitfield-encoded ones, no such
 * struct, cut short, bad magic, an unknown kind), and the running
 * kernel's own, against libbpf's reading of it where libbpf is built in.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <linux/btf.h>
#include <unistd.h>

#ifdef TD_TEST_LIBBPF
#include <bpf/btf.h>
#endif

#include "kbtf.h"

/* A BTF blob: an int, then struct NAME { int tgid @tgid_bits; ptr
 * real_parent @parent_bits; }; kflag: the members' offsets encoded as a
 * bitfield struct's are. */
struct blob {
    unsigned char b[512];
    size_t len;
};

static void blob_make(struct blob *o, const char *name, uint32_t tgid_bits, uint32_t parent_bits,
                      int kflag, unsigned extra_kind)
{
    static const char strs_tail[] = "int\0tgid\0real_parent";
    char strs[128] = {0};
    size_t sl = 1; /* offset 0: the empty name */
    size_t n_int = sl;
    memcpy(strs + sl, strs_tail, sizeof(strs_tail));
    size_t n_tgid = n_int + 4, n_parent = n_tgid + 5;
    sl += sizeof(strs_tail);
    size_t n_name = sl;
    strcpy(strs + sl, name);
    sl += strlen(name) + 1;
    unsigned char types[256];
    size_t tl = 0;
    struct btf_type t = {.name_off = (uint32_t)n_int, .info = BTF_KIND_INT << 24, .size = 4};
    memcpy(types + tl, &t, sizeof(t)), tl += sizeof(t);
    uint32_t enc = 32;
    memcpy(types + tl, &enc, 4), tl += 4;
    if (extra_kind) {
        struct btf_type x = {.info = extra_kind << 24};
        memcpy(types + tl, &x, sizeof(x)), tl += sizeof(x);
    }
    struct btf_type s = {.name_off = (uint32_t)n_name,
                         .info = ((uint32_t)kflag << 31) | (BTF_KIND_STRUCT << 24) | 2,
                         .size = 64};
    memcpy(types + tl, &s, sizeof(s)), tl += sizeof(s);
    struct btf_member m[2] = {{.name_off = (uint32_t)n_tgid,
                               .type = 1,
                               .offset = kflag ? (tgid_bits | (0u << 24)) : tgid_bits},
                              {.name_off = (uint32_t)n_parent, .type = 1, .offset = parent_bits}};
    memcpy(types + tl, m, sizeof(m)), tl += sizeof(m);
    struct btf_header h = {.magic = BTF_MAGIC,
                           .version = BTF_VERSION,
                           .hdr_len = sizeof(h),
                           .type_off = 0,
                           .type_len = (uint32_t)tl,
                           .str_off = (uint32_t)tl,
                           .str_len = (uint32_t)sl};
    memcpy(o->b, &h, sizeof(h));
    memcpy(o->b + sizeof(h), types, tl);
    memcpy(o->b + sizeof(h) + tl, strs, sl);
    o->len = sizeof(h) + tl + sl;
}

static void found_in_a_small_btf(void **state)
{
    (void)state;
    struct blob o;
    uint32_t tg = 0, pa = 0;
    blob_make(&o, "task_struct", 64, 128, 0, 0);
    assert_int_equal(td_kbtf_task_offsets_in(o.b, o.len, &tg, &pa), 0);
    assert_int_equal(tg, 8);
    assert_int_equal(pa, 16);
    /* kind_flag: the offset in the low 24 bits */
    blob_make(&o, "task_struct", 96, 160, 1, 0);
    assert_int_equal(td_kbtf_task_offsets_in(o.b, o.len, &tg, &pa), 0);
    assert_int_equal(tg, 12);
    assert_int_equal(pa, 20);
    /* a kind with nothing after its header, skipped over */
    blob_make(&o, "task_struct", 64, 128, 0, BTF_KIND_PTR);
    assert_int_equal(td_kbtf_task_offsets_in(o.b, o.len, &tg, &pa), 0);
    assert_int_equal(pa, 16);
}

static void refused(void **state)
{
    (void)state;
    struct blob o;
    uint32_t tg = 0, pa = 0;
    blob_make(&o, "other_struct", 64, 128, 0, 0);
    assert_int_equal(td_kbtf_task_offsets_in(o.b, o.len, &tg, &pa), -ENOENT);
    blob_make(&o, "task_struct", 64, 130, 0, 0); /* not on a byte */
    assert_int_equal(td_kbtf_task_offsets_in(o.b, o.len, &tg, &pa), -ENOENT);
    blob_make(&o, "task_struct", 64, 128, 0, 31); /* a kind unknown to it */
    assert_int_equal(td_kbtf_task_offsets_in(o.b, o.len, &tg, &pa), -EINVAL);
    blob_make(&o, "task_struct", 64, 128, 0, 0);
    for (size_t cut = 0; cut < o.len; cut++) /* cut anywhere: never read past */
        assert_true(td_kbtf_task_offsets_in(o.b, cut, &tg, &pa) < 0);
    o.b[0] ^= 0xff; /* not its magic */
    assert_int_equal(td_kbtf_task_offsets_in(o.b, o.len, &tg, &pa), -EINVAL);
}

static void the_running_kernel(void **state)
{
    (void)state;
    uint32_t tg = 0, pa = 0;
    int rc = td_kbtf_task_offsets(&tg, &pa);
    if (access("/sys/kernel/btf/vmlinux", R_OK) < 0) {
        assert_true(rc < 0);
        skip();
    }
    assert_int_equal(rc, 0);
#ifdef TD_TEST_LIBBPF
    struct btf *b = btf__load_vmlinux_btf();
    assert_non_null(b);
    const struct btf_type *t =
        btf__type_by_id(b, btf__find_by_name_kind(b, "task_struct", BTF_KIND_STRUCT));
    const struct btf_member *m = btf_members(t);
    uint32_t want_tg = 0, want_pa = 0;
    for (int i = 0; i < btf_vlen(t); i++) {
        const char *n = btf__name_by_offset(b, m[i].name_off);
        if (strcmp(n, "tgid") == 0)
            want_tg = btf_member_bit_offset(t, (uint32_t)i) / 8;
        if (strcmp(n, "real_parent") == 0)
            want_pa = btf_member_bit_offset(t, (uint32_t)i) / 8;
    }
    btf__free(b);
    assert_int_equal(tg, want_tg);
    assert_int_equal(pa, want_pa);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(found_in_a_small_btf),
        cmocka_unit_test(refused),
        cmocka_unit_test(the_running_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
