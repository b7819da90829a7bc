/*
 * kbtf.c - struct task_struct's offsets from the kernel's BTF (kbtf.h), for
 * fswatch.bpf.c's walk up a process's ancestors.
 *
 * Why not libbpf's CO-RE, which does the same: it parses and checks every
 * one of the kernel's types first, 17 ms a start here (126,700 types, a
 * 5.5 MB file read 4 KiB at a time), which was most of a `toolexec sandbox`
 * run as root (60 ms against 12 without it). This walks the type records
 * once, checking each record's bounds, until the struct is found, reading
 * the file a window at a time: the struct is among its first types (the
 * 113th of 126,700 here), so a few reads of 4 KiB find it, where mapping
 * the whole file (its 1,350 pages mapped at once, and unmapped) cost a
 * root start 0.2 ms. A BTF whose struct is further on is mapped whole
 * after all. The record layout is the kernel's own (linux/btf.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <linux/btf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kbtf.h"

#define KBTF_PATH "/sys/kernel/btf/vmlinux"
#define KBTF_MAX (64u << 20) /* a kernel's BTF is some MiB; past this, not one */
/* reads of a window before the file is mapped whole: the struct and its
 * members' names here take 3 */
#define KBTF_READS 32

/* The bytes after a type record's header, by its kind; -1: a kind this
 * scan does not know (a newer kernel's), so nothing after it is read. */
static long extra(const struct btf_type *t)
{
    unsigned vlen = BTF_INFO_VLEN(t->info);
    switch (BTF_INFO_KIND(t->info)) {
    case BTF_KIND_INT:
    case BTF_KIND_VAR:
    case BTF_KIND_DECL_TAG:
        return 4;
    case BTF_KIND_PTR:
    case BTF_KIND_FWD:
    case BTF_KIND_TYPEDEF:
    case BTF_KIND_VOLATILE:
    case BTF_KIND_CONST:
    case BTF_KIND_RESTRICT:
    case BTF_KIND_FUNC:
    case BTF_KIND_FLOAT:
    case BTF_KIND_TYPE_TAG:
        return 0;
    case BTF_KIND_ARRAY:
        return sizeof(struct btf_array);
    case BTF_KIND_STRUCT:
    case BTF_KIND_UNION:
        return (long)vlen * (long)sizeof(struct btf_member);
    case BTF_KIND_ENUM:
        return (long)vlen * (long)sizeof(struct btf_enum);
    case BTF_KIND_FUNC_PROTO:
        return (long)vlen * (long)sizeof(struct btf_param);
    case BTF_KIND_DATASEC:
        return (long)vlen * (long)sizeof(struct btf_var_secinfo);
#ifdef BTF_KIND_ENUM64
    case BTF_KIND_ENUM64:
        return (long)vlen * (long)sizeof(struct btf_enum64);
#endif
    default:
        return -1;
    }
}

/* Windowed reads of the file: the bytes a sysfs read gives at most. */
#define WIN 4096u

/* Where the scan reads the BTF: all of it in memory, or its file a window
 * at a time (one for the type records, one for the names, which are far
 * apart), at most reads_left reads. */
struct src {
    const unsigned char *mem;
    size_t len;
    int fd;
    unsigned reads_left;
    int err; /* a read that failed: -errno; -E2BIG: no reads left */
    struct win {
        size_t off, n;
        unsigned char b[WIN];
    } w[2];
};

/* The n bytes (at most WIN) at off, through window w; NULL past the end
 * or when a read failed (s->err). */
static const void *bytes(struct src *s, int w, size_t off, size_t n)
{
    if (off > s->len || s->len - off < n)
        return NULL;
    if (s->mem)
        return s->mem + off;
    struct win *v = &s->w[w];
    if (off >= v->off && off + n <= v->off + v->n)
        return v->b + (off - v->off);
    /* from a multiple of WIN, so that what is just before off is there
     * too (the names a struct's members have, out of order), unless that
     * would cut these bytes off */
    v->off = off % WIN + n <= WIN ? off - off % WIN : off;
    v->n = 0;
    while (v->n < off - v->off + n) {
        if (!s->reads_left) {
            s->err = -E2BIG;
            return NULL;
        }
        s->reads_left--;
        ssize_t r = pread(s->fd, v->b + v->n, WIN - v->n, (off_t)(v->off + v->n));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            s->err = r < 0 ? -errno : -EIO;
            return NULL;
        }
        v->n += (size_t)r;
    }
    return v->b + (off - v->off);
}

/* Is the name at off of the string section (strs, len bytes) want? */
static bool named(struct src *s, size_t strs, uint32_t len, uint32_t off, const char *want)
{
    size_t n = strlen(want) + 1;
    const char *p = off < len && len - off >= n ? bytes(s, 1, strs + off, n) : NULL;
    return p && memcmp(p, want, n) == 0;
}

static int scan(struct src *s, uint32_t *tgid, uint32_t *real_parent)
{
    const void *hp = bytes(s, 0, 0, sizeof(struct btf_header));
    struct btf_header h;
    if (!hp)
        return s->err ? s->err : -EINVAL;
    memcpy(&h, hp, sizeof(h));
    size_t len = s->len;
    if (h.magic != BTF_MAGIC || h.hdr_len < sizeof(h) || h.hdr_len > len ||
        (uint64_t)h.type_off + h.type_len > len - h.hdr_len ||
        (uint64_t)h.str_off + h.str_len > len - h.hdr_len)
        return -EINVAL;
    size_t types = (size_t)h.hdr_len + h.type_off, strs = (size_t)h.hdr_len + h.str_off;
    for (size_t at = 0; at + sizeof(struct btf_type) <= h.type_len;) {
        const void *tp = bytes(s, 0, types + at, sizeof(struct btf_type));
        struct btf_type t;
        if (!tp)
            break;
        memcpy(&t, tp, sizeof(t));
        long more = extra(&t);
        if (more < 0 || at + sizeof(t) + (size_t)more > h.type_len)
            return -EINVAL;
        if (BTF_INFO_KIND(t.info) == BTF_KIND_STRUCT &&
            named(s, strs, h.str_len, t.name_off, "task_struct")) {
            int found = 0;
            for (unsigned i = 0; i < BTF_INFO_VLEN(t.info) && !s->err; i++) {
                const void *mp = bytes(s, 0, types + at + sizeof(t) + i * sizeof(struct btf_member),
                                       sizeof(struct btf_member));
                struct btf_member m;
                if (!mp)
                    break;
                memcpy(&m, mp, sizeof(m));
                /* kind_flag: the offset's low 24 bits, the bitfield size above */
                uint32_t bits = BTF_INFO_KFLAG(t.info) ? BTF_MEMBER_BIT_OFFSET(m.offset) : m.offset;
                if (bits % 8)
                    continue;
                if (named(s, strs, h.str_len, m.name_off, "tgid"))
                    *tgid = bits / 8, found |= 1;
                else if (named(s, strs, h.str_len, m.name_off, "real_parent"))
                    *real_parent = bits / 8, found |= 2;
            }
            return s->err ? s->err : found == 3 ? 0 : -ENOENT;
        }
        if (s->err)
            break;
        at += sizeof(t) + (size_t)more;
    }
    return s->err ? s->err : -ENOENT;
}

int td_kbtf_task_offsets_in(const void *btf, size_t len, uint32_t *tgid, uint32_t *real_parent)
{
    struct src s = {.mem = btf, .len = len, .fd = -1};
    return scan(&s, tgid, real_parent);
}

int td_kbtf_task_offsets_fd(int fd, size_t len, unsigned reads, uint32_t *tgid,
                            uint32_t *real_parent)
{
    struct src s = {.len = len, .fd = fd, .reads_left = reads};
    return scan(&s, tgid, real_parent);
}

int td_kbtf_task_offsets(uint32_t *tgid, uint32_t *real_parent)
{
    int fd = open(KBTF_PATH, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    size_t size =
        rc == 0 && st.st_size > 0 && (uint64_t)st.st_size <= KBTF_MAX ? (size_t)st.st_size : 0;
    if (rc == 0 && !size)
        rc = -EFBIG;
    /* its first windows, which hold the struct in every kernel seen */
    if (rc == 0)
        rc = td_kbtf_task_offsets_fd(fd, size, KBTF_READS, tgid, real_parent);
    if (rc != -E2BIG) {
        close(fd);
        return rc;
    }
    rc = 0;
    /* mapped where the kernel lets it be (Linux 6.16): 0.2 ms, where
     * reading it costs 1,350 reads of 4 KiB, 11 to 19 ms here */
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
        close(fd);
        rc = td_kbtf_task_offsets_in(map, size, tgid, real_parent);
        munmap(map, size);
        return rc;
    }
    char *buf = rc == 0 ? malloc(size) : NULL;
    size_t got = 0;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    while (rc == 0 && got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = r < 0 ? -errno : -EIO;
        else
            got += (size_t)r;
    }
    close(fd);
    if (rc == 0)
        rc = td_kbtf_task_offsets_in(buf, size, tgid, real_parent);
    free(buf);
    return rc;
}
