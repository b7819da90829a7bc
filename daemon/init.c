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
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "report.h"

#if defined(TD_INIT_NOLIBC) && defined(__x86_64__)
static long sys(long n, long a, long b, long c, long d)
{
    register long r10 __asm__("r10") = d;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
}
/* The kernel enters with argc at the stack pointer. */
__asm__(".text\n.global _start\n_start:\n"
        "  xor %rbp, %rbp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call init_main\n  hlt\n");
#elif defined(TD_INIT_NOLIBC) && defined(__aarch64__)
static long sys(long n, long a, long b, long c, long d)
{
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
}
__asm__(".text\n.global _start\n_start:\n  mov x0, sp\n  bl init_main\n  brk #0\n");
#else
#include <unistd.h>
static long sys(long n, long a, long b, long c, long d)
{
    long r = syscall(n, a, b, c, d);
    return r < 0 ? -(long)__errno_location()[0] : r;
}
#endif

/* Raw system calls return -errno. */
#define FAILED(r) ((unsigned long)(r) > -4096UL)

static void report(int type, int a, int b)
{
    struct td_report_rec r;
    r.type = type;
    r.a = a;
    r.b = b;
    sys(SYS_write, TD_REPORT_FD, (long)&r, sizeof(r), 0);
}

/* The tool's resource use (and that of every descendant reaped so far):
 * ours is a few pages and no CPU. */
static void report_usage(void)
{
    struct rusage ru;
    if (FAILED(sys(SYS_getrusage, RUSAGE_CHILDREN, (long)&ru, 0, 0)))
        return;
    report(TD_REPORT_CPU, (int)(ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000),
           (int)(ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000));
    report(TD_REPORT_RSS, (int)ru.ru_maxrss, 0);
}

__attribute__((noreturn)) static void quit(int code)
{
    for (;;)
        sys(SYS_exit_group, code, 0, 0, 0);
}

__attribute__((noreturn)) static void run(long argc, char **argv, char **envp)
{
    if (argc < 2)
        quit(127);
    /* the tool must not inherit the report pipe */
    sys(SYS_fcntl, TD_REPORT_FD, F_SETFD, FD_CLOEXEC, 0);
    /* A plain fork: this process is a few pages, so it costs little. */
    long tool = sys(SYS_clone, SIGCHLD, 0, 0, 0);
    if (tool == 0) {
        long err = sys(SYS_execve, (long)argv[1], (long)(argv + 1), (long)envp, 0);
        report(TD_REPORT_FAILED, TD_STEP_EXEC, (int)-err);
        quit(127);
    }
    if (FAILED(tool)) {
        report(TD_REPORT_FAILED, TD_STEP_SPAWN, (int)-tool);
        quit(127);
    }
    /* Our copies of the pipes would hold the worker's stdout open after the
     * tool is gone. */
    sys(SYS_close, 0, 0, 0, 0);
    sys(SYS_close, 1, 0, 0, 0);
    sys(SYS_close, 2, 0, 0, 0);
    for (;;) {
        int status = 0;
        long p = sys(SYS_wait4, -1, (long)&status, 0, 0);
        if (p == tool) {
            /* Every other process of the namespace killed and reaped
             * before the status goes out: the daemon may then complete the
             * call at once, without waiting for our exit, whose namespace
             * teardown (mounts, /proc) costs ~0.35-0.65 ms that no call
             * needs to wait for (300 clones of a child in a PID and
             * mount namespace: 350-660 us from its last write to its reap, 25 us
             * without the namespaces). Only what cannot die
             * (uninterruptible sleep) keeps us here, as it would keep the
             * kernel's zap of the namespace. */
            sys(SYS_kill, -1, SIGKILL, 0, 0);
            for (;;) {
                long r = sys(SYS_wait4, -1, 0, 0, 0);
                if (FAILED(r) && r != -EINTR)
                    break; /* ECHILD: none left */
            }
            report_usage();
            report(TD_REPORT_STATUS, status, 0);
            quit(0);
        }
        if (FAILED(p) && p != -EINTR)
            quit(127);
    }
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
