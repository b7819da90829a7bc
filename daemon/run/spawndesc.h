/*
 * spawndesc.h - what a process of a tool is started with (sandbox.h's
 * td_spawn), built in one place for its three kinds: a cold call, a spare
 * made ahead for one (spares.c), and a warm tool's template. The limits in
 * force and the cgroup that carries some of them; argv with the init; the
 * limits as rlimits; the filter; the file-system view and Landlock; the id
 * maps of an unprivileged daemon; the daemon's sockets hidden.
 */
#ifndef TD_SPAWNDESC_H
#define TD_SPAWNDESC_H

#include <stdbool.h>
#include <sys/types.h>

#include "tool.h"
#include "sandbox.h"

struct td_cgroup;

enum td_spawn_kind { TD_SPAWN_CALL, TD_SPAWN_TEMPLATE };

struct td_spawndesc {
    struct td_spawn sp;
    struct td_limits limits; /* in force */
    bool cg_memory;          /* memory_mb is its cgroup's memory.max */
    /* what sp points to, owned */
    const char **argv;
    struct td_rlimit rl[6];
};

/* Once, with the socket paths known. */
void td_spawndesc_setup(void);
/* The limits in force for t (its own, else the daemon's defaults), the
 * processes raised by extra. */
void td_spawndesc_limits(const struct td_tool *t, unsigned extra, struct td_limits *lim);
/* The limits in force for t (its own, else the daemon's defaults), the
 * processes raised by extra; and a cgroup of its own in *cg when the
 * containment is by cgroup or a limit is the cgroup's (NULL: none).
 * 0 or -errno. */
int td_spawndesc_cgroup(const struct td_tool *t, unsigned extra, struct td_limits *lim,
                        struct td_cgroup **cg);
/* d for kind of t with the limits lim, in cg (NULL: none), its directory
 * cwd, as uid:gid ((uid_t)-1: the daemon's), with env (NULL-terminated;
 * borrowed). 0, or -errno with *what. */
int td_spawndesc_build(struct td_spawndesc *d, enum td_spawn_kind kind, const struct td_tool *t,
                       const struct td_limits *lim, struct td_cgroup *cg, const char *cwd,
                       uid_t uid, gid_t gid, char *const *env, const char **what);
void td_spawndesc_free(struct td_spawndesc *d);

#endif
