/*
 * rawsys.h - te_sys(): a system call without the C library, returning
 * -errno instead of setting it. For code that runs where the C library must
 * not: toolexecd-init (built without one) and a warm call's P1, which shares
 * the template's memory (CLONE_VM), so a libc wrapper's failure would write
 * the template's errno while it runs (initwait.h, lib/warm.c). Where there
 * is no raw form here (TE_RAWSYS undefined), libc's syscall() stands in, and
 * warm.c then gives P1 a copy of the memory instead of sharing it.
 */
#ifndef TE_RAWSYS_H
#define TE_RAWSYS_H

#include <errno.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define TE_RAWSYS 1
static inline long te_sys(long n, long a, long b, long c, long d)
{
    register long r10 __asm__("r10") = d;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__)
#define TE_RAWSYS 1
static inline long te_sys(long n, long a, long b, long c, long d)
{
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
}
#else
#include <unistd.h>
static inline long te_sys(long n, long a, long b, long c, long d)
{
    long r = syscall(n, a, b, c, d);
    return r < 0 ? -(long)errno : r;
}
#endif

/* Raw system calls return -errno. */
#define TE_SYS_FAILED(r) ((unsigned long)(r) > -4096UL)

#endif
