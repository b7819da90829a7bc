/*
 * cgroup.h - a cgroup v2 directory per call.
 */
#ifndef TD_CGROUP_H
#define TD_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* cgroup.c: a cgroup v2 directory per call where the daemon has one to
 * manage (delegated by systemd, or --cgroup DIR). */
struct td_cgroup_info {
    char mount[256];   /* the cgroup2 mount point, "" if none */
    char own[1024];    /* our own cgroup path */
    char dir[1300];    /* the base the calls' cgroups would go under */
    bool delegated;    /* Delegate=yes (trusted/user.delegate) or --cgroup */
    bool writable;     /* we could make, join and kill a child there */
    bool kill;         /* cgroup.kill exists (Linux 5.14) */
    bool memory, pids; /* controllers available in dir */
    bool usable;       /* all of the above that the calls need */
    char why[80];      /* why not usable */
};
void td_cgroup_probe(const char *dir /* NULL: our own */, struct td_cgroup_info *info);
/* At start: pick the base, move out of it, enable memory and pids for the
 * calls, clean up after a killed predecessor. -1 only when --cgroup DIR was
 * given and cannot be used. */
int td_cgroup_setup(const char *dir);
bool td_cgroup_active(void);
bool td_cgroup_delegated(void); /* by systemd (Delegate=yes), not --cgroup */
bool td_cgroup_memory(void);    /* memory_mb is memory.max */
bool td_cgroup_pids(void);      /* processes is pids.max */
const char *td_cgroup_base(void);
struct td_cgroup;
/* A call's cgroup with its limits (0: none); NULL with *err an errno. */
struct td_cgroup *td_cgroup_new(uint64_t memory_mb, uint64_t pids_max, int *err);
/* The directory (for CLONE_INTO_CGROUP) and cgroup.procs (for a child to
 * join with write("0")); -1 for no cgroup. */
int td_cgroup_dir_fd(const struct td_cgroup *c);
int td_cgroup_procs_fd(const struct td_cgroup *c);
void td_cgroup_kill(struct td_cgroup *c);
/* How many times the kernel's OOM killer acted in it (memory.events). */
long long td_cgroup_oom_kills(const struct td_cgroup *c);
/* How many forks pids.max refused in it (pids.events max). */
long long td_cgroup_pids_refusals(const struct td_cgroup *c);
/* Kill what is left, and remove it once empty (without blocking). */
void td_cgroup_release(struct td_cgroup *c);
void td_cgroup_close(void);

#endif
