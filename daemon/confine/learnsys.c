/*
 * learnsys.c - learn mode's notifications and base (learnsys.h).
 *
 * A learning call's filter (sysfilter.c, td_sysfilter_learn) stops each
 * system call that names a path, and each the default filter would refuse,
 * at the daemon's listener (sysnotify.c), which records it here and lets
 * it go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE). The path is read from the
 * process's memory (/proc/PID/mem) and resolved against its directory
 * (/proc/PID/cwd) or the descriptor it names (/proc/PID/fd/N). The process
 * could change the string between our read and the kernel's (TOCTOU): that
 * matters for enforcing, not here, where the process is the operator's own
 * trusted test run and we only record. The notification's id is checked
 * after the reads, so that a pid reused meanwhile is not read for it.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "fsview.h"
#include "learn.h"
#include "learnsys.h"
#include "sysfilter.h"

/* A string of the process's, NUL-terminated in buf; false if unreadable. */
static bool read_string(int mem, uint64_t addr, char *buf, size_t len)
{
    size_t got = 0;
    while (got < len - 1) {
        /* page by page: a string may end just before an unmapped page */
        size_t chunk = 4096 - ((addr + got) & 4095);
        if (chunk > len - 1 - got)
            chunk = len - 1 - got;
        ssize_t n = pread(mem, buf + got, chunk, (off_t)(addr + got));
        if (n <= 0)
            return false;
        if (memchr(buf + got, '\0', (size_t)n))
            return true;
        got += (size_t)n;
    }
    return false;
}

/* p resolved against dirfd's directory into out (not normalised: the
 * builder takes real paths). */
static bool resolve(pid_t pid, long dirfd, const char *p, char *out, size_t len)
{
    if (p[0] == '/') {
        snprintf(out, len, "%s", p);
        return true;
    }
    char link[64], dir[PATH_MAX];
    if (dirfd == AT_FDCWD)
        snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
    else
        snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)pid, (int)dirfd);
    ssize_t n = readlink(link, dir, sizeof(dir) - 1);
    if (n <= 0 || dir[0] != '/')
        return false;
    dir[n] = '\0';
    return snprintf(out, len, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", p[0] ? p : ".") <
           (int)len;
}

static unsigned open_how(uint64_t flags)
{
    unsigned how = 0;
    if (flags & O_PATH) /* a handle, no content: the view only needs the way */
        return 0;
    if ((flags & O_ACCMODE) != O_WRONLY)
        how |= TD_LEARN_READ;
    if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
        how |= TD_LEARN_WRITE;
    if (flags & O_CREAT)
        how |= TD_LEARN_CREATE;
    return how;
}

/* The paths a call names: (argument of its dirfd or -1, of its path, how). */
struct named {
    int dirfd, path;
    unsigned how;
};

static int decode(const struct seccomp_notif *req, struct named *out, int mem)
{
    const __u64 *a = req->data.args;
    long nr = req->data.nr;
    if (nr == SYS_openat || nr == SYS_openat2) {
        uint64_t flags = a[2];
        if (nr == SYS_openat2) { /* its flags are behind a pointer */
            struct open_how oh;
            if (pread(mem, &oh, sizeof(oh.flags), (off_t)a[2]) != (ssize_t)sizeof(oh.flags))
                return 0;
            flags = oh.flags;
        }
        out[0] = (struct named){0, 1, open_how(flags)};
        return 1;
    }
    if (nr == SYS_mkdirat || nr == SYS_unlinkat) {
        out[0] = (struct named){0, 1, nr == SYS_mkdirat ? TD_LEARN_MKDIR : TD_LEARN_CREATE};
        return 1;
    }
    if (nr == SYS_renameat || nr == SYS_renameat2) {
        out[0] = (struct named){0, 1, TD_LEARN_CREATE};
        out[1] = (struct named){2, 3, TD_LEARN_CREATE};
        return 2;
    }
    if (nr == SYS_truncate) {
        out[0] = (struct named){-1, 0, TD_LEARN_WRITE};
        return 1;
    }
#ifdef SYS_open /* the old calls, on the ABIs that have them */
    if (nr == SYS_open || nr == SYS_creat) {
        out[0] = (struct named){-1, 0, open_how(nr == SYS_creat ? O_CREAT | O_WRONLY : a[1])};
        return 1;
    }
    if (nr == SYS_mkdir || nr == SYS_unlink || nr == SYS_rmdir) {
        out[0] = (struct named){-1, 0, nr == SYS_mkdir ? TD_LEARN_MKDIR : TD_LEARN_CREATE};
        return 1;
    }
    if (nr == SYS_rename) {
        out[0] = (struct named){-1, 0, TD_LEARN_CREATE};
        out[1] = (struct named){-1, 1, TD_LEARN_CREATE};
        return 2;
    }
#endif
    return -1; /* not one that names a path: a call the default filter denies */
}

void td_learn_notified(struct td_learn *l, int listener, const struct seccomp_notif *req)
{
    if (!l)
        return;
    pid_t pid = (pid_t)req->pid;
    char memp[64];
    snprintf(memp, sizeof(memp), "/proc/%d/mem", (int)pid);
    int mem = open(memp, O_RDONLY | O_CLOEXEC);
    struct named nm[2];
    int n = mem >= 0 ? decode(req, nm, mem) : 0;
    if (n < 0) {
        uint64_t id = req->id;
        char *name = seccomp_syscall_resolve_num_arch(req->data.arch, req->data.nr);
        char num[32];
        snprintf(num, sizeof(num), "%d", req->data.nr);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0)
            td_learn_syscall(l, name ? name : num);
        free(name);
        n = 0;
    }
    char paths[2][PATH_MAX];
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char p[PATH_MAX];
        long dirfd = nm[i].dirfd < 0 ? AT_FDCWD : (long)(int)req->data.args[nm[i].dirfd];
        if (read_string(mem, req->data.args[nm[i].path], p, sizeof(p)) &&
            resolve(pid, dirfd, p, paths[i], sizeof(paths[i])))
            ok |= 1 << i;
    }
    if (mem >= 0)
        close(mem);
    uint64_t id = req->id;
    if (!ok || ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) != 0)
        return; /* gone meanwhile: what was read may be another's */
    for (int i = 0; i < n; i++)
        if (ok & (1 << i))
            if (nm[i].how)
                td_learn_path(l, paths[i], nm[i].how);
}

json_t *td_learn_propose(const struct td_learn *l, bool minimal)
{
    size_t nh;
    const char *const *dh = td_fsview_default_hidden(&nh);
    const char *hidden[32];
    size_t k = 0;
    char tools[PATH_MAX];
    for (size_t i = 0; i < nh && k < 26; i++)
        hidden[k++] = dh[i];
    hidden[k++] = "/tmp"; /* each call has its own: the host's is not seen */
    if (realpath(td_cfg.tools_dir, tools))
        hidden[k++] = tools;
    if (td_cfg.socket_path)
        hidden[k++] = td_cfg.socket_path;
    if (td_cfg.events_socket_path)
        hidden[k++] = td_cfg.events_socket_path;
    hidden[k] = NULL;
    /* fsview.c's minimal root: /usr, /bin, /sbin, /etc and /lib* */
    static const char *const shown[] = {"/usr",   "/bin",   "/sbin",   "/etc", "/lib",
                                        "/lib64", "/lib32", "/libx32", NULL};
    static const char *const private[] = {"/dev", "/proc", NULL};
    static const char *const scratch[] = {"/tmp", "/dev/shm", NULL};
    struct td_learn_base b = {.hidden = hidden,
                              .shown = minimal ? shown : NULL,
                              .private = private,
                              .scratch = scratch,
                              .own = td_cfg.work_dir,
                              .deny = td_sysfilter_default_names()};
    return td_learn_build(l, &b);
}
