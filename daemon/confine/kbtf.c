/*
 * kbtf.c - struct task_struct's offsets from the kernel's BTF (kbtf.h), for
 * fswatch.bpf.c's walk up a process's ancestors.
 *
 * Why not libbpf's CO-RE, which does the same: it parses and checks every
 * one of the kernel's types first, 17 ms a start here (126,700 types, a
 * 5.5 MB file read 4 KiB at a time), which was most of a `toolexec sandbox`
 * run as root (60 ms against 12 without it). This maps the file and walks
 * the type records once, checking each record's bounds, until the struct
 * is found. The record layout is the kernel's own (linux/btf.h).
 */
#include <errno.h>
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

static const char *name_at(const char *strs, uint32_t len, uint32_t off)
{
    if (off >= len || !memchr(strs + off, '\0', len - off))
        return NULL;
    return strs + off;
}

int td_kbtf_task_offsets_in(const void *btf, size_t len, uint32_t *tgid, uint32_t *real_parent)
{
    const struct btf_header *h = btf;
    if (len < sizeof(*h) || h->magic != BTF_MAGIC || h->hdr_len < sizeof(*h) || h->hdr_len > len ||
        (uint64_t)h->type_off + h->type_len > len - h->hdr_len ||
        (uint64_t)h->str_off + h->str_len > len - h->hdr_len)
        return -EINVAL;
    const char *types = (const char *)btf + h->hdr_len + h->type_off;
    const char *strs = (const char *)btf + h->hdr_len + h->str_off;
    for (size_t at = 0; at + sizeof(struct btf_type) <= h->type_len;) {
        struct btf_type t;
        memcpy(&t, types + at, sizeof(t));
        long more = extra(&t);
        if (more < 0 || at + sizeof(t) + (size_t)more > h->type_len)
            return -EINVAL;
        const char *name = name_at(strs, h->str_len, t.name_off);
        if (BTF_INFO_KIND(t.info) == BTF_KIND_STRUCT && name && strcmp(name, "task_struct") == 0) {
            int found = 0;
            for (unsigned i = 0; i < BTF_INFO_VLEN(t.info); i++) {
                struct btf_member m;
                memcpy(&m, types + at + sizeof(t) + i * sizeof(m), sizeof(m));
                const char *mn = name_at(strs, h->str_len, m.name_off);
                /* kind_flag: the offset's low 24 bits, the bitfield size above */
                uint32_t bits = BTF_INFO_KFLAG(t.info) ? BTF_MEMBER_BIT_OFFSET(m.offset) : m.offset;
                if (!mn || bits % 8)
                    continue;
                if (strcmp(mn, "tgid") == 0)
                    *tgid = bits / 8, found |= 1;
                else if (strcmp(mn, "real_parent") == 0)
                    *real_parent = bits / 8, found |= 2;
            }
            return found == 3 ? 0 : -ENOENT;
        }
        at += sizeof(t) + (size_t)more;
    }
    return -ENOENT;
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
    /* mapped where the kernel lets it be (Linux 6.16): 0.15 ms, where
     * reading it costs 1,350 reads of 4 KiB, 11 to 19 ms here */
    void *map = rc == 0 ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
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
