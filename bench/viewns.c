/*
 * viewns.c - a call's mount namespace built per call, as step 7c builds the
 * default view today, against one cloned from a namespace prepared once
 * that holds what every call of the tool sees alike (the covers, the
 * read-only root), each call adding only its own (/dev, /tmp, the work
 * dir's veil with its directory, /proc).
 *
 *   viewns [ROUNDS [CALLS [WAYS]]]   (root; WAYS: digits, "02": built, prepared)
 *
 * Each call is a child started as sandbox.c starts one (CLONE_VM |
 * CLONE_VFORK, a new PID namespace), which makes its namespace and exits;
 * the parent waits for it, the namespace's teardown included (it runs in
 * the exiting PID 1). Five ways, interleaved round by round:
 *   built     clone(CLONE_NEWNS) copies the host's mounts, then the view's
 *             system calls (the default plan's, as fsview.c makes it: the
 *             covers bound from hiders in the new /dev, a veil over the
 *             hidden directory the work dir is in, everything read-only,
 *             the writable ones again)
 *   shrunk    as built, but the copy is of a namespace kept without the
 *             host mounts no call sees (the host's /dev and what is below
 *             it: each call covers it with its own): setns, then unshare
 *   prepared  no CLONE_NEWNS: the child joins a namespace kept with the
 *             covers made and everything read-only (setns) and unshares
 *             it, then makes only its own /dev, /tmp, veil (the call's
 *             directory attached from a copy made before joining:
 *             open_tree, move_mount) and /proc
 *   trimmed   as prepared, the kept namespace also without the host's /dev
 *             and /proc
 *   checked   as trimmed, and the child makes sure each cover is still a
 *             mount (statx): the host renaming a file over a covered one
 *             (passwd over /etc/shadow) detaches a kept namespace's cover
 *             of it, where a cover made per call is made on what is there
 *   bare      clone(CLONE_NEWNS) and nothing else: the host's mounts
 *             copied and torn down
 *   none      no mount namespace: the floor of the rest (PID, IPC)
 * Last, the host renames a file over a covered one: each way's call says
 * whether it sees it.
 * The first call each way prints the mounts it holds and checks its view
 * (hidden, read-only, writable where it should be).
 * Prints us per call (median and min of the rounds) and the mounts a call
 * holds each way. Meant to be run by hand, never as a timed test.
 */
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_RDONLY
#include <linux/mount.h>
#endif

/* the default view's covers (fsview.c); /var/tmp, which holds the work
 * dir here, is a veil (a tmpfs with the way down to the call's directory) */
static const char *const hidden_dirs[] = {"/root", "/home", "/run", "/var/lib", "/etc/ssh"};
static const char *const hidden_files[] = {"/etc/shadow", "/etc/gshadow"};
static const char *const devices[] = {"null", "zero", "full", "random", "urandom"};
static char base[64], work[96], calldir[160], sock[96];
static int go_write = -1;
static char stack[64 * 1024] __attribute__((aligned(16)));

enum how { BUILT, SHRUNK, PREPARED, TRIMMED, CHECKED, BARE, NONE, NHOW };
static enum how prep_how;
static const char *const names[] = {"built",   "shrunk", "prepared", "trimmed",
                                    "checked", "bare",   "none"};
static int go_read = -1, ns_fd[NHOW] = {-1, -1, -1, -1, -1, -1, -1};

static void die(const char *what)
{
    fprintf(stderr, "viewns: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int attr(const char *path, unsigned flags, bool rdonly)
{
    struct mount_attr a = {.attr_set = rdonly ? MOUNT_ATTR_RDONLY : 0,
                           .attr_clr = rdonly ? 0 : MOUNT_ATTR_RDONLY};
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a, sizeof(a));
}

static int bind_fd(int fd, const char *to)
{
    char src[32];
    snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
    return mount(src, to, NULL, MS_BIND, NULL);
}

/* /dev of the call's own: a tmpfs, the devices made again, the links */
static int own_dev(bool hiders, int *hdir, int *hfile)
{
    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=16m") < 0)
        return -1;
    const dev_t nums[] = {makedev(1, 3), makedev(1, 5), makedev(1, 7), makedev(1, 8),
                          makedev(1, 9)};
    char p[64];
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof(p), "/dev/%s", devices[i]);
        if (mknod(p, S_IFCHR | 0666, nums[i]) < 0)
            return -1;
    }
    if (symlink("/proc/self/fd", "/dev/fd") < 0 || symlink("/proc/self/fd/0", "/dev/stdin") < 0 ||
        symlink("/proc/self/fd/1", "/dev/stdout") < 0 ||
        symlink("/proc/self/fd/2", "/dev/stderr") < 0 || mkdir("/dev/shm", 01777) < 0)
        return -1;
    if (!hiders)
        return 0;
    int fd;
    if (mkdir("/dev/.h", 0) < 0 || (fd = open("/dev/.f", O_RDONLY | O_CREAT | O_EXCL, 0)) < 0 ||
        close(fd) < 0)
        return -1;
    *hdir = open("/dev/.h", O_PATH | O_CLOEXEC);
    *hfile = open("/dev/.f", O_PATH | O_CLOEXEC);
    return *hdir < 0 || *hfile < 0 ? -1 : 0;
}

static int covers(int hdir, int hfile)
{
    for (size_t i = 0; i < sizeof(hidden_dirs) / sizeof(*hidden_dirs); i++)
        if (bind_fd(hdir, hidden_dirs[i]) < 0 && errno != ENOENT)
            return -1;
    for (size_t i = 0; i < sizeof(hidden_files) / sizeof(*hidden_files); i++)
        if (bind_fd(hfile, hidden_files[i]) < 0 && errno != ENOENT)
            return -1;
    return bind_fd(hfile, sock);
}

/* /var/tmp veiled, the way down to the call's directory made and the
 * directory put back: bound (cwd, a descriptor of this namespace) or
 * attached (tree, a detached copy made before joining another) */
static int veil(int cwd, int tree)
{
    if (mount("tmpfs", "/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0711,size=64k,nr_inodes=1024") < 0 ||
        mkdir(base, 0711) < 0 || mkdir(work, 0711) < 0 || mkdir(calldir, 0711) < 0)
        return -1;
    if (tree >= 0)
        return (int)syscall(SYS_move_mount, tree, "", AT_FDCWD, calldir, MOVE_MOUNT_F_EMPTY_PATH);
    return bind_fd(cwd, calldir);
}

/* Is every cover the copy holds still there? The host renaming a file over
 * a covered one (passwd over /etc/shadow) detaches the kept namespace's
 * cover on it (a mount on a dentry that is gone); one made per call is
 * made on what is there now. */
static bool covered_at(const char *path)
{
    struct statx st;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, 0, &st) <
        0)
        return errno == ENOENT;
    return (st.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

static bool covered(void)
{
    for (size_t i = 0; i < sizeof(hidden_dirs) / sizeof(*hidden_dirs); i++)
        if (!covered_at(hidden_dirs[i]))
            return false;
    for (size_t i = 0; i < sizeof(hidden_files) / sizeof(*hidden_files); i++)
        if (!covered_at(hidden_files[i]))
            return false;
    return covered_at(sock);
}

static int call(void *arg)
{
    enum how how = (enum how)(long)arg;
    int hdir = -1, hfile = -1, cwd;
    if (how == BARE || how == NONE)
        _exit(0);
    mode_t mask = umask(0);
    if (how == BUILT || how == SHRUNK) {
        if (how == SHRUNK && (setns(ns_fd[how], CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0))
            _exit(9);
        if ((how == BUILT && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) ||
            (cwd = open(calldir, O_PATH | O_DIRECTORY)) < 0 || own_dev(true, &hdir, &hfile) < 0 ||
            covers(hdir, hfile) < 0 ||
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") < 0 ||
            veil(cwd, -1) < 0 || rmdir("/dev/.h") < 0 || unlink("/dev/.f") < 0 ||
            attr("/", AT_RECURSIVE, true) < 0 || attr("/tmp", 0, false) < 0 ||
            attr("/dev", 0, false) < 0 || attr(calldir, 0, false) < 0)
            _exit(10);
    } else {
        /* the call's directory is hidden in the prepared namespace: a
         * detached copy of its mount made here first */
        cwd = (int)syscall(SYS_open_tree, AT_FDCWD, calldir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (cwd < 0 || setns(ns_fd[how], CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0)
            _exit(11);
        /* new mounts below a read-only one are writable: the veil is made
         * read-only once the call's directory is in it */
        if (own_dev(false, NULL, NULL) < 0 ||
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") < 0 ||
            veil(-1, cwd) < 0 || attr("/var/tmp", 0, true) < 0)
            _exit(12);
        if (how == CHECKED && !covered())
            _exit(14);
    }
    /* what the host put in place of the covered socket, seen (below) */
    struct stat sst;
    if (stat(sock, &sst) == 0 && sst.st_size > 0)
        _exit(15);
    umask(mask);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        _exit(13);
    if (getenv("VIEWNS_SHOW")) {
        /* the same view each way: what is hidden, read-only, writable */
        char line[512], p[200];
        int n = 0, bad = 0;
        FILE *f = fopen("/proc/self/mountinfo", "r");
        while (f && fgets(line, sizeof(line), f))
            n++;
        struct stat st;
        bad |= (stat("/etc/shadow", &st) == 0 && st.st_size != 0) << 0;
        bad |= (stat("/root", &st) == 0 && (st.st_mode & 0777) != 0) << 1;
        bad |= (mkdir("/usr/te-viewns", 0700) == 0 || errno != EROFS) << 2;
        snprintf(p, sizeof(p), "%s/x", calldir);
        bad |= (mkdir(p, 0700) < 0 || rmdir(p) < 0) << 3;
        bad |= (mkdir("/tmp/x", 0700) < 0 || rmdir("/tmp/x") < 0) << 4;
        bad |= (mkdir("/dev/shm/x", 0700) < 0 || rmdir("/dev/shm/x") < 0) << 5;
        bad |= (mkdir(work, 0700) == 0 || errno != EEXIST) << 6;
        snprintf(p, sizeof(p), "%s/y", work);
        bad |= (mkdir(p, 0700) == 0 || errno != EROFS) << 7;
        bad |= (stat("/dev/pts/ptmx", &st) == 0) << 8;
        fprintf(stderr, "  %s: %d mounts, view %s (%#x)\n", names[how], n,
                bad ? "WRONG" : "as built", bad);
    }
    _exit(0);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* time in clone(): the child's set-up, until it exits (CLONE_VFORK lets
 * us go at its exit_mm, before its namespaces are torn down) */
static double in_clone;

static int run(enum how how)
{
    double t0 = now();
    pid_t pid = clone(call, stack + sizeof(stack),
                      CLONE_VM | CLONE_VFORK | SIGCHLD | CLONE_NEWPID | CLONE_NEWIPC |
                          (how == BUILT || how == BARE ? CLONE_NEWNS : 0),
                      (void *)(long)how);
    int st;
    in_clone += now() - t0;
    if (pid < 0)
        die("clone");
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            die("waitpid");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The namespace a tool's calls are cloned from, made by a child and kept
 * by its descriptor alone (an nsfs descriptor holds the namespace and its
 * mounts once the child is gone). */
static int prep_child(void *arg)
{
    (void)arg;
    bool trim = prep_how != PREPARED;
    char c;
    int hdir, hfile;
    /* held until the parent has our namespace's descriptor */
    close(go_write);
    if (read(go_read, &c, 1) < 0)
        _exit(19);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        _exit(20);
    if (prep_how == SHRUNK)
        _exit(umount2("/dev", MNT_DETACH) < 0 ? 26 : 0);
    /* the hiders in a small tmpfs of their own, unmounted (detached) once
     * bound: the binds keep only what they need */
    if (mount("tmpfs", "/dev", "tmpfs", 0, "mode=0755,size=4k") < 0 || mkdir("/dev/.h", 0) < 0)
        _exit(22);
    int fd = open("/dev/.f", O_RDONLY | O_CREAT | O_EXCL, 0);
    if (fd < 0 || close(fd) < 0 || (hdir = open("/dev/.h", O_PATH)) < 0 ||
        (hfile = open("/dev/.f", O_PATH)) < 0 || covers(hdir, hfile) < 0)
        _exit(23);
    close(hdir), close(hfile);
    if (umount2("/dev", MNT_DETACH) < 0)
        _exit(24);
    /* what every call covers with its own: gone from the template (after
     * the binds, which name their sources by /proc/self/fd) */
    if (trim && (umount2("/proc", MNT_DETACH) < 0 || umount2("/dev", MNT_DETACH) < 0))
        _exit(21);
    if (attr("/", AT_RECURSIVE, true) < 0)
        _exit(25);
    _exit(0);
}

static int prepare(enum how how)
{
    int go[2];
    if (pipe(go) < 0)
        die("pipe");
    go_write = go[1];
    go_read = go[0];
    prep_how = how;
    pid_t pid = clone(prep_child, stack + sizeof(stack), SIGCHLD | CLONE_NEWNS, NULL);
    if (pid < 0)
        die("clone (prepare)");
    /* held by the child until it exits: take the descriptor first */
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
    int ns = open(p, O_RDONLY | O_CLOEXEC);
    close(go[1]); /* it may go on */
    int st;
    waitpid(pid, &st, 0);
    close(go[0]);
    if (ns < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
        fprintf(stderr, "prepare: ns %d status %x\n", ns, st), exit(1);
    return ns;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5, calls = argc > 2 ? atoi(argv[2]) : 300;
    if (geteuid() != 0 || rounds < 1 || calls < 1) {
        fprintf(stderr, "usage (root): viewns [ROUNDS [CALLS]]\n");
        return 2;
    }
    snprintf(base, sizeof(base), "/var/tmp/te-viewns-XXXXXX");
    if (!mkdtemp(base))
        die("mkdtemp");
    snprintf(work, sizeof(work), "%s/work", base);
    snprintf(calldir, sizeof(calldir), "%s/c1", work);
    /* where a call sees it but for its cover: outside the veiled /var/tmp */
    snprintf(sock, sizeof(sock), "/var/te-viewns-%d.sock", (int)getpid());
    int fd;
    if (chmod(base, 0755) < 0 || mkdir(work, 0755) < 0 || mkdir(calldir, 0755) < 0 ||
        (fd = open(sock, O_CREAT | O_WRONLY, 0600)) < 0 || close(fd) < 0)
        die(base);
    for (int h = SHRUNK; h < CHECKED; h++)
        ns_fd[h] = prepare((enum how)h);
    ns_fd[CHECKED] = ns_fd[TRIMMED];
    double *t[NHOW], *c[NHOW];
    for (int h = 0; h < NHOW; h++)
        if (!(t[h] = calloc((size_t)rounds, sizeof(double))) ||
            !(c[h] = calloc((size_t)rounds, sizeof(double))))
            die("calloc");
    setenv("VIEWNS_SHOW", "1", 1);
    for (int h = 0; h < NHOW; h++)
        if (run((enum how)h))
            fprintf(stderr, "viewns: way %d failed: %d\n", h, run((enum how)h));
    unsetenv("VIEWNS_SHOW");
    for (int r = 0; r < rounds; r++)
        for (int h = 0; h < NHOW; h++) {
            if (argc > 3 && !strchr(argv[3], '0' + h))
                continue;
            double t0 = now();
            in_clone = 0;
            for (int i = 0; i < calls; i++)
                if (run((enum how)h))
                    die("a call failed");
            t[h][r] = (now() - t0) / calls * 1e6;
            c[h][r] = in_clone / calls * 1e6;
        }
    double loads[3] = {0};
    getloadavg(loads, 3);
    printf("viewns: %d rounds x %d calls, load %.2f; us per call, median (min): in all, the\n"
           "  namespace's teardown included; in clone(), the set-up alone\n",
           rounds, calls, loads[0]);
    for (int h = 0; h < NHOW; h++) {
        qsort(t[h], (size_t)rounds, sizeof(double), by_value);
        qsort(c[h], (size_t)rounds, sizeof(double), by_value);
        printf("  %-9s %8.1f (%6.1f) %8.1f (%6.1f)\n", names[h], t[h][rounds / 2], t[h][0],
               c[h][rounds / 2], c[h][0]);
    }
    /* the host renames a file over a covered one, as passwd does over
     * /etc/shadow: what each way's next call sees */
    char next[128];
    snprintf(next, sizeof(next), "%s.new", sock);
    if ((fd = open(next, O_CREAT | O_WRONLY, 0600)) < 0 || write(fd, "x", 1) != 1 ||
        close(fd) < 0 || rename(next, sock) < 0)
        die(next);
    printf("after the host renamed a file over a covered one, a call:\n");
    for (int h = 0; h < BARE; h++) {
        int rc = run((enum how)h);
        printf("  %-9s %s\n", names[h],
               rc == 0    ? "does not see it"
               : rc == 15 ? "SEES IT (its cover is gone)"
               : rc == 14 ? "refuses to start (a cover is gone)"
                          : "fails");
    }
    rmdir(calldir), rmdir(work), unlink(sock), rmdir(base);
    return 0;
}
