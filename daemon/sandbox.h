/*
 * sandbox.h - spawning a call's process with its isolation.
 */
#ifndef TD_SANDBOX_H
#define TD_SANDBOX_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/resource.h>

#include "report.h"

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
                      mode 0711; path itself a file when mode is 1 */
    TD_FS_CALLDIR, /* the chain from arg down to arg2 + cwd, slot 0 bound there */
    TD_FS_PIVOT,   /* path becomes / (the old root detached) */
    TD_FS_RDONLY,  /* every mount read-only (mount_setattr, recursive) */
    TD_FS_RDWR,    /* path's mount writable again (arg2 + cwd when path is NULL) */
};
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
    int ns_flags; /* CLONE_NEWPID, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER */
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
    /* f3: load filter with a notification listener and hand it up
     * (TD_HAND_SECCOMP); needs hand_over */
    bool filter_notify;
    /* issue 11, the file-system view (f1) */
    const struct td_fsplan *fs;  /* with CLONE_NEWNS: the call's view; NULL: the host's */
    int landlock_abi;            /* > 0: restrict writes with Landlock (step 11a) */
    const char *const *ll_write; /* NULL-terminated: writable beneath (and cwd) */
    /* egress (proxy.c): > 0, with CLONE_NEWNET and hand_over: loopback up
     * and a listener on 127.0.0.1:proxy_port handed up (step 7c) */
    int proxy_port;
    /* warm templates (template.c): stdin is one end of a Unix stream socket,
     * not a pipe, so frames can carry descriptors both ways */
    bool in_socket;
};
struct td_child {
    pid_t pid;
    int in, out, err; /* parent ends: worker's stdin, stdout, stderr */
    int report;       /* read end of the report pipe (report.h) */
    /* What the child handed up before exec, by TD_HAND_* kind; -1: nothing.
     * Close-on-exec, owned by the caller from here. */
    int handed[TD_HAND_COUNT];
};
/* 0 or -errno (the step that failed in *what): td_sandbox_pipes() and
 * td_sandbox_start() in one process (the templates; calls go through the
 * spawner, spawner.c, which runs the second half). */
int td_sandbox_spawn(const struct td_spawn *s, struct td_child *c, const char **what);
/* The daemon's half: the call's pipes (stdin a socket with in_socket), our
 * ends in *c (pid 0, nothing handed), the child's in theirs: its stdin,
 * stdout, stderr and report pipe. 0 or -errno. */
#define TD_SANDBOX_ENDS 4
int td_sandbox_pipes(bool in_socket, struct td_child *c, int theirs[TD_SANDBOX_ENDS]);
/* The other half: the child started with theirs (closed here in every
 * case) as the steps of sandbox.c; what it handed up in handed. The pid, or
 * -errno (the step in *what). */
pid_t td_sandbox_start(const struct td_spawn *s, int theirs[TD_SANDBOX_ENDS],
                       int handed[TD_HAND_COUNT], const char **what);
/* A spare (issue 21): s's steps up to its user (10) run now, in a process
 * of its own (a copy of our memory, not a share of it), which then waits on
 * ctl (its end of a SOCK_SEQPACKET pair, taken) for its call. Its report
 * pipe until then is report (taken). On ctl it says "R" (one byte) once
 * ready and hands up what it makes (td_sandbox_hand_over); it takes one
 * message: the call's four ends (td_sandbox_pipes' theirs) as descriptors
 * and its environment as the bytes (NUL-terminated strings, at most
 * TD_SPARE_ENV_MAX in all), and goes on to exec; ctl closes at exec. The
 * pid, or -errno (*what). */
#define TD_SPARE_ENV_MAX (128 * 1024)
pid_t td_sandbox_prepare(const struct td_spawn *s, int ctl, int report, const char **what);
/* What the child and its init reported, read without blocking at exit. */
struct td_report {
    bool failed;      /* set-up or exec failed: */
    const char *step; /*   at this step */
    int err;          /*   with this errno */
    bool have_status; /* the init reported the tool's wait status */
    int status;
    bool have_usage; /* the init reported the tool's resource use: */
    long user_ms, sys_ms, maxrss_kb;
};
void td_sandbox_report(int fd, struct td_report *r);
/* The records available now, added to *r (a non-blocking fd, while the
 * call runs): 1 once the status is in (the init's last word: the call's
 * processes are all gone), 0 for more to come, -1 at the end of the pipe
 * without it. */
int td_sandbox_report_more(int fd, struct td_report *r);
/* In the child only (system calls, no memory of the daemon's written):
 * hand fd up to the daemon as kind TD_HAND_*, where td_spawn.hand_over
 * asked for it. The daemon finds it in td_child.handed once
 * td_sandbox_spawn() returns; the child's copy stays its own. 0 or -1. */
int td_sandbox_hand_over(int kind, int fd);
/* SIGKILL the tool under the init `init` (its one child), leaving the init
 * to reap it and report its resource use. 0 when it was killed or is
 * already gone, -errno when the tool could not be found safely (the caller
 * kills the whole group instead). */
int td_sandbox_kill_tool(pid_t init);
/* The same for an init known by a pidfd (a warm call's PID 1, which is the
 * template's child, not ours). */
int td_sandbox_kill_tool_pidfd(int init_pidfd);
/* The pid the daemon sees behind a pidfd (its fdinfo): -1 once the process
 * has exited, 0 when unknown. */
pid_t td_sandbox_pidfd_pid(int fd);
/* Can a child be started with these namespace flags (CLONE_NEWPID,
 * CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET), and, with CLONE_NEWNS, make its
 * mounts private and mount a /proc of its own? 0 or -errno. Blocks until
 * the child is gone: for start-up only, before the reaper runs. */
int td_sandbox_probe(int ns_flags);

#endif
