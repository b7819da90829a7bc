/*
 * sandbox.c - the one place that forks.
 *
 * td_sandbox_spawn() creates the worker's pipes, starts the child and, in
 * the child, runs a fixed sequence of set-up steps before exec.
 * td_sandbox_probe() is the other child the daemon ever starts: once, at
 * start (containment.c, --check), to learn whether the kernel gives us the
 * namespaces; it is here so that what it tries stays what step 7b does.
 *
 * The child is started with clone(CLONE_VM | CLONE_VFORK), the way
 * posix_spawn() does it, not with fork(): the daemon is suspended until the
 * child has exec'd, no page table is copied, and the daemon takes no
 * copy-on-write faults on its heap afterwards. That is most of the cost of a
 * plain fork() from a busy process (see bench/). The price is discipline:
 * until exec, the child shares the daemon's memory, so it runs only system
 * calls on data prepared before the clone, never malloc, stdio or anything
 * that takes a lock.
 *
 * Why each step, in order:
 *  1. The report pipe moved to fd 3 (close-on-exec), so any later step can
 *     say why it failed.
 *  1a. The hand-over socket onto fd 4, close-on-exec, when the spawn asks
 *     for one (td_spawn.hand_over): a later step that makes a descriptor
 *     the daemon needs (a seccomp notification listener, a listening socket
 *     inside the call's network namespace) sends it up with
 *     td_sandbox_hand_over(). The daemon collects them as soon as clone()
 *     returns: by then the child has exec'd or died, so all are queued and
 *     none can race the tool.
 *  1b. Into the call's cgroup, when it has one (cgroup.c), so that every
 *     process the call will ever have starts inside it and is reached by its
 *     limits and by cgroup.kill. Normally the child is born there: clone3()
 *     with CLONE_INTO_CGROUP, which costs nothing measurable, where moving a
 *     running process costs ~45 us alone and ~85 us with four forking
 *     neighbours (cgroup.procs takes a lock that every fork on the host
 *     shares). Where clone3() cannot do it (an old kernel, or no wrapper
 *     for this architecture in sandbox_clone.c), the child writes "0" to
 *     the cgroup's cgroup.procs, a descriptor the daemon opened, whose
 *     credentials are what the kernel checks.
 *  2. setsid(): the worker leads a session of its own, without a controlling
 *     terminal: a worker of a daemon started in a terminal cannot open
 *     /dev/tty and push keystrokes into the operator's shell (TIOCSTI). The
 *     session leader also leads its process group, so one kill of the group
 *     reaches the helpers it forks, and signals aimed at the daemon's group
 *     (a terminal's ^C) do not reach workers.
 *  3. PR_SET_PDEATHSIG(SIGKILL): if the daemon dies the worker dies too;
 *     checking getppid() afterwards closes the race where the daemon died
 *     before the prctl (in a new PID namespace the parent shows as 0).
 *  4. Signal dispositions to default, then the mask cleared. The parent
 *     blocked every signal around clone() but the faults (SIGSEGV, SIGBUS,
 *     SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT, as libuv's process.c), so
 *     none of the daemon's handlers can run in the child before the
 *     dispositions are reset, while a fault in either still reaches its
 *     handler rather than killing silently. Only the signals the daemon
 *     changed need it (snapshot_signals()), read and reset with the raw
 *     system call: glibc's sigaction() refuses 32 and 33, which a parent
 *     such as debhelper leaves ignored (rawsig.h).
 *  5. The pipes onto 0, 1, 2 (dup2 clears close-on-exec on the copies).
 *  6. Everything above fd 3 (fd 4 with a hand-over socket) closed: no
 *     daemon descriptor (client sockets, other workers' pipes) leaks into
 *     a worker.
 *  7. In a new user namespace (unprivileged daemon): map our own uid and
 *     gid, so the worker keeps its identity and may use its directory.
 *  7b. In the call's own mount namespace (CLONE_NEWNS, with its PID
 *     namespace), made so the call can name nothing outside itself:
 *     - every mount private first, so nothing below reaches the host's;
 *     - /dev/null bound over the daemon's sockets: a worker cannot ask the
 *       daemon for calls its client was refused;
 *     - an empty tmpfs over the work dir, read-only once the call's own
 *       directory is bound back at its path: other calls' directories and
 *       the spill files (WORK/results) are not there to be reached. The
 *       call directory is opened (fd 4) before the tmpfs hides it;
 *     - a fresh /proc of the call's PID namespace over the host's: the call
 *       sees its init and its own processes, never another call's, the
 *       daemon's or the host's (no /proc/PID/environ, mem, oom_score_adj).
 *     Cost, on a loaded 2-CPU VM: ~70 us more in this child (the loop's
 *     time: clone() to exec, 5 x 300 spawns with and without these steps)
 *     and ~0.5 ms more when the call ends, the kernel tearing the namespace
 *     down in the exiting init (not the loop's time); through the daemon
 *     ~0.5 ms CPU and ~1 ms wall a call (bench/ under farm-bench, 8 runs of
 *     900 calls). Worth it: it is what keeps calls from naming each other.
 *  7c. With a file-system view (fsview.c; every call but those of
 *     "filesystem": "host"), in place of the work-dir tmpfs of 7b: the plan
 *     fsview.c made once per tool, run op by op (sandbox_mounts.c): descriptors of what
 *     will be covered opened first; a /dev tmpfs with the host's null, zero,
 *     full, random, urandom made again (mknod, where the daemon may: no
 *     mount each; a template's and where it may not, bound in), and an
 *     empty mode-0 directory and file
 *     that are bound over what is hidden and then removed; a /tmp tmpfs;
 *     tmpfs "veils" over hidden directories with something exposed below;
 *     the call's directory and the "read"/"write" paths bound in; for a
 *     minimal root, all of it built in a tmpfs that pivot_root makes /;
 *     then every mount read-only at once (mount_setattr, recursive) and
 *     /tmp, /dev, the call's directory and the "write" paths writable again.
 *  7d. In the call's fresh network namespace ("network": false, or an egress
 *     allow-list): loopback brought up (SIOCSIFFLAGS; the child holds
 *     CAP_NET_ADMIN over that namespace, as root or in its user namespace),
 *     so the call may serve and reach itself on 127.0.0.1 and ::1 (a test
 *     suite that binds localhost) and nothing beyond: the namespace's lo is
 *     its own, not the host's. With an allow-list (egress.c, proxy.c), a
 *     TCP socket listening on 127.0.0.1:3128 there too, handed up to the
 *     daemon, which serves the proxy on it. Before the user is dropped (no
 *     capability is needed for port 3128, but for loopback). Nothing else
 *     is configured: no address but loopback, no route, no resolver.
 *     Cost, on a loaded 2-CPU VM: ~0.75 ms more in this child than the
 *     network namespace alone (the daemon's spawn_us_mean, 2,700 calls
 *     each), ~0.5 ms in a bare unshare() loop (farm-bench, 10 pairs of 200);
 *     the namespace itself costs ~5 ms there, which "network": false pays too.
 *     Loopback alone, without the proxy (bench/loopback_up, 20 pairs of 100
 *     children, load ~14 on 2 CPUs): ~0.2 ms of ioctls in this child (the
 *     loop's time), ~0.4-0.9 ms per call in all with the kernel's teardown
 *     of a namespace whose lo is up.
 *  8. chdir into the call's private directory (and with td_spawn.run_dir,
 *     toolexec sandbox's, into that after Landlock, which allows writes
 *     beneath "." and as the call's user, whose it is to enter).
 *  9. Resource limits: RLIMIT_CORE 0 (a crashing tool does not litter the
 *     disk) and the tool's limits. Before dropping privileges, so a root
 *     daemon can set hard limits above its own soft ones.
 *  9b. The capability bounding set emptied (PR_CAPBSET_DROP, every
 *     capability up to the kernel's last): nothing the call execs can ever
 *     gain one. Harmless to keep while no_new_privs holds, but nothing
 *     needs it. While we still hold CAP_SETPCAP: as
 *     root (a root daemon not given CAP_SETPCAP, as the unit and the fleet
 *     manifests give it none, keeps it: no_new_privs suffices), or in the
 *     call's user namespace; an unprivileged daemon without
 *     one (--containment pgroup) has no capability to give away. Not for a
 *     call that runs as root by the operator's choice ("user": "root", or a
 *     root daemon that switches no user): root without its capabilities is
 *     not what was asked for (test_confine_fs reads a mode-0 file as root).
 *     Skipped where the thread that clones has emptied its own set once
 *     (sandbox_bset.c, the spawner's: 41 system calls, each a new set of
 *     credentials, saved in every call); a call that stays root is then
 *     cloned from the thread that kept the full set. Not for a child in a
 *     user namespace of its own: the kernel gives it a full set.
 * 10. The worker's user: supplementary groups dropped, then gid, then uid
 *     (in that order: after setuid we could no longer change the others).
 *     Raw system calls, not glibc's setgroups/setgid/setuid, which make
 *     every thread change its credentials (a signal and a lock each), and
 *     the daemon's threads are not ours (as glibc's posix_spawn). Changing
 *     credentials clears PR_SET_PDEATHSIG, so step 3 is repeated. A gate
 *     (td_spawn.gate) is waited for first: what the user does is what
 *     toolexec sandbox's file-system refusal watch looks at.
 * 11. PR_SET_NO_NEW_PRIVS: exec can never gain privileges (setuid bits).
 * 11a. Landlock, where the kernel has it and the call has a view: writes
 *     only beneath its directory and what the view makes writable (/tmp,
 *     /dev, "write" paths); under --containment pgroup (no mount namespace)
 *     the only file-system layer. After no_new_privs, which it needs.
 *     lib/landlock.c, shared with warm calls: a warm template is spawned
 *     without it (its calls mount, which Landlock forbids) and each of its
 *     calls applies it (lib/warmview.c, run by its PID 1 in lib/warmp1.c).
 * 11b. The call's system-call filter, when it has one (sysfilter.c: the
 *     default set, the tool's "deny_syscalls"; with "network": false,
 *     socket(AF_UNIX) is refused). Where denials are reported, the filter
 *     is loaded with a notification listener (SECCOMP_FILTER_FLAG_NEW_LISTENER)
 *     which is handed up (step 1a) for sysnotify.c to answer. After no_new_privs,
 *     which is what lets an unprivileged process install one; last before
 *     exec, so none of our own steps runs under it. The program is built once
 *     (at start, or a tool's own at load). The small network:false filter
 *     alone was lost in the noise (12 pairs of 3,000 fork+exec of
 *     /bin/true with and without it: median ratio 1.02 CPU, 1.04 wall).
 *     The default filter with its listener costs more, mostly the kernel's
 *     per-number cache emulation at attach and the JIT (perf: ~40 + ~19 us
 *     on a loaded 2-CPU VM): whole runs of 600 calls through the daemon,
 *     default against "syscalls": "off", 10 pairs: median ratio 1.03 CPU
 *     (0.90-1.20), 1.01 wall (0.62-1.25).
 * 12. execve. On failure of any step, the step and errno are written to the
 *     report pipe and the child exits 127.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdpass.h"
#include "rawsig.h"
#include "rawsys.h"
#include "report.h"
#include "sandbox.h"
#include "sandbox_clone.h"
#include "sandbox_mounts.h"
#include "toolexec.h"

static void pipe_close(int p[2])
{
    if (p[0] >= 0)
        close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
    p[0] = p[1] = -1;
}

/* Leave the child with a raw exit_group, not _exit(): the sanitizers hook
 * every call to a noreturn function and would complain about the child's
 * borrowed stack. (So neither of these is declared noreturn.) */
static void child_exit(int code)
{
    for (;;)
        syscall(SYS_exit_group, code);
}

static void child_fail(int step)
{
    struct td_report_rec r = {TD_REPORT_FAILED, step, errno};
    ssize_t n = write(TD_REPORT_FD, &r, sizeof(r));
    (void)n;
    child_exit(127);
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The signals whose disposition is not the default in the daemon (libuv's
 * handlers, SIGPIPE ignored, a sanitizer's handlers): the only ones the
 * child must reset, taken once, after the daemon has installed them all. */
static int changed[NSIG];
static int n_changed = -1;

static void snapshot_signals(void)
{
    n_changed = 0;
    for (int sig = 1; sig < NSIG; sig++) {
        if (te_sig_handler(sig) != SIG_DFL) /* 32 and 33 too (rawsig.h) */
            changed[n_changed++] = sig;
    }
}

/* Step 7d (see the top); -1 with errno set. */
static int egress_listener(const struct td_spawn *s)
{
    int fd = te_loopback_listener(s->proxy_port);
    if (fd < 0)
        return -1;
    int rc = td_sandbox_hand_over(TD_HAND_PROXY, fd);
    int e = errno;
    close(fd); /* the daemon has its own copy */
    errno = e;
    return rc;
}

struct child_args {
    const struct td_spawn *s;
    pid_t parent;
    int in, out, err, ex;
    int ho;          /* the child's end of the hand-over socket; -1: none */
    int join;        /* cgroup.procs to write, when not born in the cgroup */
    bool root;       /* the daemon runs as root: the child may drop capabilities */
    bool spare;      /* made ahead: waits on fd 4 for its call (td_sandbox_prepare) */
    bool spare_init; /* a spare that execs its init ahead, which then waits */
    bool bset_empty; /* born with an empty bounding set (sandbox_bset.c) */
    bool mknod;      /* may make device nodes (TD_FS_NODE, sandbox_mounts.c) */
};

/* a tool the operator runs as root keeps what root is (its view is its
 * limit: "a tool that runs as root can undo all of this") */
static bool stays_root(const struct td_spawn *s, bool root)
{
    return s->uid == 0 || (s->uid == (uid_t)-1 && root);
}

/* Step 9b (see the top): up to the first EINVAL, which is past the
 * kernel's last capability; -1 with errno set. A root daemon without
 * CAP_SETPCAP (the DaemonSet's and the Nomad job's capabilities, as the
 * systemd unit's) cannot empty it: no_new_privs (step 11) still keeps
 * whatever the call execs from gaining one, so the drop is skipped. */
static int drop_bounding_set(void)
{
    for (long cap = 0;; cap++) {
        long r = te_sys(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0);
        if (r == -EPERM && cap == 0 && !td_sandbox_have_cap(CAP_SETPCAP))
            return 0;
        if (r == -EINVAL && cap > 0)
            return 0;
        if (TE_SYS_FAILED(r)) {
            errno = (int)-r;
            return -1;
        }
    }
}

/* Step 10 (see the top), raw; -1 with errno set. */
static int drop_user(const struct td_spawn *s, uid_t uid, gid_t gid)
{
    td_sandbox_gate_wait(s->gate);
    long r = te_sys(SYS_setgroups, 0, 0, 0, 0);
    if (!TE_SYS_FAILED(r))
        r = te_sys(SYS_setresgid, gid, gid, gid, 0);
    if (!TE_SYS_FAILED(r))
        r = te_sys(SYS_setresuid, uid, uid, uid, 0);
    if (TE_SYS_FAILED(r)) {
        errno = (int)-r;
        return -1;
    }
    return 0;
}

/* Step 11b (see the top); -1 with errno set. With a listener, nothing
 * between loading the filter and exec may be a denied call: the daemon
 * that would answer it is suspended in clone() until we exec. */
static int attach_filter(const struct td_spawn *s)
{
    if (!s->filter_notify)
        return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, s->filter);
    long fd =
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, s->filter);
    if (fd < 0)
        return -1;
    /* Not handed up, the listener would close at exec: the tool's denied
     * calls would then fail with ENOSYS, unreported. Refuse instead. */
    int rc = td_sandbox_hand_over(TD_HAND_SECCOMP, (int)fd);
    close((int)fd); /* the daemon's copy is the one that counts */
    return rc;
}

/* A spare, once set up to its user (step 10): "ready" on fd 4, then its
 * call: the call's stdin, stdout, stderr and report pipe, with its
 * environment (NUL-terminated strings, one after another). The report pipe
 * goes onto fd 3 in place of the one it was made with (its failures from
 * here on are the call's). A spare runs in a copy of the spawner's memory,
 * not in it (td_sandbox_prepare()), so it may allocate. The spawner's end
 * closing (the spare dropped) ends it quietly. */
static char *const *spare_take(const struct td_spawn *s)
{
    if (write(TD_HANDOVER_FD, "R", 1) != 1)
        child_exit(0);
    static char buf[TD_SPARE_ENV_MAX];
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
    te_fds_space u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_room(&m, &u, TD_SANDBOX_ENDS);
    ssize_t n;
    while ((n = recvmsg(TD_HANDOVER_FD, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    int fds[TD_SANDBOX_ENDS];
    size_t nfds = n > 0 ? te_fds_take(&m, fds, TD_SANDBOX_ENDS) : 0;
    if (n <= 0 || nfds != TD_SANDBOX_ENDS || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
        child_exit(0);
    buf[n] = '\0';
    if (dup3(fds[3], TD_REPORT_FD, s->init ? 0 : O_CLOEXEC) < 0)
        child_exit(127);
    if (dup2(fds[0], 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[2], 2) < 0)
        child_fail(TD_STEP_DUP);
    for (int i = 0; i < TD_SANDBOX_ENDS; i++)
        close(fds[i]);
    size_t count = 0;
    for (ssize_t i = 0; i < n; i++)
        count += buf[i] == '\0';
    char **env = calloc(count + 1, sizeof(*env));
    if (!env)
        child_fail(TD_STEP_EXEC);
    size_t k = 0;
    for (ssize_t i = 0; i < n && k < count; i += (ssize_t)strlen(buf + i) + 1)
        env[k++] = buf + i;
    return env;
}

/* Runs in the child, on its own stack but in the parent's memory (see the
 * top and sandbox_clone.c): it may only make system calls and touch its own
 * locals. A spare runs it in a copy of the memory instead
 * (td_sandbox_prepare). */
static int child(void *arg)
{
    const struct child_args *a = arg;
    const struct td_spawn *s = a->s;
    /* With an init, the pipe stays open across exec: the init reports the
     * tool's fate on it. */
    int cloexec = s->init ? 0 : O_CLOEXEC;
    if (a->ex != TD_REPORT_FD ? dup3(a->ex, TD_REPORT_FD, cloexec) < 0
                              : fcntl(TD_REPORT_FD, F_SETFD, cloexec ? FD_CLOEXEC : 0) < 0)
        child_exit(127);
    if (a->ho >= 0 && dup3(a->ho, TD_HANDOVER_FD, O_CLOEXEC) < 0)
        child_exit(127);
    if (a->join >= 0 && write(a->join, "0", 1) != 1)
        child_fail(TD_STEP_CGROUP);
    if (a->spare) /* told apart from the spawner in ps until its exec */
        prctl(PR_SET_NAME, "toolexecd-spare");
    if (setsid() < 0)
        child_fail(TD_STEP_SETSID);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        child_fail(TD_STEP_PDEATHSIG);
    if (getppid() != ((s->ns_flags & CLONE_NEWPID) ? 0 : a->parent))
        child_exit(127);
    for (int i = 0; i < n_changed; i++)
        te_sig_default(changed[i]);
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        child_fail(TD_STEP_SIGNALS);
    if (!a->spare && (dup2(a->in, 0) < 0 || dup2(a->out, 1) < 0 || dup2(a->err, 2) < 0))
        child_fail(TD_STEP_DUP);
    if (close_range(a->ho >= 0 ? TD_HANDOVER_FD + 1 : TD_REPORT_FD + 1, ~0U, 0) < 0)
        child_fail(TD_STEP_CLOSE);
    if ((s->ns_flags & CLONE_NEWUSER) && (write_file("/proc/self/setgroups", "deny") < 0 ||
                                          write_file("/proc/self/uid_map", s->uid_map) < 0 ||
                                          write_file("/proc/self/gid_map", s->gid_map) < 0))
        child_fail(TD_STEP_USERNS);
    if ((s->ns_flags & CLONE_NEWNS) && td_sandbox_mounts(s, a->mknod) < 0)
        child_fail(TD_STEP_MOUNT);
    if (s->proxy_port > 0 && egress_listener(s) < 0)
        child_fail(TD_STEP_EGRESS);
    if ((s->ns_flags & CLONE_NEWNET) && s->proxy_port <= 0 && te_loopback_up() < 0)
        child_fail(TD_STEP_LOOPBACK);
    if (chdir(s->cwd) < 0)
        child_fail(TD_STEP_CHDIR);
    struct rlimit zero = {0, 0};
    if (setrlimit(RLIMIT_CORE, &zero) < 0)
        child_fail(TD_STEP_RLIMIT);
    for (size_t i = 0; i < s->nrlimits; i++)
        if (setrlimit(s->rlimits[i].resource, &s->rlimits[i].lim) < 0)
            child_fail(TD_STEP_RLIMIT);
    if ((a->root || (s->ns_flags & CLONE_NEWUSER)) && !stays_root(s, a->root) && !a->bset_empty &&
        drop_bounding_set() < 0)
        child_fail(TD_STEP_CAPS);
    if (s->uid != (uid_t)-1) {
        if (drop_user(s, s->uid, s->gid) < 0)
            child_fail(TD_STEP_USER);
        /* A credential change clears the parent-death signal: set it again,
         * and check again that the daemon did not die in between. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
            child_fail(TD_STEP_PDEATHSIG);
        if (getppid() != ((s->ns_flags & CLONE_NEWPID) ? 0 : a->parent))
            child_exit(127);
    }
    char *const *envp = s->envp;
    if (a->spare && !a->spare_init)
        envp = spare_take(s);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        child_fail(TD_STEP_NNP);
    /* step 11a: lib/landlock.c, shared with warm calls (lib/warmview.c) */
    if (s->landlock_abi > 0 && te_landlock_writes(s->landlock_abi, s->ll_write) < 0)
        child_fail(TD_STEP_LANDLOCK);
    if (s->run_dir && chdir(s->run_dir) < 0)
        child_fail(TD_STEP_CHDIR);
    if (s->filter && attach_filter(s) < 0)
        child_fail(TD_STEP_SECCOMP);
    /* the init takes the call, the tool's argv with it, on fd 4 (init.c) */
    char *const bare[] = {s->argv[0], NULL};
    if (a->spare_init && fcntl(TD_HANDOVER_FD, F_SETFD, 0) < 0)
        child_fail(TD_STEP_CLOSE);
    execve(s->argv[0], a->spare_init ? bare : s->argv, envp);
    child_fail(TD_STEP_EXEC);
    return 127; /* not reached */
}

struct start {
    struct child_args *args;
    int flags, cgroup_dir, cgroup_procs;
};

/* Start child(args) with our memory and these flags; born in the cgroup
 * cgroup_dir (>= 0) if the kernel can, else args->join says the child must
 * move itself (sandbox_clone.c). The pid, or -1 with errno set. */
static pid_t start_here(void *arg)
{
    struct start *st = arg;
    /* a call: our memory, and we wait until it has exec'd; a spare: a copy
     * of it (it lives on), and we go on at once */
    int share = st->args->spare ? 0 : CLONE_VM | CLONE_VFORK;
    return td_sandbox_clone(child, st->args, share | st->flags, st->cgroup_dir, st->cgroup_procs,
                            &st->args->join);
}

/* start_here(), from this thread if its bounding set is what the child
 * needs: an empty one (sandbox_bset.c) spares the child step 9b, which a
 * child in a user namespace of its own takes anyway (the kernel gives it a
 * full set); a call that stays root is started from the thread that kept
 * the full set. */
static pid_t start_child(struct child_args *args, int flags, int cgroup_dir, int cgroup_procs)
{
    struct start st = {args, flags, cgroup_dir, cgroup_procs};
    /* CAP_MKNOD, learnt once: ours do not change; a user namespace of the
     * child's own has it only there, where mknod is refused anyway */
    static int cap_mknod = -1;
    if (cap_mknod < 0)
        cap_mknod = td_sandbox_have_cap(CAP_MKNOD);
    args->mknod = cap_mknod && !(flags & CLONE_NEWUSER);
    bool empty = td_sandbox_bset_empty();
    if (empty && stays_root(args->s, args->root))
        return td_sandbox_bset_full(start_here, &st);
    args->bset_empty = empty && !(flags & CLONE_NEWUSER);
    return start_here(&st);
}

int td_sandbox_hand_over(int kind, int fd)
{
    int k = kind;
    struct iovec iov = {.iov_base = &k, .iov_len = sizeof(k)};
    te_fds_space u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    te_fds_put(&m, &u, &fd, 1);
    return sendmsg(TD_HANDOVER_FD, &m, MSG_NOSIGNAL) == (ssize_t)sizeof(k) ? 0 : -1;
}

ssize_t td_sandbox_recv_handed(int sock, int flags, int handed[TD_HAND_COUNT])
{
    for (;;) {
        int kind;
        struct iovec iov = {.iov_base = &kind, .iov_len = sizeof(kind)};
        te_fds_space u;
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        te_fds_room(&m, &u, 1);
        ssize_t n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        int fd = -1;
        if (n >= 0 && te_fds_take(&m, &fd, 1) == 1) {
            if (n == (ssize_t)sizeof(kind) && kind >= 0 && kind < TD_HAND_COUNT &&
                handed[kind] < 0 && !(m.msg_flags & MSG_CTRUNC))
                handed[kind] = fd;
            else
                close(fd);
        }
        return n;
    }
}

/* Everything the child handed up, queued already (see td_sandbox_start). */
static void collect_handed(int sock, int handed[TD_HAND_COUNT])
{
    while (td_sandbox_recv_handed(sock, MSG_DONTWAIT, handed) > 0)
        ;
}

static void close_ends(int fds[], size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

int td_sandbox_pipes(bool in_socket, struct td_child *c, int theirs[TD_SANDBOX_ENDS])
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1};
    if ((in_socket ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in)
                   : pipe2(in, O_CLOEXEC)) < 0 ||
        pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ex, O_CLOEXEC) < 0) {
        int e = errno;
        pipe_close(in), pipe_close(out), pipe_close(err), pipe_close(ex);
        return -e;
    }
    fcntl(ex[0], F_SETFL, O_NONBLOCK);
    *c = (struct td_child){.pid = 0, .in = in[1], .out = out[0], .err = err[0], .report = ex[0]};
    for (int k = 0; k < TD_HAND_COUNT; k++)
        c->handed[k] = -1;
    theirs[0] = in[0], theirs[1] = out[1], theirs[2] = err[1], theirs[3] = ex[1];
    return 0;
}

pid_t td_sandbox_start(const struct td_spawn *s, int theirs[TD_SANDBOX_ENDS],
                       int handed[TD_HAND_COUNT], const char **what)
{
    for (int k = 0; k < TD_HAND_COUNT; k++)
        handed[k] = -1;
    /* The hand-over socket: only for a child that will use it (a datagram
     * socket pair costs ~3 us). */
    int ho[2] = {-1, -1};
    *what = "pipe";
    if (s->hand_over && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ho) < 0) {
        int e = errno;
        close_ends(theirs, TD_SANDBOX_ENDS);
        return -e;
    }
    /* The child needs fds 0-4 free for its own use (report.h); pipes are
     * always above 2 because main() makes sure 0, 1 and 2 are open. Any of
     * the child's ends on 3 or 4 is moved above, so that the child's dup2
     * onto 3 and 4 overwrites none of them. */
    int *ends[] = {&theirs[0], &theirs[1], &theirs[2], &theirs[3], &ho[1]};
    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
        if (*ends[i] < 0 || *ends[i] > TD_HANDOVER_FD)
            continue;
        int moved = fcntl(*ends[i], F_DUPFD_CLOEXEC, TD_HANDOVER_FD + 1);
        if (moved < 0) {
            int e = errno;
            close_ends(theirs, TD_SANDBOX_ENDS), pipe_close(ho);
            return -e;
        }
        close(*ends[i]);
        *ends[i] = moved;
    }
    if (n_changed < 0)
        snapshot_signals();
    sigset_t all, old;
    sigfillset(&all);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT};
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    struct child_args args = {s,  getpid(),       theirs[0], theirs[1], theirs[2], theirs[3], ho[1],
                              -1, geteuid() == 0, false,     false,     false,     false};
    pid_t pid = start_child(&args, s->ns_flags, s->cgroup_dir, s->cgroup_procs);
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close_ends(theirs, TD_SANDBOX_ENDS);
    if (ho[1] >= 0)
        close(ho[1]);
    if (pid < 0) {
        if (ho[0] >= 0)
            close(ho[0]);
        *what = "clone";
        return -fork_errno;
    }
    /* No setpgid() from here: with CLONE_VFORK we run again only once the
     * child has exec'd or died, so its setsid() came first. */
    if (ho[0] >= 0) {
        /* Everything the child handed up is queued already: it ran to exec
         * (or died) before clone() returned. */
        collect_handed(ho[0], handed);
        close(ho[0]);
    }
    return pid;
}

pid_t td_sandbox_prepare(const struct td_spawn *s, bool init_waits, int ctl, int report,
                         const char **what)
{
    *what = "pipe";
    int ends[2] = {ctl, report};
    for (int i = 0; i < 2; i++) {
        if (ends[i] > TD_HANDOVER_FD)
            continue;
        int moved = fcntl(ends[i], F_DUPFD_CLOEXEC, TD_HANDOVER_FD + 1);
        if (moved < 0) {
            int e = errno;
            close_ends(ends, 2);
            return -e;
        }
        close(ends[i]);
        ends[i] = moved;
    }
    if (n_changed < 0)
        snapshot_signals();
    struct child_args args = {s,  getpid(),       -1,   -1,    -1,    ends[1], ends[0],
                              -1, geteuid() == 0, true, false, false, false};
    args.spare_init = init_waits && s->init;
    pid_t pid = start_child(&args, s->ns_flags, s->cgroup_dir, s->cgroup_procs);
    int e = errno;
    close_ends(ends, 2);
    *what = "clone";
    return pid < 0 ? -e : pid;
}

int td_sandbox_spawn(const struct td_spawn *s, struct td_child *c, const char **what)
{
    int theirs[TD_SANDBOX_ENDS];
    *what = "pipe";
    int rc = td_sandbox_pipes(s->in_socket, c, theirs);
    if (rc < 0)
        return rc;
    pid_t pid = td_sandbox_start(s, theirs, c->handed, what);
    if (pid < 0) {
        int ours[] = {c->in, c->out, c->err, c->report};
        close_ends(ours, 4);
        return (int)pid;
    }
    c->pid = pid;
    return 0;
}

static int probe_child(void *arg)
{
    /* In a mount namespace: what each call's child does with it first and
     * last (step 7b); a /proc of our own is refused where the host's is
     * partly covered (some containers). Its errno is the exit code. */
    int code = 0;
    if (arg && (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0))
        code = errno & 0xff ? errno & 0xff : ECHILD;
    child_exit(code);
    return 0; /* not reached */
}

int td_sandbox_probe(int ns_flags)
{
    int join;
    pid_t pid = td_sandbox_clone(probe_child, (void *)(intptr_t)(ns_flags & CLONE_NEWNS),
                                 CLONE_VM | CLONE_VFORK | ns_flags, -1, -1, &join);
    if (pid < 0)
        return -errno;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? -WEXITSTATUS(status) : -ECHILD;
}
