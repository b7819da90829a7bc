/*
 * toolexecd-init - PID 1 of one call's PID namespace.
 *
 *   toolexecd-init TOOL [ARG...]      (environment passed to TOOL as is)
 *
 * The daemon starts each call in a fresh PID namespace with this program as
 * its first process. It starts the tool as PID 2, waits for it, reports the
 * tool's resource use and wait status to the daemon on fd 3 and exits. Before it
 * reports, it kills and reaps every other process left in the namespace,
 * including strays that double-forked and called setsid() (that is the
 * guarantee a process group kill cannot give), so a report means the call's
 * processes are all gone and the daemon need not wait for this exit and the
 * namespace teardown behind it. If the daemon dies, PR_SET_PDEATHSIG (set before
 * exec) kills this process and with it the namespace.
 *
 * The tool is not PID 1 itself because PID 1 ignores signals it has no
 * handler for: a tool that raise()s SIGSEGV must die like anywhere else.
 *
 *   toolexecd-init                    (a spare's: fd 4 open)
 *
 * A spare (td_sandbox_prepare) execs it ahead of its call, with no
 * argument and its end of the spawner's socket left open on fd 4 (never
 * open otherwise: a call's hand-over socket is close-on-exec): it then
 * says "R" there, waits for the call's stdin, stdout, stderr and report
 * pipe with the tool's argv and environment (one message: spare_call()),
 * puts them in place, closes fd 4 and goes on as above, so that a call
 * that takes a spare pays for a message and a fork, not for an exec.
 *
 * This runs once per call, so its own start-up is on every call's path. On
 * x86-64 and arm64 it is built without the C library (raw system calls, our
 * own _start): exec'ing it costs about a quarter of a dynamically linked
 * program (see bench/). Elsewhere the same code uses libc's syscall().
 */
#include <fcntl.h>
#include <linux/prctl.h>
#include <signal.h>
#include <sys/socket.h> /* the message's types and CMSG_ macros only */
#include <sys/syscall.h>

#include "initwait.h" /* the raw system calls, and the wait shared with warm calls */
#include "report.h"

#if defined(TD_INIT_NOLIBC) && defined(__x86_64__)
/* The kernel enters with argc at the stack pointer. */
__asm__(".text\n.global _start\n_start:\n"
        "  xor %rbp, %rbp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call init_main\n  hlt\n");
#elif defined(TD_INIT_NOLIBC) && defined(__aarch64__)
__asm__(".text\n.global _start\n_start:\n  mov x0, sp\n  bl init_main\n  brk #0\n");
#endif

/* A spare's call, taken on fd 4. The message: the tool's argv count in
 * decimal, its argv, then its environment, each NUL-terminated; the spare
 * is exec'd with no argument, so that, waiting, it shows no tool's command
 * line. Its argv ([self, tool, args...], envp after it) put in *argv, or
 * false when the spawner dropped the spare (its end closed). */
static char spare_msg[TD_SPARE_INIT_BYTES + 1];
static char *spare_ptrs[TD_SPARE_INIT_STRINGS + 3];

static long text_len(const char *p)
{
    long n = 0;
    while (p[n])
        n++;
    return n;
}

static int spare_call(char *self, char ***argv, char ***envp)
{
    char ready = 'R';
    if (te_sys(SYS_write, TD_HANDOVER_FD, (long)&ready, 1, 0) != 1)
        return 0;
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = spare_msg, .iov_len = TD_SPARE_INIT_BYTES};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    long n;
    while ((n = te_sys(SYS_recvmsg, TD_HANDOVER_FD, (long)&m, MSG_CMSG_CLOEXEC, 0)) == -EINTR)
        ;
    struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
    if (!c || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || c->cmsg_level != SOL_SOCKET ||
        c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(4 * sizeof(int)))
        return 0;
    int fds[4];
    const unsigned char *data = CMSG_DATA(c);
    for (int i = 0; i < 4; i++) /* byte by byte: CMSG_DATA is not aligned for int */
        for (unsigned k = 0; k < sizeof(int); k++)
            ((unsigned char *)&fds[i])[k] = data[i * sizeof(int) + k];
    /* each above 4 first (one lands on 0-2 only where the daemon runs
     * without them), so that putting one in place closes none of the others */
    for (int i = 0; i < 4; i++)
        if (fds[i] <= TD_HANDOVER_FD) {
            long moved = te_sys(SYS_fcntl, fds[i], F_DUPFD_CLOEXEC, TD_HANDOVER_FD + 1, 0);
            if (TE_SYS_FAILED(moved))
                te_init_quit(127);
            fds[i] = (int)moved;
        }
    /* from here on its failures are the call's, on the call's report pipe */
    if (TE_SYS_FAILED(te_sys(SYS_dup3, fds[3], TD_REPORT_FD, 0, 0)))
        te_init_quit(127);
    for (int i = 0; i < 3; i++) {
        long r = te_sys(SYS_dup3, fds[i], i, 0, 0);
        if (TE_SYS_FAILED(r)) {
            te_init_report(TD_REPORT_FAILED, TD_STEP_DUP, (int)-r);
            te_init_quit(127);
        }
    }
    for (int i = 0; i < 4; i++)
        te_sys(SYS_close, fds[i], 0, 0, 0);
    te_sys(SYS_close, TD_HANDOVER_FD, 0, 0, 0);
    spare_msg[n] = '\0';
    long i = 0, count = 0;
    while (i < n && spare_msg[i] >= '0' && spare_msg[i] <= '9' && count < TD_SPARE_INIT_STRINGS)
        count = count * 10 + (spare_msg[i++] - '0');
    size_t k = 0, max = sizeof(spare_ptrs) / sizeof(spare_ptrs[0]) - 2;
    spare_ptrs[k++] = self;
    for (i++; i < n && count > 0 && k < max; i += text_len(spare_msg + i) + 1, count--)
        spare_ptrs[k++] = spare_msg + i;
    spare_ptrs[k++] = 0;
    *argv = spare_ptrs;
    *envp = spare_ptrs + k;
    for (; i < n && k < max; i += text_len(spare_msg + i) + 1)
        spare_ptrs[k++] = spare_msg + i;
    spare_ptrs[k] = 0;
    if (count) { /* not what the spawner sends */
        te_init_report(TD_REPORT_FAILED, TD_STEP_EXEC, EINVAL);
        te_init_quit(127);
    }
    return 1;
}

__attribute__((noreturn)) static void run(long argc, char **argv, char **envp)
{
    /* Not dumpable: its /proc files (mem, fd/3) belong to root and the
     * call's processes, of its uid but without CAP_SYS_PTRACE, can neither
     * open them nor take its report pipe with pidfd_getfd; that pipe says
     * how the call ended and what it used (a call took
     * it and reported 1 ms for 800 ms of CPU). The tool's own exec makes
     * it dumpable again, as any program. */
    te_sys(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0);
    if (argc == 1 && !TE_SYS_FAILED(te_sys(SYS_fcntl, TD_HANDOVER_FD, F_GETFD, 0, 0))) {
        /* named as a call's init only once it is one (ps, the tests) */
        te_sys(SYS_prctl, PR_SET_NAME, (long)"toolexecd-spare", 0, 0);
        if (!spare_call(argv[0], &argv, &envp))
            te_init_quit(0); /* a spare dropped unused: nothing to report */
        te_sys(SYS_prctl, PR_SET_NAME, (long)"toolexecd-init", 0, 0);
        argc = 2; /* at least the tool (checked by the spawner) */
    }
    if (argc < 2 || !argv[1])
        te_init_quit(127);
    /* the tool must not inherit the report pipe */
    te_sys(SYS_fcntl, TD_REPORT_FD, F_SETFD, FD_CLOEXEC, 0);
    /* A plain fork: this process is a few pages, so it costs little (a
     * vfork-style clone(CLONE_VM | CLONE_VFORK) in its place measured no
     * different here: 5 x 200 spawns of this init in a PID namespace,
     * paired, and whole runs through the daemon, stop 20). */
    long tool = te_sys(SYS_clone, SIGCHLD, 0, 0, 0);
    if (tool == 0) {
        long err = te_sys(SYS_execve, (long)argv[1], (long)(argv + 1), (long)envp, 0);
        te_init_report(TD_REPORT_FAILED, TD_STEP_EXEC, (int)-err);
        te_init_quit(127);
    }
    if (TE_SYS_FAILED(tool)) {
        te_init_report(TD_REPORT_FAILED, TD_STEP_SPAWN, (int)-tool);
        te_init_quit(127);
    }
    te_init_finish(tool);
}

#if defined(TD_INIT_NOLIBC) && (defined(__x86_64__) || defined(__aarch64__))
/* Called by _start with the initial stack: argc, argv..., NULL, envp... */
__attribute__((noreturn, used)) void init_main(long *sp)
{
    char **argv = (char **)(sp + 1);
    run(sp[0], argv, argv + sp[0] + 1);
}
#else
extern char **environ;
int main(int argc, char **argv)
{
    run(argc, argv, environ);
}
#endif
