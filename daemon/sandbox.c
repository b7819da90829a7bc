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
 *  1b. Into the call's cgroup, when it has one (cgroup.c), so that every
 *     process the call will ever have starts inside it and is reached by its
 *     limits and by cgroup.kill. Normally the child is born there: clone3()
 *     with CLONE_INTO_CGROUP, which costs nothing measurable, where moving a
 *     running process costs ~45 us alone and ~85 us with four forking
 *     neighbours (cgroup.procs takes a lock that every fork on the host
 *     shares). Where clone3() cannot do it (an old kernel, or no wrapper
 *     for this architecture below), the child writes "0" to the cgroup's
 *     cgroup.procs, a descriptor the daemon opened, whose credentials are
 *     what the kernel checks.
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
 *     blocked every signal around clone(), so none of the daemon's handlers
 *     can run in the child before the dispositions are reset. Only the
 *     signals the daemon changed need it (snapshot_signals()).
 *  5. The pipes onto 0, 1, 2 (dup2 clears close-on-exec on the copies).
 *  6. Everything above fd 3 closed: no daemon descriptor (client sockets,
 *     other workers' pipes) leaks into a worker.
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
 *  8. chdir into the call's private directory.
 *  9. Resource limits: RLIMIT_CORE 0 (a crashing tool does not litter the
 *     disk) and the tool's limits. Before dropping privileges, so a root
 *     daemon can set hard limits above its own soft ones.
 * 10. The worker's user: supplementary groups dropped, then gid, then uid
 *     (in that order: after setuid we could no longer change the others).
 *     Changing credentials clears PR_SET_PDEATHSIG, so step 3 is repeated.
 * 11. PR_SET_NO_NEW_PRIVS: exec can never gain privileges (setuid bits).
 * 11b. The call's system-call filter, when it has one (sysfilter.c: with
 *     "network": false, socket(AF_UNIX) is refused). After no_new_privs,
 *     which is what lets an unprivileged process install one; last before
 *     exec, so none of our own steps runs under it. The program is built once
 *     at start; attaching it is lost in the noise (farm-bench, 12 pairs of
 *     3,000 fork+exec of /bin/true with and without it: median ratio 1.02
 *     CPU, 1.04 wall, spread 0.88-1.10).
 * 12. execve. On failure of any step, the step and errno are written to the
 *     report pipe and the child exits 127.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/sched.h> /* struct clone_args, CLONE_INTO_CGROUP */
#include <linux/seccomp.h>
#include <sched.h>
#include <stdint.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"
#include "sandbox.h"

static const char *const step_names[TD_STEP_COUNT] = TD_STEP_NAMES;

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
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL)
            changed[n_changed++] = sig;
    }
}

/* Where the child keeps the call directory while the tmpfs covers it: the
 * first descriptor free after step 6, so its /proc path is a constant. */
#define CALLDIR_FD 4
#define CALLDIR_PROC "/proc/self/fd/4"

/* Step 7b (see the top); -1 with errno set. */
static int private_mounts(const struct td_spawn *s)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    for (const char *const *p = s->hide; p && *p; p++)
        if (mount("/dev/null", *p, NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
            return -1;
    int fd = open(s->cwd, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || (fd != CALLDIR_FD && (dup3(fd, CALLDIR_FD, O_CLOEXEC) < 0 || close(fd) < 0)))
        return -1;
    if (mount("tmpfs", s->work_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0711,size=4k,nr_inodes=64") < 0)
        return -1;
    /* the call directory's path again, in the tmpfs (a local copy: the
     * child must not write the daemon's memory) */
    char path[PATH_MAX];
    size_t n = strlen(s->cwd), i = strlen(s->work_dir);
    if (n >= sizeof(path) || n <= i + 1 || memcmp(s->cwd, s->work_dir, i) || s->cwd[i] != '/') {
        errno = EINVAL;
        return -1;
    }
    memcpy(path, s->cwd, n + 1);
    for (i++; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        path[i] = '\0';
        if (mkdir(path, 0711) < 0)
            return -1;
        path[i] = i < n ? '/' : '\0';
    }
    if (mount(CALLDIR_PROC, s->cwd, NULL, MS_BIND, NULL) < 0 || close(CALLDIR_FD) < 0)
        return -1;
    if (mount(NULL, s->work_dir, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL) < 0)
        return -1;
    return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

struct child_args {
    const struct td_spawn *s;
    pid_t parent;
    int in, out, err, ex;
    int join; /* cgroup.procs to write, when not born in the cgroup */
};

/* Runs in the child, on its own stack but in the parent's memory (see the
 * clone() below): it may only make system calls and touch its own locals. */
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
    if (a->join >= 0 && write(a->join, "0", 1) != 1)
        child_fail(TD_STEP_CGROUP);
    if (setsid() < 0)
        child_fail(TD_STEP_SETSID);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        child_fail(TD_STEP_PDEATHSIG);
    if (getppid() != ((s->ns_flags & CLONE_NEWPID) ? 0 : a->parent))
        child_exit(127);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int i = 0; i < n_changed; i++)
        sigaction(changed[i], &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        child_fail(TD_STEP_SIGNALS);
    if (dup2(a->in, 0) < 0 || dup2(a->out, 1) < 0 || dup2(a->err, 2) < 0)
        child_fail(TD_STEP_DUP);
    if (close_range(TD_REPORT_FD + 1, ~0U, 0) < 0)
        child_fail(TD_STEP_CLOSE);
    if ((s->ns_flags & CLONE_NEWUSER) && (write_file("/proc/self/setgroups", "deny") < 0 ||
                                          write_file("/proc/self/uid_map", s->uid_map) < 0 ||
                                          write_file("/proc/self/gid_map", s->gid_map) < 0))
        child_fail(TD_STEP_USERNS);
    if ((s->ns_flags & CLONE_NEWNS) && private_mounts(s) < 0)
        child_fail(TD_STEP_MOUNT);
    if (chdir(s->cwd) < 0)
        child_fail(TD_STEP_CHDIR);
    struct rlimit zero = {0, 0};
    if (setrlimit(RLIMIT_CORE, &zero) < 0)
        child_fail(TD_STEP_RLIMIT);
    for (size_t i = 0; i < s->nrlimits; i++)
        if (setrlimit(s->rlimits[i].resource, &s->rlimits[i].lim) < 0)
            child_fail(TD_STEP_RLIMIT);
    if (s->uid != (uid_t)-1) {
        if (setgroups(0, NULL) < 0 || setgid(s->gid) < 0 || setuid(s->uid) < 0)
            child_fail(TD_STEP_USER);
        /* A credential change clears the parent-death signal: set it again,
         * and check again that the daemon did not die in between. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
            child_fail(TD_STEP_PDEATHSIG);
        if (getppid() != ((s->ns_flags & CLONE_NEWPID) ? 0 : a->parent))
            child_exit(127);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        child_fail(TD_STEP_NNP);
    if (s->filter && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, s->filter) < 0)
        child_fail(TD_STEP_SECCOMP);
    execve(s->argv[0], s->argv, s->envp);
    child_fail(TD_STEP_EXEC);
    return 127; /* not reached */
}

/* The child's stack while it shares our memory. One is enough: CLONE_VFORK
 * suspends the (single) loop thread until the child has exec'd or exited. */
static char child_stack[64 * 1024] __attribute__((aligned(16)));

#if defined(__x86_64__)
/* clone3() running fn(arg) on a stack of its own, as clone() does: libc
 * has no wrapper for it. The child calls fn and leaves with exit_group()
 * right there, never returning into our frame (it shares our memory). */
static long clone3_run(struct clone_args *ca, int (*fn)(void *), void *arg)
{
    register long rax __asm__("rax") = SYS_clone3;
    register long rdi __asm__("rdi") = (long)ca;
    register long rsi __asm__("rsi") = sizeof(*ca);
    register long r12 __asm__("r12") = (long)fn;
    register long r13 __asm__("r13") = (long)arg;
    __asm__ volatile("syscall\n"
                     "test %%rax, %%rax\n"
                     "jnz 1f\n"
                     "xor %%ebp, %%ebp\n"
                     "mov %%r13, %%rdi\n"
                     "call *%%r12\n"
                     "mov %%eax, %%edi\n"
                     "mov $231, %%eax\n" /* SYS_exit_group */
                     "syscall\n"
                     "hlt\n"
                     "1:\n"
                     : "+r"(rax)
                     : "r"(rdi), "r"(rsi), "r"(r12), "r"(r13)
                     : "rcx", "r11", "memory");
    return rax;
}
static bool clone3_works = true;
#else
static long clone3_run(struct clone_args *ca, int (*fn)(void *), void *arg)
{
    (void)ca, (void)fn, (void)arg;
    return -ENOSYS;
}
static bool clone3_works = false;
#endif

/* Start child(args) with our memory and these flags; born in the cgroup
 * cgroup_dir (>= 0) if the kernel can, else args->join says the child must
 * move itself. The pid, or -1 with errno set. */
static pid_t start_child(struct child_args *args, int flags, int cgroup_dir, int cgroup_procs)
{
    args->join = cgroup_procs;
    if (cgroup_dir >= 0 && clone3_works) {
        struct clone_args ca = {
            .flags = (uint64_t)(CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP | flags),
            .exit_signal = SIGCHLD,
            .stack = (uint64_t)(uintptr_t)child_stack,
            .stack_size = sizeof(child_stack),
            .cgroup = (uint64_t)cgroup_dir,
        };
        args->join = -1;
        long r = clone3_run(&ca, child, args);
        if (r >= 0)
            return (pid_t)r;
        /* before Linux 5.7: no clone3 (ENOSYS) or no CLONE_INTO_CGROUP
         * (E2BIG, EINVAL); from then on, clone() and a move */
        if (r != -ENOSYS && r != -E2BIG && r != -EINVAL) {
            errno = (int)-r;
            return -1;
        }
        clone3_works = false;
        args->join = cgroup_procs;
    }
    return clone(child, child_stack + sizeof(child_stack), CLONE_VM | CLONE_VFORK | SIGCHLD | flags,
                 args);
}

int td_sandbox_spawn(const struct td_spawn *s, struct td_child *c, const char **what)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1};
    *what = "pipe";
    if ((s->in_socket ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in)
                      : pipe2(in, O_CLOEXEC)) < 0 ||
        pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
        pipe2(ex, O_CLOEXEC) < 0) {
        int e = errno;
        pipe_close(in), pipe_close(out), pipe_close(err), pipe_close(ex);
        return -e;
    }
    /* The child needs fds 0-3 free for its own use; pipes are always above
     * 2 because main() makes sure 0, 1 and 2 are open. Fd 3 may be one of
     * ours: the child moves the error pipe there first, so a pipe end that
     * is fd 3 must be the error pipe or be duplicated away. */
    if (in[0] == 3 || out[1] == 3 || err[1] == 3) {
        int *p = in[0] == 3 ? &in[0] : out[1] == 3 ? &out[1] : &err[1];
        int moved = fcntl(*p, F_DUPFD_CLOEXEC, 4);
        if (moved < 0) {
            int e = errno;
            pipe_close(in), pipe_close(out), pipe_close(err), pipe_close(ex);
            return -e;
        }
        close(*p);
        *p = moved;
    }
    if (n_changed < 0)
        snapshot_signals();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    struct child_args args = {s, getpid(), in[0], out[1], err[1], ex[1], -1};
    pid_t pid = start_child(&args, s->ns_flags, s->cgroup_dir, s->cgroup_procs);
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(in[0]), close(out[1]), close(err[1]), close(ex[1]);
    if (pid < 0) {
        close(in[1]), close(out[0]), close(err[0]), close(ex[0]);
        *what = "clone";
        return -fork_errno;
    }
    /* No setpgid() from here: with CLONE_VFORK we run again only once the
     * child has exec'd or died, so its setsid() came first. */
    fcntl(ex[0], F_SETFL, O_NONBLOCK);
    *c = (struct td_child){.pid = pid, .in = in[1], .out = out[0], .err = err[0], .report = ex[0]};
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
    pid_t pid = clone(probe_child, child_stack + sizeof(child_stack),
                      CLONE_VM | CLONE_VFORK | SIGCHLD | ns_flags,
                      (ns_flags & CLONE_NEWNS) ? child_stack : NULL);
    if (pid < 0)
        return -errno;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? -WEXITSTATUS(status) : -ECHILD;
}

void td_sandbox_report(int fd, struct td_report *r)
{
    struct td_report_rec rec;
    memset(r, 0, sizeof(*r));
    while (read(fd, &rec, sizeof(rec)) == (ssize_t)sizeof(rec)) {
        if (rec.type == TD_REPORT_FAILED && !r->failed) {
            r->failed = true;
            r->step = (unsigned)rec.a < TD_STEP_COUNT ? step_names[rec.a] : "setup";
            r->err = rec.b;
        } else if (rec.type == TD_REPORT_STATUS) {
            r->have_status = true;
            r->status = rec.a;
        }
    }
}
