/*
 * template_deny.c - whose a denied system call on a warm template's seccomp
 * listener is (template_int.h; reported as a cold call's are): a
 * call's, told by the PID namespace its process is in, or the template's.
 */
#include <poll.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox.h"
#include "sysnotify.h"
#include "template_int.h"

/* The PID namespace of pid, as its inode; 0 when it cannot be read (gone). */
uint64_t td_pidns_of(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
    return pid > 0 && stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static bool pidfd_alive(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

/* A forked call's namespace: its PID 1's, through the pidfd; asked only
 * when a denial needs it, and only while PID 1 lives (after the stat: so
 * the pid read was not reused meanwhile). */
static uint64_t call_ns(struct td_warm_call *c)
{
    if (c->ns || c->pidfd < 0)
        return c->ns;
    uint64_t ns = td_pidns_of(td_sandbox_pidfd_pid(c->pidfd));
    if (ns && pidfd_alive(c->pidfd))
        c->ns = ns;
    return c->ns;
}

/* pid's namespace, remembered for the last pid asked: a tool looping on a
 * denied call costs a poll() per call rather than a walk of /proc. 100,000
 * denied calls in a row, daemon CPU per call (loaded 2-CPU VM, 3 runs):
 * 8.1-9.6 us without, 3.9-4.3 us with, a cold call's 3.7-3.8 us. A pid's
 * namespace never changes, and while the process the pidfd holds lives,
 * its pid is not another's. */
static uint64_t pidns_cached(struct inst *in, pid_t pid)
{
    if (in->last_pidfd >= 0 && in->last_pid == pid && pidfd_alive(in->last_pidfd))
        return in->last_ns;
    if (in->last_pidfd >= 0)
        close(in->last_pidfd);
    in->last_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    uint64_t ns = td_pidns_of(pid);
    /* alive after the stat: the stat was of the process the pidfd holds */
    if (in->last_pidfd >= 0 && (!ns || !pidfd_alive(in->last_pidfd))) {
        close(in->last_pidfd);
        in->last_pidfd = -1;
    }
    in->last_pid = pid;
    in->last_ns = ns;
    return ns;
}

/* sysnotify.c's router for a template's listener: whose is pid's denial?
 * A process of a call is in the call's PID namespace (its stacked filter
 * refuses it any other), one of the template in the template's. */
int td_inst_route_denial(void *ctx, pid_t pid, struct td_denials **d)
{
    struct inst *in = ctx;
    if (pid == in->tpid || pid == in->pid)
        return TD_SYSNOTIFY_OWN;
    uint64_t ns = pidns_cached(in, pid);
    if (!in->ns)
        in->ns = td_pidns_of(in->pid);
    if (!ns || ns == in->ns)
        return TD_SYSNOTIFY_OWN;
    struct td_warm_call *c;
    bool unforked = false;
    TAILQ_FOREACH(c, &in->calls, link) {
        if (call_ns(c) == ns) {
            *d = c->denied;
            return TD_SYSNOTIFY_CALL;
        }
        unforked |= !c->forked;
    }
    /* a call whose "forked" is still on its way, or none of ours (the
     * template may make namespaces of its own) */
    return unforked ? TD_SYSNOTIFY_LATER : TD_SYSNOTIFY_OWN;
}
