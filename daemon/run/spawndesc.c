/*
 * spawndesc.c - a tool's process description, for a call, a spare and a
 * template alike (spawndesc.h).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "containment.h"
#include "egress.h"
#include "fsview.h"
#include "spawndesc.h"
#include "sysfilter.h"
#include "util.h"

/* "uid uid 1": an unprivileged daemon's user namespace maps only itself. */
static char uid_map[32], gid_map[32];
/* What a call's mount namespace covers with /dev/null: the daemon's sockets. */
static const char *hidden[3];

void td_spawndesc_setup(void)
{
    size_t n = 0;
    if (td_cfg.socket_path)
        hidden[n++] = td_cfg.socket_path;
    if (td_cfg.events_socket_path)
        hidden[n++] = td_cfg.events_socket_path;
    hidden[n] = NULL;
    snprintf(uid_map, sizeof(uid_map), "%u %u 1\n", (unsigned)geteuid(), (unsigned)geteuid());
    snprintf(gid_map, sizeof(gid_map), "%u %u 1\n", (unsigned)getegid(), (unsigned)getegid());
}

static void merge_limits(struct td_limits *out, const struct td_limits *tool)
{
    const struct td_limits *d = &td_cfg.limits;
#define PICK(k) out->k = tool->k ? tool->k : d->k
    PICK(cpu_ms);
    PICK(memory_mb);
    PICK(processes);
    PICK(open_files);
    PICK(file_size_mb);
    PICK(output_mb);
#undef PICK
}

void td_spawndesc_limits(const struct td_tool *t, unsigned extra, struct td_limits *lim)
{
    memset(lim, 0, sizeof(*lim));
    merge_limits(lim, &t->limits);
    if (lim->processes)
        lim->processes += extra;
}

int td_spawndesc_cgroup(const struct td_tool *t, unsigned extra, struct td_limits *lim,
                        struct td_cgroup **cg)
{
    td_spawndesc_limits(t, extra, lim);
    *cg = NULL;
    /* A cgroup of its own when it is the containment, or when it carries a
     * limit the call sets; the PID namespace's init counts as a process. */
    bool cg_memory = lim->memory_mb && td_cgroup_memory();
    bool cg_pids = lim->processes && td_cgroup_pids();
    if (td_containment != TD_CONTAIN_CGROUP && !cg_memory && !cg_pids)
        return 0;
    int err = 0;
    *cg = td_cgroup_new(cg_memory ? lim->memory_mb : 0,
                        cg_pids ? lim->processes + (td_call_ns != 0) : 0, &err);
    return *cg ? 0 : -err;
}

/* cg_memory, cg_pids: those two limits are the call's cgroup's instead. */
static size_t build_rlimits(const struct td_limits *l, bool cg_memory, bool cg_pids,
                            struct td_rlimit *rl)
{
    size_t n = 0;
    if (l->cpu_ms) {
        /* SIGXCPU at the soft limit, SIGKILL a second later if ignored */
        rlim_t sec = (l->cpu_ms + 999) / 1000;
        rl[n++] = (struct td_rlimit){RLIMIT_CPU, {sec, sec + 1}};
    }
    if (l->memory_mb && !cg_memory)
        rl[n++] = (struct td_rlimit){RLIMIT_AS, {l->memory_mb << 20, l->memory_mb << 20}};
    /* the init of the call's PID namespace counts as one */
    rlim_t nproc = l->processes + (td_call_ns ? 1 : 0);
    if (l->processes && !cg_pids)
        rl[n++] = (struct td_rlimit){RLIMIT_NPROC, {nproc, nproc}};
    if (l->open_files)
        rl[n++] = (struct td_rlimit){RLIMIT_NOFILE, {l->open_files, l->open_files}};
    else if (td_cfg.worker_nofile.rlim_cur) /* not the soft limit we raised for ourselves */
        rl[n++] = (struct td_rlimit){RLIMIT_NOFILE, td_cfg.worker_nofile};
    if (l->file_size_mb)
        rl[n++] = (struct td_rlimit){RLIMIT_FSIZE, {l->file_size_mb << 20, l->file_size_mb << 20}};
    /* An unprivileged daemon cannot raise a hard limit: one below a limit
     * (the default processes=1024 under a lower RLIMIT_NPROC) holds as is. */
    for (size_t i = 0; td_euid() != 0 && i < n; i++) {
        struct rlimit own;
        if (getrlimit(rl[i].resource, &own) == 0 && own.rlim_max < rl[i].lim.rlim_max)
            rl[i].lim.rlim_cur = rl[i].lim.rlim_max = own.rlim_max;
    }
    return n;
}

/* [init, tool argv...]: the init is PID 1 of the call's namespace. */
static const char **init_argv(char *const *tool)
{
    size_t n = 0;
    while (tool[n])
        n++;
    const char **argv = calloc(n + 2, sizeof(char *));
    if (!argv)
        return NULL;
    argv[0] = td_init_path;
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = tool[i];
    return argv;
}

int td_spawndesc_build(struct td_spawndesc *d, enum td_spawn_kind kind, const struct td_tool *t,
                       const struct td_limits *lim, struct td_cgroup *cg, const char *cwd,
                       uid_t uid, gid_t gid, char *const *env, const char **what)
{
    memset(d, 0, sizeof(*d));
    d->limits = *lim;
    bool pidns = td_call_ns != 0;
    d->cg_memory = lim->memory_mb && td_cgroup_memory() && cg;
    bool cg_pids = lim->processes && td_cgroup_pids() && cg;
    size_t nrl = build_rlimits(lim, d->cg_memory, cg_pids, d->rl);
    bool template = kind == TD_SPAWN_TEMPLATE;
    if (template) {
        /* Its process limit soft only: each call's user namespace is made
         * with the hard one (lib/warm.c p1_make()), or the kernel would
         * count every call's processes together against it; each call sets
         * its own. */
        struct rlimit own;
        for (size_t i = 0; i < nrl; i++)
            if (d->rl[i].resource == RLIMIT_NPROC && getrlimit(RLIMIT_NPROC, &own) == 0 &&
                own.rlim_max > d->rl[i].lim.rlim_max)
                d->rl[i].lim.rlim_max = own.rlim_max;
    }
    int network = t->network >= 0 ? t->network : td_cfg.network;
    *what = "malloc";
    if (pidns && !(d->argv = init_argv(t->argv)))
        return -ENOMEM;
    d->sp = (struct td_spawn){
        .argv = pidns ? (char *const *)d->argv : t->argv,
        .init = pidns,
        .envp = env,
        .cwd = cwd,
        .ns_flags = td_call_ns | (network ? 0 : CLONE_NEWNET),
        .work_dir = td_cfg.work_dir,
        .hide = hidden,
        .uid_map = uid_map,
        .gid_map = gid_map,
        .uid = uid,
        .gid = gid,
        .rlimits = d->rl,
        .nrlimits = nrl,
        .cgroup_dir = td_cgroup_dir_fd(cg),
        .cgroup_procs = td_cgroup_procs_fd(cg),
        .in_socket = template,
        .dev_bound = template,
    };
    enum td_net net = t->egress ? TD_NET_PROXY : network ? TD_NET_HOST : TD_NET_NONE;
    const struct td_sysfilter *sf;
    if (template) {
        /* the tool's filter less what the template needs for its calls'
         * namespaces, which each call's stacked filter refuses again; its
         * listener serves the template and all its calls (template.c) */
        sf = td_sysfilter_template(t->sysfilter, net);
        d->sp.filter_notify = d->sp.hand_over = sf && sf->notify;
    } else {
        sf = td_sysfilter_get(t->sysfilter, net);
        if (t->learn && !t->learn_refused && td_sysfilter_learn()) /* records, lets go on */
            sf = td_sysfilter_learn();
        d->sp.hand_over = t->egress != NULL;
        d->sp.proxy_port = t->egress ? TD_EGRESS_PORT : 0;
        d->sp.filter_notify = sf && sf->notify;
        d->sp.hand_over = d->sp.hand_over || d->sp.filter_notify;
    }
    d->sp.filter = sf ? &sf->prog : NULL;
    if (d->sp.ns_flags)
        d->sp.ns_flags |= td_userns_flag;
    /* A template gets the view of a cold call of the tool (step 7c), in
     * which each warm call refreshes /tmp and /dev and hides the template's
     * directory; but no Landlock, which forbids the mounts that takes: each
     * warm call applies it (template.c sends the write paths, lib/warmview.c). */
    const char *const *ll_write;
    *what = "filesystem view";
    int rc = td_fsview_plan(t->fs, t->argv ? t->argv[0] : NULL, td_init_path,
                            d->sp.ns_flags & CLONE_NEWNS, &d->sp.fs, &ll_write);
    if (rc < 0) {
        td_spawndesc_free(d);
        return rc;
    }
    if (!template) {
        d->sp.landlock_abi = ll_write ? td_fsview_landlock_abi() : 0;
        d->sp.ll_write = ll_write;
    }
    return 0;
}

void td_spawndesc_free(struct td_spawndesc *d)
{
    free(d->argv);
    d->argv = NULL;
}
