/*
 * sandbox_mounts.c - steps 7b and 7c of sandbox.c's child: the call's mount
 * namespace made private, and either its view of the file system (the plan
 * fsview.c made, run op by op) or the work dir's tmpfs with the call's
 * directory bound back; a fresh /proc last.
 *
 * Runs in the child of sandbox.c, which shares the daemon's memory until
 * exec: system calls on data prepared before the clone and its own locals
 * only, never malloc, stdio or anything that takes a lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"
#include "sandbox_mounts.h"
#include "sandbox_spec.h"

/* Where the child keeps the call directory while the tmpfs covers it: the
 * first descriptor free after step 6, so its /proc path is a constant. */
#define CALLDIR_FD 5 /* above TD_HANDOVER_FD */
#define CALLDIR_PROC "/proc/self/fd/5"

/* "/proc/self/fd/N" in buf (at least 32 bytes), without stdio. */
static const char *fd_path(char *buf, int fd)
{
    char digits[12];
    int n = 0;
    memcpy(buf, "/proc/self/fd/", 14);
    do
        digits[n++] = (char)('0' + fd % 10);
    while ((fd /= 10) > 0);
    size_t i = 14;
    while (n)
        buf[i++] = digits[--n];
    buf[i] = '\0';
    return buf;
}

/* The directories of path below its first from bytes (a directory that
 * exists), mode 0711; the last one an empty file when file is set. */
static int make_chain(char *path, size_t from, bool file)
{
    size_t n = strlen(path);
    for (size_t i = from + 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char c = path[i];
        path[i] = '\0';
        int rc;
        if (c == '\0' && file) {
            int fd = open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0);
            rc = fd < 0 ? -1 : close(fd);
        } else {
            rc = mkdir(path, 0711);
        }
        path[i] = c;
        if (rc < 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

/* a + b into buf (PATH_MAX); -1 ENAMETOOLONG */
static int join(char *buf, const char *a, const char *b)
{
    size_t na = a ? strlen(a) : 0, nb = strlen(b);
    if (na + nb >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (na)
        memcpy(buf, a, na);
    memcpy(buf + na, b, nb + 1);
    return 0;
}

static int attr_rdonly(const char *path, unsigned flags, bool set)
{
    struct mount_attr attr = {0};
    if (set)
        attr.attr_set = MOUNT_ATTR_RDONLY;
    else
        attr.attr_clr = MOUNT_ATTR_RDONLY;
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &attr, sizeof(attr));
}

/* A path of the plan, checked at load to have no symbolic link on the way:
 * should someone swap one in since, it is not followed (openat2, Linux
 * 5.6; before, the last component at least). */
static int open_no_symlinks(const char *path)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
    return fd < 0 && errno == ENOSYS ? open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW) : fd;
}

static int fs_op(const struct td_spawn *s, const struct td_fs_op *op, int *fds, char *buf,
                 bool may_mknod)
{
    char src[32];
    switch (op->kind) {
    case TD_FS_OPEN:
        fds[op->slot] = op->path ? open_no_symlinks(op->path)
                                 : open(s->cwd, O_PATH | O_CLOEXEC | O_NOFOLLOW | O_DIRECTORY);
        return fds[op->slot] < 0 ? -1 : 0;
    case TD_FS_TMPFS:
        return mount("tmpfs", op->path, "tmpfs", op->mode, op->arg);
    case TD_FS_MKDIR:
        return mkdir(op->path, op->mode) < 0 && errno != EEXIST ? -1 : 0;
    case TD_FS_SYMLINK:
        return symlink(op->arg, op->path);
    case TD_FS_FILE: {
        int fd = open(op->path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, op->mode);
        return fd < 0 ? -1 : close(fd);
    }
    case TD_FS_HIDERS: {
        char f[PATH_MAX];
        if (join(buf, op->path, "/.h") < 0 || join(f, op->path, "/.f") < 0)
            return -1;
        if (op->mode) /* once bound where they hide things: nothing names them */
            return rmdir(buf) < 0 || unlink(f) < 0 ? -1 : 0;
        /* bound before they are removed: a removed source cannot be bound */
        int fd = mkdir(buf, 0) < 0 ? -1 : open(f, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
        if (fd < 0 || close(fd) < 0)
            return -1;
        fds[TD_FS_SLOT_HDIR] = open(buf, O_PATH | O_CLOEXEC);
        fds[TD_FS_SLOT_HFILE] = open(f, O_PATH | O_CLOEXEC);
        return fds[TD_FS_SLOT_HDIR] < 0 || fds[TD_FS_SLOT_HFILE] < 0 ? -1 : 0;
    }
    case TD_FS_BIND:
        if (fds[op->slot] < 0) /* an optional source that was not there */
            return 0;
        return mount(fd_path(src, fds[op->slot]), op->path, NULL, MS_BIND | (op->mode ? MS_REC : 0),
                     NULL);
    case TD_FS_CHAIN: {
        struct stat st;
        bool file = op->mode == 1;
        if (op->mode == 2) /* as what the slot holds is */
            file = fstat(fds[op->slot], &st) == 0 && !S_ISDIR(st.st_mode);
        if (join(buf, NULL, op->path) < 0)
            return -1;
        return make_chain(buf, strcmp(op->arg, "/") == 0 ? 0 : strlen(op->arg), file);
    }
    case TD_FS_COVER: {
        /* bound on the descriptor: no link followed, the last one included
         * (open_no_symlinks' fallback opens a link itself) */
        struct stat st;
        char dst[32];
        int fd = open_no_symlinks(op->path), rc = -1;
        if (fd < 0)
            return -1;
        if (fstat(fd, &st) == 0) {
            if (S_ISLNK(st.st_mode))
                errno = ELOOP;
            else
                rc = mount(
                    fd_path(src, fds[S_ISDIR(st.st_mode) ? TD_FS_SLOT_HDIR : TD_FS_SLOT_HFILE]),
                    fd_path(dst, fd), NULL, MS_BIND, NULL);
        }
        int e = errno;
        close(fd);
        errno = e;
        return rc;
    }
    case TD_FS_NODE: {
        /* The device made again rather than bound: a node in the tmpfs
         * costs no mount to copy, attach and tear down when the call ends
         * (five binds ~160 us, five mknod ~80 us on a loaded 2-CPU VM). It
         * is the same device: opening it passes the same device cgroup
         * checks. Where it would be refused (a user namespace, no
         * CAP_MKNOD: !may_mknod), or a template's (td_spawn.dev_bound): bound,
         * as they were. */
        struct stat st;
        int dev = fds[op->slot];
        if (dev >= 0 && may_mknod && !s->dev_bound && fstat(dev, &st) == 0 && S_ISCHR(st.st_mode) &&
            mknod(op->path, S_IFCHR | (op->mode & 0777), st.st_rdev) == 0)
            return 0;
        int fd = open(op->path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, op->mode);
        if (fd < 0 || close(fd) < 0)
            return -1;
        return dev < 0 ? 0 : mount(fd_path(src, dev), op->path, NULL, MS_BIND, NULL);
    }
    case TD_FS_CALLDIR:
        if (join(buf, op->arg2, s->cwd) < 0 ||
            make_chain(buf, strcmp(op->arg, "/") == 0 ? 0 : strlen(op->arg), false) < 0)
            return -1;
        return mount(fd_path(src, fds[0]), buf, NULL, MS_BIND, NULL);
    case TD_FS_PIVOT:
        if (chdir(op->path) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
            umount2(".", MNT_DETACH) < 0)
            return -1;
        return chdir("/");
    case TD_FS_RDONLY:
        return attr_rdonly("/", AT_RECURSIVE, true);
    case TD_FS_RDWR:
        if (op->path)
            return attr_rdonly(op->path, 0, false);
        return join(buf, op->arg2, s->cwd) < 0 ? -1 : attr_rdonly(buf, 0, false);
    }
    errno = EINVAL;
    return -1;
}

/* Step 7c: the call's view of the file system (fsview.c); -1 with errno. */
static int fs_view(const struct td_spawn *s, bool may_mknod)
{
    int fds[TD_FS_SLOTS];
    char buf[PATH_MAX];
    for (int i = 0; i < TD_FS_SLOTS; i++)
        fds[i] = -1;
    mode_t mask = umask(0); /* the plan's modes as written (1777 for /tmp) */
    int rc = 0;
    for (size_t i = 0; i < s->fs->n && rc == 0; i++) {
        const struct td_fs_op *op = &s->fs->ops[i];
        if (fs_op(s, op, fds, buf, may_mknod) < 0 &&
            !(op->optional && (errno == ENOENT || errno == ENOTDIR)))
            rc = -1;
    }
    int e = errno;
    umask(mask);
    /* the slots; never the hand-over socket (fd 4) */
    close_range(s->hand_over ? TD_HANDOVER_FD + 1 : TD_REPORT_FD + 1, ~0U, 0);
    errno = e;
    return rc;
}

/* Step 7b (see sandbox.c); -1 with errno set. */
int td_sandbox_mounts(const struct td_spawn *s, bool may_mknod)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    if (s->fs) {
        if (fs_view(s, may_mknod) < 0)
            return -1;
        return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    }
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
