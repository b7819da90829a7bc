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

struct td_rlimit {
    int resource;
    struct rlimit lim;
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
    /* warm templates (template.c): stdin is one end of a Unix stream socket,
     * not a pipe, so frames can carry descriptors both ways */
    bool in_socket;
};
struct td_child {
    pid_t pid;
    int in, out, err; /* parent ends: worker's stdin, stdout, stderr */
    int report;       /* read end of the report pipe (report.h) */
};
/* 0 or -errno (the step that failed in *what). */
int td_sandbox_spawn(const struct td_spawn *s, struct td_child *c, const char **what);
/* What the child and its init reported, read without blocking at exit. */
struct td_report {
    bool failed;      /* set-up or exec failed: */
    const char *step; /*   at this step */
    int err;          /*   with this errno */
    bool have_status; /* the init reported the tool's wait status */
    int status;
};
void td_sandbox_report(int fd, struct td_report *r);
/* Can a child be started with these namespace flags (CLONE_NEWPID,
 * CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET), and, with CLONE_NEWNS, make its
 * mounts private and mount a /proc of its own? 0 or -errno. Blocks until
 * the child is gone: for start-up only, before the reaper runs. */
int td_sandbox_probe(int ns_flags);

#endif
