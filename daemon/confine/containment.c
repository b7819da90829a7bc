/*
 * containment.c - choosing, at start, how a call's processes are kept from
 * outliving the call, and `toolexecd --check`.
 *
 *   pidns   every call in a fresh PID namespace whose PID 1 is toolexecd-init;
 *           when the init exits or is killed, the kernel kills everything
 *           left in the namespace, setsid() strays included, and the init's
 *           PR_SET_PDEATHSIG takes the namespace down if the daemon dies.
 *           An unprivileged daemon gets the namespace through a user
 *           namespace of its own.
 *   cgroup  every call in a cgroup v2 directory of its own (cgroup.c),
 *           ended with cgroup.kill, which reaches setsid() strays too. It
 *           needs a cgroup the daemon may manage (systemd's Delegate=yes,
 *           or --cgroup DIR). If the daemon itself is SIGKILLed, the strays
 *           of its calls live on until systemd stops the unit's cgroup
 *           (KillMode=control-group) or the daemon starts again and kills
 *           what it finds in call-* cgroups.
 *   pgroup  the fallback: a process group per call, killed when the call
 *           ends, with the daemon as child subreaper so orphans are reaped.
 *           A process that calls setsid() escapes it; we say so at start.
 *
 * Per call, cgroup costs about what pgroup does, and pidns about 0.2-0.3 ms
 * more (bench/: a fresh namespace, and an init exec'd before the tool). So
 * auto takes cgroup when systemd delegated our cgroup to us: a service
 * manager then also kills the unit's cgroup, strays and all, if the daemon
 * is SIGKILLed. Otherwise (--cgroup DIR, or none) pidns where it exists,
 * since only it holds on its own when the daemon is SIGKILLed; then cgroup;
 * then pgroup. Beside a PID namespace, cgroups still carry the memory and
 * process limits (memory.max, pids.max) of calls that set them.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "containment.h"
#include "fsview.h"
#include "log.h"
#include "sandbox.h"
#include "sysfilter.h"
#include "util.h"

#ifndef TD_LIBEXECDIR
#define TD_LIBEXECDIR "/usr/libexec/toolexecd"
#endif

enum td_containment td_containment = TD_CONTAIN_PGROUP;
int td_userns_flag;
int td_call_ns;
char *td_init_path;

int td_containment_setup(const char *want)
{
    /* Orphans of our workers come to us rather than to the host's init. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        td_log(TD_LOG_WARN, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
    td_userns_flag = geteuid() == 0 ? 0 : CLONE_NEWUSER;
    free(td_init_path);
    td_init_path = td_libexec_find("toolexecd-init", TD_LIBEXECDIR);
    int rc = td_init_path ? td_sandbox_probe(CLONE_NEWPID | CLONE_NEWNS | td_userns_flag) : -ENOENT;
    bool pidns = rc == 0, cgroup = td_cgroup_active();
    if (strcmp(want, "pidns") == 0 && !pidns) {
        td_log(TD_LOG_ERR, "--containment pidns: %s",
               td_init_path ? strerror(-rc) : "toolexecd-init not found");
        return -1;
    }
    if (strcmp(want, "cgroup") == 0 && !cgroup) {
        td_log(TD_LOG_ERR, "--containment cgroup: no cgroup to manage (see toolexecd --check; "
                           "Delegate=yes or --cgroup DIR)");
        return -1;
    }
    if (strcmp(want, "auto") == 0)
        td_containment = cgroup && td_cgroup_delegated() ? TD_CONTAIN_CGROUP
                         : pidns                         ? TD_CONTAIN_PIDNS
                         : cgroup                        ? TD_CONTAIN_CGROUP
                                                         : TD_CONTAIN_PGROUP;
    else
        td_containment = strcmp(want, "pidns") == 0    ? TD_CONTAIN_PIDNS
                         : strcmp(want, "cgroup") == 0 ? TD_CONTAIN_CGROUP
                                                       : TD_CONTAIN_PGROUP;
    /* Every call in a PID and a mount namespace of its own, whatever ends
     * its processes, except where the operator chose pgroup: the mode
     * without namespaces, for tools that must see the host's /proc. */
    td_call_ns = pidns && td_containment != TD_CONTAIN_PGROUP ? CLONE_NEWPID | CLONE_NEWNS : 0;
    /* And an IPC namespace: SysV shared memory, semaphores and message
     * queues and POSIX message queues live in it, so nothing of that kind
     * outlives the call (the kernel frees it with the namespace) or is
     * seen by another call, whatever its mode (without it, four 16
     * MiB segments stayed on the host, a 0666 one was read by another
     * client's call). Not counted as a layer of its own: every kernel with
     * PID namespaces has it; should one refuse it, calls run without. */
    if (td_call_ns &&
        td_sandbox_probe(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | td_userns_flag) == 0)
        td_call_ns |= CLONE_NEWIPC;
    else if (td_call_ns)
        td_log(TD_LOG_WARN, "no IPC namespace per call: calls share the host's System V IPC");
    if (td_call_ns && !td_cfg.one_shot) /* the containment line below says the rest */
        td_log(TD_LOG_INFO, "each call in a PID, a mount and an IPC namespace of its own: a /proc "
                            "of its own processes, the daemon's sockets and other calls' "
                            "directories hidden, its System V IPC its own");
    else if (!td_call_ns)
        td_log(TD_LOG_WARN,
               "calls share the host's /proc, mounts and System V IPC (%s): a call can see the "
               "daemon and other calls' processes%s, connect to the daemon's socket and reach "
               "other calls' directories and IPC objects as far as their modes allow",
               !pidns ? (td_init_path ? strerror(-rc) : "toolexecd-init not found")
                      : "--containment pgroup",
               td_userns_flag ? " and signal those of its uid" : "");
    if (td_containment == TD_CONTAIN_PIDNS)
        td_log(TD_LOG_INFO, "containment: a PID namespace per call%s (init %s)",
               td_userns_flag ? " inside a user namespace" : "", td_init_path);
    else if (td_containment == TD_CONTAIN_CGROUP)
        td_log(TD_LOG_INFO, "containment: a cgroup per call under %s, ended with cgroup.kill",
               td_cgroup_base());
    else
        td_log(TD_LOG_WARN,
               "containment: process group + subreaper only; a worker's process that calls "
               "setsid() can outlive its call%s",
               strcmp(want, "pgroup") == 0 ? " (chosen by --containment)" : "");
    return 0;
}

int td_containment_assume(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        td_log(TD_LOG_WARN, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
    td_userns_flag = geteuid() == 0 ? 0 : CLONE_NEWUSER;
    free(td_init_path);
    if (!(td_init_path = td_libexec_find("toolexecd-init", TD_LIBEXECDIR)))
        return -1;
    td_containment =
        td_cgroup_active() && td_cgroup_delegated() ? TD_CONTAIN_CGROUP : TD_CONTAIN_PIDNS;
    td_call_ns = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC;
    int ll = td_fsview_landlock_abi();
    td_log(TD_LOG_INFO,
           "confinement: mount, PID and IPC namespaces, landlock %s%.0d, seccomp, %snetwork "
           "namespace per call, taken as there (a missing one fails the call's set-up, and "
           "the run is set up again, probed); containment: %s",
           ll ? "ABI " : "NO", ll, td_userns_flag ? "user namespace, " : "",
           td_containment == TD_CONTAIN_CGROUP ? "a cgroup per call" : "a PID namespace per call");
    td_fsview_setup(true);
    return 0;
}

bool td_containment_probe_ns(const char *want)
{
    char *init = td_libexec_find("toolexecd-init", TD_LIBEXECDIR);
    int userns = geteuid() == 0 ? 0 : CLONE_NEWUSER;
    bool ns = init && strcmp(want, "pgroup") != 0 &&
              td_sandbox_probe(CLONE_NEWPID | CLONE_NEWNS | userns) == 0;
    free(init);
    return ns;
}

/* The confinement layers: what the kernel offers and
 * whether calls get it. */
struct layers {
    bool mountns, userns, netns, seccomp;
    int landlock;
    char seccomp_detail[96]; /* sysfilter.c: whether denials are reported */
};

static void probe_layers(struct layers *l, int userns)
{
    l->mountns = td_sandbox_probe(CLONE_NEWNS | userns) == 0;
    l->userns = td_sandbox_probe(CLONE_NEWUSER) == 0;
    l->netns = td_sandbox_probe(CLONE_NEWNET | userns) == 0;
    l->seccomp = td_sysfilter_probe(l->seccomp_detail, sizeof(l->seccomp_detail)) == 1;
    l->landlock = td_fsview_landlock_abi();
}

int td_confinement_setup(bool require)
{
    struct layers l;
    probe_layers(&l, td_userns_flag);
    bool mount_ns = (td_call_ns & CLONE_NEWNS) != 0;
    int missing = !mount_ns + !l.landlock + !l.seccomp + !l.netns + (td_userns_flag && !l.userns);
    char ll[16];
    snprintf(ll, sizeof(ll), l.landlock ? "ABI %d" : "NO", l.landlock);
    td_log(missing ? TD_LOG_WARN : TD_LOG_INFO,
           "confinement: mount namespace %s, landlock %s, seccomp %s, user namespace %s, "
           "network namespace per call %s",
           mount_ns ? "yes" : "NO", ll, l.seccomp ? "yes" : "NO",
           !td_userns_flag ? "not needed (root)"
           : l.userns      ? "yes"
                           : "NO",
           l.netns ? "yes" : "NO");
    td_fsview_setup(mount_ns);
    if (require && missing) {
        td_log(TD_LOG_ERR,
               "--require-confinement: %d confinement layer%s missing (toolexecd "
               "--check lists them)",
               missing, missing == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

static const char *yesno(int rc)
{
    return rc == 0 ? "yes" : "no";
}

int td_containment_check(const char *cgroup_dir)
{
    int userns = geteuid() == 0 ? 0 : CLONE_NEWUSER;
    char *init = td_libexec_find("toolexecd-init", TD_LIBEXECDIR);
    int pid_rc = td_sandbox_probe(CLONE_NEWPID | CLONE_NEWNS | userns);
    printf("running as uid %d%s\n", (int)geteuid(), userns ? " (unprivileged)" : "");
    printf("user namespaces:     %s\n", yesno(td_sandbox_probe(CLONE_NEWUSER)));
    printf("pid namespaces:      %s%s\n", yesno(pid_rc),
           userns ? " (with a mount namespace and a /proc of its own, inside a user namespace)"
                  : " (with a mount namespace and a /proc of its own)");
    printf("network namespaces:  %s\n", yesno(td_sandbox_probe(CLONE_NEWNET | userns)));
    printf("ipc namespaces:      %s\n", yesno(td_sandbox_probe(CLONE_NEWIPC | userns)));
    struct td_cgroup_info cg;
    td_cgroup_probe(cgroup_dir, &cg);
    if (!cg.mount[0]) {
        printf("cgroup v2:           no\n");
    } else {
        printf("cgroup v2:           yes (%s%s, own cgroup %s)\n", cg.mount,
               strcmp(cg.mount, "/sys/fs/cgroup") ? ", hybrid" : "", cg.own[0] ? cg.own : "?");
        printf("  base:              %s\n", cg.dir[0] ? cg.dir : "none");
        printf("  delegated:         %s%s\n", cg.delegated ? "yes" : "no",
               cgroup_dir ? " (--cgroup)" : "");
        printf("  writable:          %s\n", cg.writable ? "yes" : "no");
        printf("  cgroup.kill:       %s\n", cg.kill ? "yes" : "no");
        printf("  controllers:       %s%s%s\n", cg.memory ? "memory " : "", cg.pids ? "pids " : "",
               cg.memory || cg.pids ? "" : "neither memory nor pids");
        printf("  per-call cgroups:  %s%s%s\n", cg.usable ? "yes" : "no (", cg.usable ? "" : cg.why,
               cg.usable ? "" : ")");
    }
    printf("toolexecd-init:      %s\n", init ? init : "not found");
    struct layers l;
    probe_layers(&l, userns);
    printf("confinement layers:\n");
    printf("  mount namespace:   %s\n", l.mountns && init && pid_rc == 0
                                            ? "yes (a file-system view per call)"
                                            : "no (calls see the host's file system)");
    if (l.landlock)
        printf("  landlock:          yes (ABI %d)\n", l.landlock);
    else
        printf("  landlock:          no\n");
    printf("  seccomp:           %s (%s)\n", l.seccomp ? "yes" : "no", l.seccomp_detail);
    printf("  user namespace:    %s\n",
           l.userns ? (userns ? "yes" : "yes (not needed as root)") : "no");
    printf("  network namespace: %s\n", l.netns ? "yes (per call)" : "no");
    bool by_cgroup = cg.usable && (!cgroup_dir || !(init && pid_rc == 0));
    printf("containment:         %s\n",
           by_cgroup             ? "cgroup (a cgroup per call, cgroup.kill)"
           : init && pid_rc == 0 ? "pidns (a PID namespace per call)"
                                 : "pgroup (process group + subreaper; setsid() escapes)");
    printf("memory_mb:           %s\n", cg.usable && cg.memory ? "memory.max" : "RLIMIT_AS");
    printf("processes:           %s\n", cg.usable && cg.pids ? "pids.max" : "RLIMIT_NPROC");
    free(init);
    return 0;
}
