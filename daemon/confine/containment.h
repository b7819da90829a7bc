/*
 * containment.h - how a call's processes are kept from outliving it.
 */
#ifndef TD_CONTAINMENT_H
#define TD_CONTAINMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum td_containment {
    TD_CONTAIN_PGROUP, /* process group + subreaper: setsid() escapes it */
    TD_CONTAIN_PIDNS,  /* a PID namespace per call, toolexecd-init as PID 1 */
    TD_CONTAIN_CGROUP, /* a cgroup per call, ended with cgroup.kill */
};
extern enum td_containment td_containment;
extern int td_userns_flag; /* CLONE_NEWUSER when unprivileged, else 0 */
/* CLONE_NEWPID | CLONE_NEWNS where the kernel gives every call a PID and a
 * mount namespace of its own (with toolexecd-init and a private /proc),
 * whatever the containment mode; else 0. */
extern int td_call_ns;
extern char *td_init_path; /* toolexecd-init */
int td_containment_setup(const char *want /* "auto", "pidns", "cgroup", "pgroup" */);
/* Log which confinement layers calls get, a warning for
 * each missing one; -1 when require and one is missing. */
int td_confinement_setup(bool require);
/* The one-shot's (sandboxrun.c) instead of both: no probe, every layer
 * assumed as "auto" would find it on a kernel that has it all, so that a
 * missing one fails the call's own clone or set-up, closed. -1 without
 * toolexecd-init (then probe). */
int td_containment_assume(void);
/* Would calls get a mount namespace of their own under --containment
 * want? Quietly, for --check --tools (a definition's view). */
bool td_containment_probe_ns(const char *want);
/* toolexecd --check [--cgroup DIR] */
int td_containment_check(const char *cgroup_dir);

#endif
