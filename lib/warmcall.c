/*
 * warmcall.c - a warm call's process made its own (warmcall.h).
 */
#include <errno.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "warmcall.h"

int te_warm_call_identity(const struct te_warm_id *id, unsigned long nproc)
{
    /* every capability the kernel knows: EINVAL past the last one */
    for (unsigned long cap = 0;; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
            if (errno != EINVAL || cap == 0)
                return -1;
            break;
        }
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
