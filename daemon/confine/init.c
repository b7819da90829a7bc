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
 * This runs once per call, so its own start-up is on every call's path. On
 * x86-64 and arm64 it is built without the C library (raw system calls, our
 * own _start): exec'ing it costs about a quarter of a dynamically linked
 * program (see bench/). Elsewhere the same code uses libc's syscall().
 */
#include <fcntl.h>
#include <linux/prctl.h>
#include <signal.h>
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

__attribute__((noreturn)) static void run(long argc, char **argv, char **envp)
{
    /* Not dumpable: its /proc files (mem, fd/3) belong to root and the
     * call's processes, of its uid but without CAP_SYS_PTRACE, can neither
     * open them nor take its report pipe with pidfd_getfd; that pipe says
     * how the call ended and what it used (a call took
     * it and reported 1 ms for 800 ms of CPU). The tool's own exec makes
     * it dumpable again, as any program. */
    te_sys(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0);
    if (argc < 2)
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
