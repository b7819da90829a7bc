/*
 * test_kbtf.c - struct task_struct's offsets from BTF (confine/kbtf.c): a
 * small BTF made here (plain members, bitfield-encoded ones, no such
 * struct, cut short, bad magic, an unknown kind), the same read from a
 * file a window at a time (the struct far into it: found within its reads,
 * or -E2BIG past them), and the running kernel's own, against libbpf's
 * reading of it where libbpf is built in.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A BTF of fill ints, then struct task_struct { pad members, then tgid
 * @8, real_parent @16 }, its names after the ints' (so far apart): as a
 * file, the struct fill * 16 bytes in, its names in another window. */
static FILE *far_make(unsigned fill, unsigned pad, size_t *len)
{
    static const char strs[] = "\0int\0tgid\0real_parent\0task_struct\0x";
    size_t tl = (size_t)fill * 16 + sizeof(struct btf_type) + (pad + 2) * sizeof(struct btf_member);
    unsigned char *b = calloc(1, sizeof(struct btf_header) + tl + sizeof(strs));
    assert_non_null(b);
    struct btf_header h = {.magic = BTF_MAGIC,
                           .version = BTF_VERSION,
                           .hdr_len = sizeof(h),
                           .type_len = (uint32_t)tl,
                           .str_off = (uint32_t)tl,
                           .str_len = sizeof(strs)};
    unsigned char *p = b + sizeof(h);
    memcpy(b, &h, sizeof(h));
    for (unsigned i = 0; i < fill; i++) {
        struct btf_type t = {.name_off = 1, .info = BTF_KIND_INT << 24, .size = 4};
        uint32_t enc = 32;
        memcpy(p, &t, sizeof(t)), p += sizeof(t);
        memcpy(p, &enc, 4), p += 4;
    }
    struct btf_type s = {.name_off = 22, .info = (BTF_KIND_STRUCT << 24) | (pad + 2), .size = 64};
    memcpy(p, &s, sizeof(s)), p += sizeof(s);
    for (unsigned i = 0; i < pad; i++) {
        struct btf_member m = {.name_off = 34, .type = 1, .offset = 0};
        memcpy(p, &m, sizeof(m)), p += sizeof(m);
    }
    struct btf_member m[2] = {{.name_off = 5, .type = 1, .offset = 64},
                              {.name_off = 10, .type = 1, .offset = 128}};
    memcpy(p, m, sizeof(m)), p += sizeof(m);
    memcpy(p, strs, sizeof(strs));
    *len = sizeof(h) + tl + sizeof(strs);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, *len, f), *len);
    assert_int_equal(fflush(f), 0);
    free(b);
    return f;
}

static void read_a_window_at_a_time(void **state)
{
    (void)state;
    uint32_t tg = 0, pa = 0;
    size_t len;
    /* the struct 32 KiB in (8 windows), its members across a window's end */
    FILE *f = far_make(2048, 400, &len);
    assert_int_equal(td_kbtf_task_offsets_fd(fileno(f), len, 32, &tg, &pa), 0);
    assert_int_equal(tg, 8);
    assert_int_equal(pa, 16);
    /* past its reads: not found, and said so (the caller maps it whole) */
    tg = pa = 0;
    assert_int_equal(td_kbtf_task_offsets_fd(fileno(f), len, 4, &tg, &pa), -E2BIG);
    assert_int_equal(tg, 0);
    /* cut short: never read past what it is told is there */
    for (size_t cut = 0; cut < len; cut += 997)
        assert_true(td_kbtf_task_offsets_fd(fileno(f), cut, 64, &tg, &pa) < 0);
    fclose(f);
    /* first: a few reads */
    f = far_make(1, 0, &len);
    assert_int_equal(td_kbtf_task_offsets_fd(fileno(f), len, 2, &tg, &pa), 0);
    assert_int_equal(pa, 16);
    fclose(f);
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
        cmocka_unit_test(read_a_window_at_a_time),
        cmocka_unit_test(the_running_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
