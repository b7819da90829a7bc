/*
 * sandbox_spec.h - what a call's process is to be (struct td_spawn): its
 * argv and environment, namespaces, view of the file system, user, limits,
 * filter. spawndesc.c fills it in, sandbox.c and sandbox_mounts.c carry it
 * out. A header of its own so that the child's steps in sandbox_mounts.c
 * need none of sandbox.h's functions.
 */
#ifndef TD_SANDBOX_SPEC_H
#define TD_SANDBOX_SPEC_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

struct td_rlimit {
    int resource;
    struct rlimit lim;
};
/* A call's view of the file system (fsview.c builds it, step 7c runs it):
 * a list of operations run in order in the child's mount namespace. The
 * slots are descriptors the child opens first, before anything covers what
 * they name; slot 0 is always the call's directory (td_spawn.cwd). */
enum td_fs_kind {
    TD_FS_OPEN,    /* path into slot */
    TD_FS_TMPFS,   /* a tmpfs at path with options arg (mode, size) */
    TD_FS_MKDIR,   /* path, mode */
    TD_FS_SYMLINK, /* path -> arg */
    TD_FS_FILE,    /* an empty file at path (a mount point), mode */
    TD_FS_HIDERS,  /* an empty mode-0 directory and file made under path,
                      held in slots TD_FS_SLOT_HDIR/HFILE; mode 1: removed */
    TD_FS_BIND,    /* slot bound over path (recursively with mode 1) */
    TD_FS_CHAIN,   /* the directories from arg (exclusive) down to path,
                      mode 0711; path itself a file when mode is 1, or when
                      mode is 2 and slot holds no directory */
    TD_FS_CALLDIR, /* the chain from arg down to arg2 + cwd, slot 0 bound there */
    TD_FS_PIVOT,   /* path becomes / (the old root detached) */
    TD_FS_RDONLY,  /* every mount read-only (mount_setattr, recursive) */
    TD_FS_RDWR,    /* path's mount writable again (arg2 + cwd when path is NULL) */
    TD_FS_COVER,   /* the hider of path's kind (HDIR or HFILE) bound over it; a
                      symbolic link on the way: ELOOP (a narrowed view's hide) */
    TD_FS_NODE,    /* the character device in slot made again at path (mknod
                      of its number, mode); where that is refused (a user
                      namespace, no CAP_MKNOD) or td_spawn.dev_bound, an
                      empty file at path with slot bound over it (FILE,
                      then BIND) */
};
#define TD_FS_LAST TD_FS_NODE
#define TD_FS_SLOTS 48
#define TD_FS_SLOT_HDIR 1
#define TD_FS_SLOT_HFILE 2
struct td_fs_op {
    unsigned char kind;
    bool optional; /* ENOENT or ENOTDIR on the target: skipped */
    short slot;
    unsigned mode;
    const char *path, *arg, *arg2;
};
struct td_fsplan {
    const struct td_fs_op *ops;
    size_t n;
};
struct td_spawn {
    char *const *argv; /* what is exec'd: the tool, or the init then the tool */
    bool init;         /* argv[0] is toolexecd-init: keep the report pipe open */
    char *const *envp;
    const char *cwd;
    const char *run_dir; /* where it starts, in its view; NULL: cwd (toolexec sandbox's) */
    int ns_flags;        /* CLONE_NEWPID, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER */
    /* With CLONE_NEWNS: hidden under a tmpfs, cwd (inside it) bound back */
    const char *work_dir;
    const char *const *hide;       /* NULL-terminated: covered by /dev/null */
    const char *uid_map, *gid_map; /* written by the child with CLONE_NEWUSER */
    uid_t uid;                     /* (uid_t)-1: keep the daemon's */
    gid_t gid;
    const struct td_rlimit *rlimits;
    size_t nrlimits;
    int cgroup_dir;                  /* the call's cgroup, born into; -1: none */
    int cgroup_procs;                /* its cgroup.procs, where it cannot be born there */
    const struct sock_fprog *filter; /* seccomp filter attached last; NULL: none */
    bool hand_over;                  /* the child hands descriptors up (report.h, TD_HAND_*) */
    /* load filter with a notification listener and hand it up
     * (TD_HAND_SECCOMP); needs hand_over */
    bool filter_notify;
    /* the call's file-system view */
    const struct td_fsplan *fs;  /* with CLONE_NEWNS: the call's view; NULL: the host's */
    int landlock_abi;            /* > 0: restrict writes with Landlock (step 11a) */
    const char *const *ll_write; /* NULL-terminated: writable beneath (and cwd) */
    /* egress (proxy.c): > 0, with CLONE_NEWNET and hand_over: a listener
     * on 127.0.0.1:proxy_port handed up (step 7d); with CLONE_NEWNET,
     * loopback is up either way */
    int proxy_port;
    /* warm templates (template.c): stdin is one end of a Unix stream socket,
     * not a pipe, so frames can carry descriptors both ways */
    bool in_socket;
    /* the view's device nodes bound, never made again (TD_FS_NODE): a
     * template's, whose warm calls clone what is mounted below its /dev
     * into their own (lib/warmview.c) */
    bool dev_bound;
    /* toolexec sandbox's: before the user is dropped, the child waits
     * until this word (in the memory it shares with us) is non-zero: its
     * file-system refusal watch, loaded meanwhile on another thread, is on
     * (td_sandbox_gate_open); NULL: no wait */
    int *gate;
};

#endif
