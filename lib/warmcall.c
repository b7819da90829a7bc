/*
 * warmcall.c - a warm call's process made its own (warmcall.h).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "warmcall.h"

int te_warm_drop_bounding(void)
{
    /* every capability the kernel knows: EINVAL past the last one */
    for (unsigned long cap = 0;; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
            return errno != EINVAL || cap == 0 ? -1 : 0;
}

int te_warm_call_identity(const struct te_warm_id *id, unsigned long nproc)
{
    if (id->set &&
        (setresgid(id->gid, id->gid, id->gid) < 0 || setresuid(id->uid, id->uid, id->uid) < 0 ||
         prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0))
        return -1;
    if (nproc) {
        struct rlimit r = {nproc, nproc};
        if (setrlimit(RLIMIT_NPROC, &r) < 0)
            return -1;
    }
    return 0;
}

int te_warm_fence(int ll_abi)
{
    /* the smallest ruleset there is: it handles only making block devices
     * (which needs CAP_MKNOD, gone by then anyway) and allows nothing; the
     * domain is what counts */
    struct {
        uint64_t fs, net, scoped;
    } attr = {1ULL << 11 /* LANDLOCK_ACCESS_FS_MAKE_BLOCK */, 0, 0};
    if (ll_abi <= 0)
        return 0;
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr.fs), 0);
    if (rs < 0)
        return -1;
    int rc = (int)syscall(SYS_landlock_restrict_self, rs, 0);
    int e = errno;
    close(rs);
    errno = e;
    return rc < 0 ? -1 : 0;
}

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

int te_warm_stack_filter(void)
{
#ifdef NATIVE_ARCH
    enum { EPERM_ = SECCOMP_RET_ERRNO | EPERM, ENOSYS_ = SECCOMP_RET_ERRNO | ENOSYS };
    const unsigned nsflags = CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                             CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
#define DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, EPERM_)
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, EPERM_),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* x32 */
        BPF_STMT(BPF_RET | BPF_K, EPERM_),
#endif
        DENY(SYS_unshare),
        DENY(SYS_setns),
        DENY(SYS_mount),
        DENY(SYS_umount2),
        DENY(SYS_pivot_root),
        DENY(SYS_open_tree),
        DENY(SYS_move_mount),
        DENY(SYS_fsopen),
        DENY(SYS_fsmount),
        DENY(SYS_fsconfig),
        DENY(SYS_fspick),
        DENY(SYS_mount_setattr),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, ENOSYS_),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, nsflags, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, EPERM_),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
#undef DENY
    struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int te_warm_drop_caps(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    return (int)syscall(SYS_capset, &h, d);
}
