/*
 * tw_nsjoin.c - testworker: argv[1] "nsjoin" (test_warm_nsjoin.py), a warm
 * template that tries to leave through its calls' namespaces. A template
 * owns the user namespace of each call's PID 1 (it made it): joined, it
 * would have every capability there and could take the call's uid (a
 * root daemon's lent one) outside the call's PID namespace, after the
 * call, when the uid is back in the pool. Before each call it tries, from
 * a child of its own (so that a success does not change the template):
 * setns() into a P1's user namespace (nstype CLONE_NEWUSER, and 0: any),
 * unshare(CLONE_NEWUSER), and umount2, pivot_root and fspick (on a path
 * that is not there), which the warm runtime does not need either. The call's process (a copy of
 * the template's memory) answers what the template got, and what it gets itself trying the same
 * against its parent (P1; a cold call's init).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testworker.h"

/* The template's attempts, filled before each fork: the call's copy reads
 * them. "p1": whether a P1 was found to try against. */
static struct {
    bool tried, p1;
    int setns_user, setns_any, unshare_user; /* 0: it worked; else errno */
    int umount2, pivot_root, fspick;         /* on a path that is not there */
} tpl;

/* A descriptor for pid's user namespace: its /proc link, or where that
 * may not be opened (a P1 that is not dumpable) a pidfd, which setns()
 * takes too (nstype must then name the namespaces). */
static int ns_fd(pid_t pid, bool *pidfd)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *pidfd = fd < 0;
    return fd >= 0 ? fd : (int)syscall(SYS_pidfd_open, pid, 0);
}

/* What the mount calls are tried on: harmless, were they let through. */
#define GONE "/nonexistent-nsjoin"

/* One attempt in a child: 0 when it worked, else its errno. */
static int in_child(int what, pid_t target)
{
    pid_t pid = fork();
    if (pid == 0) {
        long rc;
        if (what == 2) {
            rc = syscall(SYS_unshare, CLONE_NEWUSER);
        } else if (what == 3) {
            rc = syscall(SYS_umount2, GONE, MNT_DETACH);
        } else if (what == 4) {
            rc = syscall(SYS_pivot_root, GONE, GONE);
        } else if (what == 5) {
            rc = syscall(SYS_fspick, AT_FDCWD, GONE, 0);
        } else {
            bool pidfd;
            int fd = ns_fd(target, &pidfd);
            if (fd < 0)
                _exit(errno & 0xff);
            rc = syscall(SYS_setns, fd, what == 0 || pidfd ? CLONE_NEWUSER : 0);
        }
        _exit(rc < 0 ? errno & 0xff : 0);
    }
    int st;
    if (pid < 0)
        return errno;
    if (waitpid(pid, &st, 0) != pid)
        return ECHILD;
    return WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
}

/* A live child of ours in a user namespace other than ours, or whose
 * namespace we may not read (a P1 that is not dumpable): a P1 (its spare
 * waits for the next call); 0 when there is none. */
static pid_t find_p1(void)
{
    char mine[64] = "", path[64], theirs[64];
    ssize_t n = readlink("/proc/self/ns/user", mine, sizeof(mine) - 1);
    if (n > 0)
        mine[n] = '\0';
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && !found && (e = readdir(d))) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "re");
        int ppid = 0;
        char state = 'Z';
        /* "pid (comm) state ppid": comm is ours here, without spaces */
        if (f && fscanf(f, "%*d %*s %c %d", &state, &ppid) != 2)
            ppid = 0;
        if (f)
            fclose(f);
        if (ppid != getpid() || state == 'Z')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        n = readlink(path, theirs, sizeof(theirs) - 1);
        if (n > 0)
            theirs[n] = '\0';
        if (n <= 0 || strcmp(theirs, mine) != 0)
            found = pid;
    }
    if (d)
        closedir(d);
    return found;
}

static void template_tries(void)
{
    pid_t p1 = find_p1();
    tpl.tried = true;
    tpl.p1 = p1 > 0;
    tpl.setns_user = p1 > 0 ? in_child(0, p1) : ESRCH;
    tpl.setns_any = p1 > 0 ? in_child(1, p1) : ESRCH;
    tpl.unshare_user = in_child(2, 0);
    tpl.umount2 = in_child(3, 0);
    tpl.pivot_root = in_child(4, 0);
    tpl.fspick = in_child(5, 0);
}

static json_t *result(int e)
{
    return e ? errno_json(e) : json_string("ok");
}

/* In the call's process: the same against its parent, in the process
 * itself (its filter is what a hostile call meets). */
static json_t *call_tries(void)
{
    json_t *o = json_object();
    pid_t parent = getppid();
    for (int what = 0; what < 2; what++) {
        bool pidfd;
        int fd = ns_fd(parent, &pidfd);
        long rc = fd < 0 ? -1 : syscall(SYS_setns, fd, what == 0 || pidfd ? CLONE_NEWUSER : 0);
        int e = errno;
        if (fd >= 0)
            close(fd);
        json_object_set_new(o, what ? "setns_any" : "setns_user", result(rc < 0 ? e : 0));
    }
    long rc = syscall(SYS_unshare, CLONE_NEWUSER);
    json_object_set_new(o, "unshare_user", result(rc < 0 ? errno : 0));
    return o;
}

int nsjoin_main(void)
{
    json_t *req = NULL;
    int rc = te_worker_read_request(0, &req);
    if (rc == 0 && te_template_requested(req)) {
        json_decref(req);
        req = NULL;
        for (;;) {
            te_fork_request r;
            int n = te_template_next(&r);
            if (n <= 0)
                return n < 0 ? 1 : 0;
            template_tries();
            if (te_template_fork(&r) == 0)
                break; /* the call's process */
        }
        rc = te_worker_read_request(0, &req);
    }
    json_decref(req);
    json_t *out = json_object();
    if (tpl.tried)
        json_object_set_new(out, "template",
                            json_pack("{s:b,s:o,s:o,s:o,s:o,s:o,s:o}", "p1", tpl.p1, "setns_user",
                                      result(tpl.setns_user), "setns_any", result(tpl.setns_any),
                                      "unshare_user", result(tpl.unshare_user), "umount2",
                                      result(tpl.umount2), "pivot_root", result(tpl.pivot_root),
                                      "fspick", result(tpl.fspick)));
    json_object_set_new(out, "call", call_tries());
    json_t *resp = rc ? te_raised("BadRequest", strerror(-rc), NULL) : te_ok(out);
    if (rc)
        json_decref(out);
    rc = te_worker_write_response(1, resp);
    json_decref(resp);
    return rc ? 1 : 0;
}
