/*
 * fswatch_rec.h - what fswatch.bpf.c and fswatch.c share: a watched
 * call's counters, a record, the bounds and the system calls watched
 * (x86-64's numbers).
 */
#ifndef TD_FSWATCH_REC_H
#define TD_FSWATCH_REC_H

#include <linux/types.h>

/* calls watched at once: the daemon's calls and spares, with room */
#define TD_FSW_CALLS_MAX 8192
/* the ring the records wait in for the daemon's loop (a run with few
 * calls takes less: their budgets' worth, fswatch.c) */
#define TD_FSW_RING_BYTES (1 << 20)
/* records per call; past them only counted */
#define TD_FSW_REFUSED_BUDGET 256
#define TD_FSW_NOENT_BUDGET 256
#define TD_FSW_PATH_MAX 256

/* the hashes of the last records sent, by hash: a repeat is not sent
 * again, so that a flood of a few paths leaves the budget to the others */
#define TD_FSW_RECENT 16

struct td_fsw_call {
    __u64 refused; /* EACCES, EPERM, EROFS: every one, listed or not */
    __u64 sent[2]; /* records sent: of those, of ENOENT */
    __u64 lost;    /* the ring was full */
    __u32 recent[TD_FSW_RECENT];
};

/* whose descendants are watched, and where struct task_struct keeps a
 * process's tgid and parent in this kernel (kbtf.c) */
struct td_fsw_self {
    __u32 tgid;
    __u32 off_tgid;
    __u32 off_parent;
};

#define TD_FSW_AT_FDCWD (-100)

struct td_fsw_rec {
    __u32 uid;
    __s32 err;
    __u32 nr;
    __u32 flags;
    __s32 dirfd; /* a relative path's directory: TD_FSW_AT_FDCWD, or a descriptor */
    __u32 pad;
    char path[TD_FSW_PATH_MAX];
};

enum {
    TD_FSW_NR_OPEN = 2,
    TD_FSW_NR_TRUNCATE = 76,
    TD_FSW_NR_RENAME = 82,
    TD_FSW_NR_MKDIR = 83,
    TD_FSW_NR_RMDIR = 84,
    TD_FSW_NR_CREAT = 85,
    TD_FSW_NR_LINK = 86,
    TD_FSW_NR_UNLINK = 87,
    TD_FSW_NR_SYMLINK = 88,
    TD_FSW_NR_CHMOD = 90,
    TD_FSW_NR_CHOWN = 92,
    TD_FSW_NR_LCHOWN = 94,
    TD_FSW_NR_MKNOD = 133,
    TD_FSW_NR_EXECVE = 59,
    TD_FSW_NR_OPENAT = 257,
    TD_FSW_NR_MKDIRAT = 258,
    TD_FSW_NR_MKNODAT = 259,
    TD_FSW_NR_FCHOWNAT = 260,
    TD_FSW_NR_UNLINKAT = 263,
    TD_FSW_NR_RENAMEAT = 264,
    TD_FSW_NR_LINKAT = 265,
    TD_FSW_NR_SYMLINKAT = 266,
    TD_FSW_NR_FCHMODAT = 268,
    TD_FSW_NR_RENAMEAT2 = 316,
    TD_FSW_NR_EXECVEAT = 322,
    TD_FSW_NR_OPENAT2 = 437,
};

#endif
