/*
 * tw_sysprobe.c - testworker: sysprobe (test_confine_sys.py): calls the default
 * system-call filter denies, tried; and the warm denials (test_warm_denials.py):
 * two calls trying theirs at once ("sysprobe-meet"), a template
 * making its own ("deny-at-start").
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/io_uring.h>
#include <linux/sched.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include "testworker.h"

/* One attempt at a call the default system-call filter denies; "ok" or the
 * errno's name. Each is the real call, made with syscall() so that no
 * library wrapper stands in between. */
static json_t *sys_attempt(const char *what)
{
    long rc = -1;
    errno = 0;
    if (strcmp(what, "ptrace") == 0) {
        /* a sibling: a process of our own call, which ptrace_scope would
         * allow us to trace */
        pid_t pid = fork();
        if (pid == 0) {
            for (;;)
                pause();
        }
        if (pid < 0)
            return errno_json(errno);
        rc = syscall(SYS_ptrace, PTRACE_ATTACH, pid, 0, 0);
        int e = errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        errno = e;
    } else if (strcmp(what, "io_uring_setup") == 0) {
        struct io_uring_params p;
        memset(&p, 0, sizeof(p));
        rc = syscall(SYS_io_uring_setup, 1, &p);
    } else if (strcmp(what, "unshare_user") == 0) {
        rc = syscall(SYS_unshare, CLONE_NEWUSER);
    } else if (strcmp(what, "clone_newuser") == 0 || strcmp(what, "clone_plain") == 0) {
        long flags = SIGCHLD | (what[6] == 'n' ? CLONE_NEWUSER : 0);
        rc = syscall(SYS_clone, flags, 0, 0, 0, 0);
        if (rc == 0)
            syscall(SYS_exit_group, 0);
        if (rc > 0)
            waitpid((pid_t)rc, NULL, 0);
    } else if (strcmp(what, "clone3") == 0) {
        struct clone_args ca;
        memset(&ca, 0, sizeof(ca));
        ca.flags = CLONE_NEWUSER;
        ca.exit_signal = SIGCHLD;
        rc = syscall(SYS_clone3, &ca, sizeof(ca));
        if (rc == 0)
            syscall(SYS_exit_group, 0);
        if (rc > 0)
            waitpid((pid_t)rc, NULL, 0);
    } else if (strcmp(what, "mount") == 0) {
        rc = syscall(SYS_mount, "none", ".", "tmpfs", 0, NULL);
    } else if (strcmp(what, "bpf") == 0) {
        char attr[128];
        memset(attr, 0, sizeof(attr));
        rc = syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, sizeof(attr));
    } else if (strcmp(what, "netlink") == 0) {
        rc = socket(AF_NETLINK, SOCK_RAW, 15 /* NETLINK_KOBJECT_UEVENT */);
    } else if (strcmp(what, "netlink_route") == 0) {
        rc = socket(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE: name resolution's */);
    } else if (strcmp(what, "packet") == 0) {
        rc = socket(AF_PACKET, SOCK_RAW, 0);
    } else if (strcmp(what, "inet") == 0) {
        rc = socket(AF_INET, SOCK_STREAM, 0);
    } else if (strcmp(what, "keyctl") == 0) {
        rc = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
    } else if (strcmp(what, "sched_yield") == 0) {
        rc = syscall(SYS_sched_yield);
#if defined(__x86_64__)
    } else if (strcmp(what, "i386") == 0) {
        /* i386's getpid (20) through the 32-bit entry: the filter knows
         * this ABI's numbers only, and kills */
        long r = 20;
        __asm__ volatile("int $0x80" : "+a"(r) : : "memory");
        rc = r;
    } else if (strcmp(what, "x32") == 0) {
        rc = syscall(39 /* getpid */ | 0x40000000 /* __X32_SYSCALL_BIT */);
#endif
    } else {
        return json_string("unknown");
    }
    int e = errno;
    if (rc >= 0 && strcmp(what, "ptrace") != 0 && strncmp(what, "clone", 5) != 0 &&
        strcmp(what, "sched_yield") != 0 && strcmp(what, "unshare_user") != 0 &&
        strcmp(what, "keyctl") != 0)
        close((int)rc);
    return rc < 0 ? errno_json(e) : json_string("ok");
}

/* arguments.try: names for sys_attempt; arguments.loop: {"count": N} makes
 * N denied calls (io_uring_setup) in a row; arguments.threads and python:
 * a thread and a child made the way the C library makes them (clone3 or
 * its fallback). ok {"NAME": "ok" | errno, ..., "looped": {"EPERM": n}} */
json_t *sysprobe_mode(const json_t *args)
{
    json_t *out = json_object();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(args, "try"), i, v)
    {
        json_object_set_new(out, json_string_value(v), sys_attempt(json_string_value(v)));
    }
    long long n = arg_int(json_object_get(args, "loop"), "count", 0);
    if (n > 0) {
        json_t *tally = json_object();
        for (long long k = 0; k < n; k++) {
            struct io_uring_params p;
            memset(&p, 0, sizeof(p));
            long rc = syscall(SYS_io_uring_setup, 1, &p);
            const char *name = rc < 0 ? strerrorname_np(errno) : "ok";
            if (rc >= 0)
                close((int)rc);
            json_t *c = json_object_get(tally, name ? name : "?");
            json_object_set_new(tally, name ? name : "?",
                                json_integer(c ? json_integer_value(c) + 1 : 1));
        }
        json_object_set_new(out, "looped", tally);
    }
    if (json_is_true(json_object_get(args, "fork"))) {
        /* fork() is clone3() first in glibc >= 2.34, then clone() */
        pid_t pid = fork();
        if (pid == 0)
            _exit(7);
        int st = 0;
        json_object_set_new(out, "fork",
                            pid < 0 ? errno_json(errno)
                            : waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7
                                ? json_string("ok")
                                : json_string("lost"));
    }
    return te_ok(out);
}

/* ---- warm denials (test_warm_denials.py) -------------------------- */

/* Wait (up to 30 s) for path to exist; false when it never did. */
static bool meet_wait(const char *path)
{
    for (int i = 0; i < 3000; i++) {
        if (access(path, F_OK) == 0)
            return true;
        usleep(10000);
    }
    return false;
}

static void meet_touch(const char *dir, const char *name, const char *what)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.%s", dir, name, what);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0)
        close(fd);
}

/* "sysprobe-meet": two calls alive at once, each trying its own denied
 * calls: arguments dir, me, peer, try. Says me.ready in dir, waits for
 * peer.ready, tries, says me.done and waits for peer.done: both calls'
 * processes live while either's denials are noted. ok {NAME: result,
 * "met": bool} */
json_t *sysprobe_meet(const json_t *args)
{
    const char *dir = arg_str(args, "dir", "/tmp");
    const char *me = arg_str(args, "me", "a"), *peer = arg_str(args, "peer", "b");
    char path[4096];
    json_t *out = json_object();
    meet_touch(dir, me, "ready");
    snprintf(path, sizeof(path), "%s/%s.ready", dir, peer);
    bool met = meet_wait(path);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(args, "try"), i, v)
    {
        json_object_set_new(out, json_string_value(v), sys_attempt(json_string_value(v)));
    }
    meet_touch(dir, me, "done");
    snprintf(path, sizeof(path), "%s/%s.done", dir, peer);
    met = meet_wait(path) && met;
    json_object_set_new(out, "met", json_boolean(met));
    return te_ok(out);
}

/* argv[1] "deny-at-start" (a warm template's own denials): syslog() once
 * before serving, and a child of the template making it every 20 ms for as
 * long as the template lives, so that calls run while the template's
 * denials come in. */
void deny_at_start(void)
{
    syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, 0, 0);
    pid_t pid = fork();
    if (pid != 0)
        return;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    syscall(SYS_close_range, 0, ~0U, 0); /* not the template's control socket */
    for (;;) {
        syscall(SYS_syslog, 10, 0, 0);
        usleep(20000);
    }
}
