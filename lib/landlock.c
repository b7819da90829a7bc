/*
 * landlock.c - the Landlock layer of a call's file-system view:
 * writes only beneath the call's directory and the paths its view makes
 * writable. One piece of code for both places a call is set up: the
 * daemon's spawn child (sandbox.c, step 11a), which shares the daemon's
 * memory until exec and so may only make system calls, and a warm call's
 * process (warm.c). Hence only system calls here: no malloc, no stdio.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "toolexec.h"

/* Defined here: Debian's headers stop at ABI 2 (bookworm). */
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#define LL_CREATE_RULESET_VERSION 1U
#define LL_RULE_PATH_BENEATH 1
#define LL_WRITE_FILE (1ULL << 1)
#define LL_TRUNCATE (1ULL << 14) /* ABI 3 */
/* remove_dir, remove_file, make_char, make_dir, make_reg, make_sock,
 * make_fifo, make_block, make_sym: bits 4 to 12; refer (ABI 2): 13 */
#define LL_TREE_WRITES (0x1ff0ULL)
#define LL_REFER (1ULL << 13)
struct ll_ruleset_attr {
    uint64_t handled_access_fs, handled_access_net, scoped;
};
struct ll_path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

int te_landlock_abi(void)
{
    long r = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    return r > 0 ? (int)r : 0;
}

/* A path that is not there is skipped: nothing to write beneath. */
static int allow(int ruleset, const char *path, uint64_t all, uint64_t file)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    int rc = fstat(fd, &st);
    struct ll_path_beneath pb = {.allowed_access = S_ISDIR(st.st_mode) ? all : file,
                                 .parent_fd = fd};
    if (rc == 0)
        rc = (int)syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int te_landlock_writes(int abi, const char *const *paths)
{
    uint64_t file = LL_WRITE_FILE | (abi >= 3 ? LL_TRUNCATE : 0);
    uint64_t all = file | LL_TREE_WRITES | (abi >= 2 ? LL_REFER : 0);
    struct ll_ruleset_attr attr = {.handled_access_fs = all};
    /* the attribute's size the kernel of that ABI knows */
    size_t size = abi >= 6 ? 24 : abi >= 4 ? 16 : 8;
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (rs < 0)
        return -errno;
    int rc = allow(rs, ".", all, file); /* the call's directory: the caller is in it */
    for (const char *const *p = paths; rc == 0 && p && *p; p++)
        rc = allow(rs, *p, all, file);
    if (rc == 0)
        rc = (int)syscall(SYS_landlock_restrict_self, rs, 0);
    int e = errno;
    close(rs);
    errno = e;
    return rc < 0 ? -e : 0;
}
