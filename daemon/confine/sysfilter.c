/*
 * sysfilter.c - system-call filters for workers.
 *
 * The default filter (every call, unless its tool says "syscalls": "off")
 * denies what a tool has no business doing and what has been the way out
 * of sandboxes: tracing or reading other processes (ptrace,
 * process_vm_*, pidfd_getfd, kcmp, process_madvise), loading kernel code (modules, kexec, bpf), the
 * big attack surfaces unprivileged code rarely needs (perf_event_open, userfaultfd, io_uring_*, the
 * key rings), mounting and building namespaces of its own (mount and the new mount API, umount2,
 * pivot_root, unshare, setns, and clone with any CLONE_NEW* flag), acct, swap, reboot, setting the
 * clocks, and sockets of any family but AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK's
 * NETLINK_ROUTE. A tool's "deny_syscalls" adds names. A denied call fails with EPERM.
 *
 * NETLINK_ROUTE because the C library's name resolution asks it which
 * address families the host has (glibc's getaddrinfo with AI_ADDRCONFIG,
 * getifaddrs): refused, a tool that works (it falls back) showed a denial.
 * It reads the interfaces of the call's network namespace (only lo in a
 * namespace of its own); changing them needs CAP_NET_ADMIN, which a tool
 * does not hold there. The other netlink families (audit, the kernel's
 * uevents, xfrm, netfilter) stay refused.
 *
 * Internet sockets are allowed whatever the call's network: "network":
 * false is a network namespace of its own whose only interface is its own
 * lo (sandbox.c, step 7d), so they reach the call itself and nothing
 * beyond, which is what a program serving on localhost or a test suite
 * binding it needs.
 *
 * clone3() passes its flags behind a pointer, which a filter cannot read:
 * it fails with ENOSYS (not reported, not a denial), and the C library
 * falls back to clone(), whose flags the filter sees (glibc does so for
 * fork and pthread_create since 2.34).
 *
 * Denials are reported: a denied call stops at SECCOMP_RET_USER_NOTIF, the
 * child loads the filter with a listener and hands it up (sandbox.c step
 * 11b), and the daemon answers -EPERM and notes the call's name
 * (sysnotify.c). Where the kernel or libseccomp have no user notification,
 * the same set fails with SECCOMP_RET_ERRNO(EPERM) unreported.
 *
 * "network": false puts a call in a network namespace of its own, which cuts
 * every interface and the abstract Unix socket namespace, but not Unix
 * sockets in the file system: they are reached by path, as files. Without a
 * file-system view of its own (a minimal root per call), the one way to keep
 * such a call from the host's sockets (a database's, Docker's, the
 * session bus) is to refuse the socket itself: socket(AF_UNIX) fails with
 * EACCES, in every filter, "off" included. socketpair() stays allowed (a
 * pipe with two ends; it reaches nothing).
 *
 * The filters are built with libseccomp and exported as classic BPF,
 * because the worker's set-up runs in a vfork child that shares our memory
 * and may not allocate (sandbox.c): it only loads the program built here.
 * The common ones (default and off, with and without network) are built
 * once at start; a tool with "deny_syscalls" gets its own at load (and
 * reload), never per call. A warm tool's template (template.c) gets the
 * same set less what it needs to set up each call's namespaces (the
 * namespace flags of clone() and the mount calls lib/warmview.c makes): each call's process
 * stacks a filter of its own that refuses exactly those again
 * (lib/warmcall.c), so a warm call ends under the same rules as a cold
 * one. Not setns() nor unshare(), which the warm runtime never calls: the
 * template owns the user namespace of each call's PID 1 (it made it), and
 * joined it would have every capability there, the call's uid (a root
 * daemon's lent one) among them, outside the call's PID namespace and past
 * the uid's return to the pool. The template's filter is loaded with the listener, like a cold
 * call's: it serves the template and every call forked from it (a filter
 * is inherited), and the daemon tells them apart by PID namespace
 * (template.c). It has to be the template's filter that notifies: of two
 * filters the stricter action wins, so an EPERM of the template's would
 * beat a notification of the call's; and the kernel allows one listener
 * per chain of filters. The calls' stacked refusals (the namespace and
 * mount calls) are therefore EPERM unreported. Only this ABI's calls are
 * let through:
 * libseccomp checks the architecture, and a system call of another ABI
 * (i386's int 0x80, x32) kills the process rather than slipping past rules
 * written for this one; a tool is a program of this machine.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netlink.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "config.h"
#include "log.h"
#include "sysfilter.h"
#include "toolexec.h"

/* Denied by default (EPERM, reported). Names this libseccomp or this
 * architecture does not know are skipped. */
static const char *const default_deny[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
    "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr", "unshare", "setns", "acct", "swapon", "swapoff", "reboot",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    /* reaching into another process of the call (its init above all, whose
     * report pipe a call took with pidfd_getfd) */
    "pidfd_getfd", "kcmp", "process_madvise",
    /* the same spirit, from container runtimes' default profiles */
    "open_by_handle_at", "iopl", "ioperm", "syslog", "quotactl", "lookup_dcookie", "vhangup",
    "uselib", "nfsservctl", "create_module", "get_kernel_syms", "query_module", "_sysctl"};

/* CLONE_NEWTIME (0x80) is only for clone3() and unshare(): in clone()'s
 * flags that bit is part of the exit signal. */
static const unsigned long ns_flags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,   CLONE_NEWUSER,
                                         CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};

struct td_sysfilter_conf {
    bool off;
    struct td_sysfilter *own[TD_NET_COUNT];     /* by network; NULL: a common one */
    struct td_sysfilter *own_tpl[TD_NET_COUNT]; /* for its warm template */
};

/* What a template may do that its calls may not: lib/warmcall.c's stacked
 * filter refuses these again in each call. Only what lib/warm*.c calls (the
 * view's mounts in each P1): never setns or unshare (see above), nor
 * umount2, pivot_root or fspick. */
static const char *const template_allowed[] = {"mount",      "fsopen",    "fsconfig",     "fsmount",
                                               "move_mount", "open_tree", "mount_setattr"};

static bool for_template_only(const char *name)
{
    for (size_t i = 0; i < sizeof(template_allowed) / sizeof(template_allowed[0]); i++)
        if (strcmp(name, template_allowed[i]) == 0)
            return true;
    return false;
}

/* [off][network] */
static struct td_sysfilter common[2][TD_NET_COUNT];
static struct td_sysfilter common_tpl[2][TD_NET_COUNT];
static bool notify_ok;
static const char *notify_missing; /* why denials go unreported */
static bool lazy;                  /* td_sysfilter_setup_lazy() */

/* ctx as BPF in prog (malloc'd); 0 or -errno. libseccomp 2.5 exports only
 * to a descriptor: a memfd, read back once. */
static int export(scmp_filter_ctx ctx, struct sock_fprog *prog)
{
    int fd = memfd_create("toolexecd-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = seccomp_export_bpf(ctx, fd);
    struct stat st;
    if (rc == 0 && fstat(fd, &st) < 0)
        rc = -errno;
    if (rc == 0 && (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
                    st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS))
        rc = -EINVAL;
    struct sock_filter *insns = rc == 0 ? malloc((size_t)st.st_size) : NULL;
    if (rc == 0 && !insns)
        rc = -ENOMEM;
    if (rc == 0 && pread(fd, insns, (size_t)st.st_size, 0) != st.st_size)
        rc = -EIO;
    close(fd);
    if (rc < 0) {
        free(insns);
        return rc;
    }
    prog->filter = insns;
    prog->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
    return 0;
}

/* The action for a denied call. */
static uint32_t deny_action(void)
{
    return notify_ok ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM);
}

static bool in_default(int nr)
{
    for (size_t i = 0; i < sizeof(default_deny) / sizeof(default_deny[0]); i++)
        if (seccomp_syscall_resolve_name(default_deny[i]) == nr)
            return true;
    return nr == SCMP_SYS(clone) || nr == SCMP_SYS(clone3) || nr == SCMP_SYS(socket);
}

/* The default set's rules; 0 or -errno. */
static int add_default(scmp_filter_ctx ctx, bool tpl)
{
    uint32_t deny = deny_action();
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(default_deny) / sizeof(default_deny[0]); i++) {
        int nr = seccomp_syscall_resolve_name(default_deny[i]);
        if (nr >= 0 && !(tpl && for_template_only(default_deny[i])))
            rc = seccomp_rule_add(ctx, deny, nr, 0);
    }
    for (size_t i = 0; rc == 0 && !tpl && i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++)
        rc = seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* socket(): AF_UNIX (1), AF_INET (2), AF_INET6 (10) and AF_NETLINK (16)
     * with NETLINK_ROUTE (0) only; the comparisons are on all 64 bits, so
     * high garbage is denied too. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_GT, AF_NETLINK));
    for (int af = 0; rc == 0 && af < AF_NETLINK; af++)
        if (af != AF_UNIX && af != AF_INET && af != AF_INET6)
            rc = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, af));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
                              SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE));
    return rc;
}

/* One filter into out; 0 or -errno. */
static int build(bool off, enum td_net net, const int *extra, size_t nextra, bool tpl,
                 struct td_sysfilter *out)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc = ctx ? 0 : -ENOMEM;
    /* the worker sets no_new_privs itself, one step before the filter */
    if (rc == 0)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    if (rc == 0)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    /* A binary tree of system call numbers rather than a list: attaching
     * a filter, the kernel runs it once per number to cache the ones it
     * always allows, under a lock, in every call's child. perf, 2,000
     * attaches of the default filter on a loaded 2-CPU VM: ~135 us each
     * spent there with the list, ~40 us with the tree (the JIT: ~19 us). */
    if (rc == 0)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (rc == 0 && net != TD_NET_HOST)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
    if (rc == 0 && !off)
        rc = add_default(ctx, tpl);
    for (size_t i = 0; rc == 0 && i < nextra; i++)
        if (off || !in_default(extra[i]))
            rc = seccomp_rule_add(ctx, deny_action(), extra[i], 0);
    if (rc == 0)
        rc = export(ctx, &out->prog);
    seccomp_release(ctx);
    out->notify = rc == 0 && notify_ok && (!off || nextra);
    return rc;
}

/* Can a child of ours load a filter with a listener? The kernel allows
 * one listener per chain of filters (EBUSY), so a daemon that itself runs
 * under one (a container manager's that intercepts calls) cannot: found
 * out once here, in a child, rather than by every call failing. */
static int listener_allowed(void)
{
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {.len = 1, .filter = &allow};
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
            _exit(errno & 0xff);
        long fd =
            syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
        _exit(fd < 0 ? errno & 0xff : 0);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -errno;
    return WIFEXITED(st) ? -WEXITSTATUS(st) : -ECHILD;
}

/* Can this kernel hand a listener up, and libseccomp write the action?
 * child: and may a child of ours have a listener (else taken as yes: the
 * call's own filter fails if not, before its command runs). */
static void probe_notify(bool child)
{
    static char why[128];
    uint32_t action = SECCOMP_RET_USER_NOTIF;
    int rc;
    if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) < 0)
        notify_missing = "this kernel has no SECCOMP_RET_USER_NOTIF";
    else if (seccomp_api_get() < 5)
        notify_missing = "libseccomp cannot write SCMP_ACT_NOTIFY here";
    else if (child && (rc = listener_allowed()) < 0) {
        snprintf(why, sizeof(why), "no notification listener for our workers (%s)", strerror(-rc));
        notify_missing = why;
    } else
        notify_ok = true;
}

/* Learn mode's: the calls that name a path, besides the default set. Not
 * execve: the call's own exec comes right after the filter, while the one
 * who would answer (the spawner, the daemon) waits in clone() for that exec
 * (sandbox.c, step 11b); a program exec'd from a hidden directory is
 * therefore not learned (a script's interpreter opening it is). */
static const char *const learn_paths[] = {"open",     "openat",    "openat2",  "creat", "mkdir",
                                          "mkdirat",  "unlink",    "unlinkat", "rmdir", "rename",
                                          "renameat", "renameat2", "truncate"};
static struct td_sysfilter learn_filter;
static const char *default_names[sizeof(default_deny) / sizeof(default_deny[0]) + 1];

static void resolve_default_names(void)
{
    size_t k = 0;
    for (size_t i = 0; i < sizeof(default_deny) / sizeof(default_deny[0]); i++)
        if (seccomp_syscall_resolve_name(default_deny[i]) >= 0)
            default_names[k++] = default_deny[i];
}

static int build_learn(void)
{
    int nrs[sizeof(learn_paths) / sizeof(learn_paths[0])];
    size_t n = 0;
    if (!notify_ok)
        return 0;
    for (size_t i = 0; i < sizeof(learn_paths) / sizeof(learn_paths[0]); i++)
        if ((nrs[n] = seccomp_syscall_resolve_name(learn_paths[i])) >= 0)
            n++;
    return build(false, TD_NET_PROXY, nrs, n, false, &learn_filter);
}

const struct td_sysfilter *td_sysfilter_learn(void)
{
    /* lazily: unbuilt, a learning call gets the default filter instead */
    if (lazy && !learn_filter.prog.filter && build_learn() < 0)
        td_log(TD_LOG_ERR, "seccomp: cannot build the learning filter");
    return learn_filter.prog.filter ? &learn_filter : NULL;
}

bool td_sysfilter_notifies(void)
{
    if (!notify_ok && !notify_missing)
        probe_notify(true);
    return notify_ok;
}

const char *const *td_sysfilter_default_names(void)
{
    return default_names;
}

int td_sysfilter_setup(void)
{
    probe_notify(true);
    resolve_default_names();
    int rc = build_learn();
    for (int off = 0; rc == 0 && off < 2; off++)
        for (int net = 0; rc == 0 && net < TD_NET_COUNT; net++)
            if (!(off && net == TD_NET_HOST)) { /* off with the host's network: none */
                rc = build(off, (enum td_net)net, NULL, 0, false, &common[off][net]);
                if (rc == 0)
                    rc = build(off, (enum td_net)net, NULL, 0, true, &common_tpl[off][net]);
            }
    if (rc < 0) {
        td_log(TD_LOG_ERR, "seccomp: cannot build the worker filter: %s", strerror(-rc));
        return -1;
    }
    if (!notify_ok)
        td_log(TD_LOG_WARN, "seccomp: %s: denied system calls fail with EPERM unreported",
               notify_missing);
    return 0;
}

int td_sysfilter_setup_lazy(void)
{
    probe_notify(false);
    resolve_default_names();
    lazy = true;
    return 0;
}

/* A common filter built when first asked for (lazy); one that cannot be
 * is a filter all the same, killing at the first system call: never no
 * filter where one was due. */
static const struct td_sysfilter *common_filter(struct td_sysfilter *f, bool off, enum td_net net,
                                                bool tpl)
{
    static struct sock_filter kill = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    static const struct td_sysfilter failed = {.prog = {.len = 1, .filter = &kill}};
    if (lazy && !f->prog.filter) {
        int rc = build(off, net, NULL, 0, tpl, f);
        if (rc < 0) {
            td_log(TD_LOG_ERR, "seccomp: cannot build the worker filter: %s", strerror(-rc));
            return &failed;
        }
    }
    return f->prog.filter ? f : NULL;
}

int td_sysfilter_probe(char *detail, size_t len)
{
    if (!notify_ok && !notify_missing)
        probe_notify(true);
    uint32_t errno_action = SECCOMP_RET_ERRNO;
    if (td_cfg.layers_off & TD_LAYER_SECCOMP) {
        snprintf(detail, len, "turned off by --disable-layer seccomp");
        return 0;
    }
    if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &errno_action) < 0) {
        snprintf(detail, len, "no seccomp filters: %s", strerror(errno));
        return 0;
    }
    snprintf(detail, len, "%s",
             notify_ok ? "seccomp filter, denials reported (user notification)"
                       : "seccomp filter, denials not reported (no user notification)");
    return 1;
}

int td_sysfilter_parse(const char *file, const json_t *def, struct td_sysfilter_conf **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    const json_t *mode = json_object_get(def, "syscalls");
    const json_t *deny = json_object_get(def, "deny_syscalls");
    const char *m = te_json_text_value(mode);
    if (mode && (!m || (strcmp(m, "default") != 0 && strcmp(m, "off") != 0))) {
        snprintf(err, errlen, "%s: syscalls: expected \"default\" or \"off\"", file);
        return -EINVAL;
    }
    if (deny && !json_is_array(deny)) {
        snprintf(err, errlen, "%s: deny_syscalls: expected an array of system call names", file);
        return -EINVAL;
    }
    bool off = m && strcmp(m, "off") == 0;
    size_t n = deny ? json_array_size(deny) : 0;
    if (!off && !n)
        return 0;
    int *nrs = calloc(n + 1, sizeof(int));
    struct td_sysfilter_conf *c = calloc(1, sizeof(*c));
    int rc = nrs && c ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *name = te_json_text_value(json_array_get(deny, i));
        nrs[i] = name ? seccomp_syscall_resolve_name(name) : __NR_SCMP_ERROR;
        if (nrs[i] < 0) { /* pseudo-numbers: not a call of this ABI */
            snprintf(err, errlen, "%s: deny_syscalls[%zu]: %s%s%s", file, i,
                     name ? "unknown system call \"" : "expected a system call name",
                     name ? name : "", name ? "\"" : "");
            rc = -EINVAL;
        }
    }
    if (c)
        c->off = off;
    /* a tool's own only where it differs from the common ones */
    for (int net = 0; rc == 0 && n && net < TD_NET_COUNT; net++) {
        if (!(c->own[net] = calloc(1, sizeof(struct td_sysfilter))) ||
            !(c->own_tpl[net] = calloc(1, sizeof(struct td_sysfilter))))
            rc = -ENOMEM;
        else if ((rc = build(off, (enum td_net)net, nrs, n, false, c->own[net])) < 0 ||
                 (rc = build(off, (enum td_net)net, nrs, n, true, c->own_tpl[net])) < 0)
            snprintf(err, errlen, "%s: deny_syscalls: cannot build the filter: %s", file,
                     strerror(-rc));
    }
    free(nrs);
    if (rc < 0) {
        td_sysfilter_conf_free(c);
        if (rc == -ENOMEM)
            snprintf(err, errlen, "%s: out of memory", file);
        return rc == -ENOMEM ? rc : -EINVAL;
    }
    *out = c;
    return 0;
}

void td_sysfilter_conf_free(struct td_sysfilter_conf *c)
{
    if (!c)
        return;
    for (int i = 0; i < TD_NET_COUNT; i++) {
        if (c->own[i])
            free(c->own[i]->prog.filter);
        free(c->own[i]);
        if (c->own_tpl[i])
            free(c->own_tpl[i]->prog.filter);
        free(c->own_tpl[i]);
    }
    free(c);
}

const struct td_sysfilter *td_sysfilter_get(const struct td_sysfilter_conf *c, enum td_net net)
{
    if (td_cfg.layers_off & TD_LAYER_SECCOMP) /* --disable-layer seccomp */
        return NULL;
    if (c && c->own[net])
        return c->own[net];
    bool off = c && c->off;
    if (off && net == TD_NET_HOST)
        return NULL;
    return common_filter(&common[off][net], off, net, false);
}

const struct td_sysfilter *td_sysfilter_template(const struct td_sysfilter_conf *c, enum td_net net)
{
    if (td_cfg.layers_off & TD_LAYER_SECCOMP)
        return NULL;
    if (c && c->own_tpl[net])
        return c->own_tpl[net];
    bool off = c && c->off;
    if (off && net == TD_NET_HOST)
        return NULL;
    return common_filter(&common_tpl[off][net], off, net, true);
}

bool td_sysfilter_conf_custom(const struct td_sysfilter_conf *c)
{
    return c && c->own[0];
}

bool td_sysfilter_conf_off(const struct td_sysfilter_conf *c)
{
    return c && c->off;
}
