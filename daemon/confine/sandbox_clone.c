/*
 * sandbox_clone.c - how sandbox.c's children are started: clone() on the
 * one child stack, in the daemon's memory for a call's child and the probe
 * (CLONE_VM | CLONE_VFORK, see sandbox.c's top), or clone3() born in the
 * call's cgroup (CLONE_INTO_CGROUP, step 1b) where the kernel can, with
 * clone() and a move by the child where it cannot. Called by sandbox.c
 * only; calls nothing of the daemon's.
 */
#include <errno.h>
#include <linux/sched.h> /* struct clone_args, CLONE_INTO_CGROUP */
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox_clone.h"

/* The child's stack while it shares our memory. One is enough: only the
 * loop thread spawns, and CLONE_VFORK suspends it until the child has
 * exec'd or exited. The daemon's other threads (libuv's pool) run on
 * meanwhile, in the memory the child shares: hence no lock, no malloc and
 * no glibc call that signals every thread (the setuid family) in it. */
static char child_stack[64 * 1024] __attribute__((aligned(16)));

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TD_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TD_ASAN 1
#endif
#ifdef TD_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* Before each child on child_stack: under AddressSanitizer the last child,
 * which shared our memory, exec'd without unwinding, so the shadow still
 * marks its frames' redzones, and the next child's frames tripped on them
 * (a stack-buffer-underflow in te_sig_default at the second call). */
static void child_stack_fresh(void)
{
#ifdef TD_ASAN
    ASAN_UNPOISON_MEMORY_REGION(child_stack, sizeof(child_stack));
#endif
}

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

pid_t td_sandbox_clone(int (*fn)(void *), void *arg, int flags, int cgroup_dir, int cgroup_procs,
                       int *join)
{
    *join = cgroup_procs;
    child_stack_fresh();
    if (cgroup_dir >= 0 && clone3_works) {
        struct clone_args ca = {
            .flags = (uint64_t)(CLONE_INTO_CGROUP | flags),
            .exit_signal = SIGCHLD,
            .stack = (uint64_t)(uintptr_t)child_stack,
            .stack_size = sizeof(child_stack),
            .cgroup = (uint64_t)cgroup_dir,
        };
        *join = -1;
        long r = clone3_run(&ca, fn, arg);
        if (r >= 0)
            return (pid_t)r;
        /* before Linux 5.7: no clone3 (ENOSYS) or no CLONE_INTO_CGROUP
         * (E2BIG, EINVAL); from then on, clone() and a move */
        if (r != -ENOSYS && r != -E2BIG && r != -EINVAL) {
            errno = (int)-r;
            return -1;
        }
        clone3_works = false;
        *join = cgroup_procs;
    }
    return clone(fn, child_stack + sizeof(child_stack), SIGCHLD | flags, arg);
}
