/* Unit tests of daemon/confine/calldir.c: trees far deeper than PATH_MAX allows and
 * than descriptors would last for, links to the outside, a mount point, a
 * work directory with an earlier run's leftovers. The swap race and the
 * daemon around it are in tests/integration/test_hard_calldir.py. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calldir.h"
#include "config.h"
#include "check.h"

/* what calldir.c uses of the rest of the daemon */
struct td_config td_cfg;
uv_loop_t *td_loop;
void td_log(int level, const char *fmt, ...)
{
    (void)level;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static void write_at(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
}

static bool exists_at(int dfd, const char *name)
{
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* levels of "d/" below top/name, a file every 1000 levels */
static void make_deep(int top, const char *name, int levels)
{
    CHECK(mkdirat(top, name, 0700) == 0);
    int fd = openat(top, name, O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < levels && fd >= 0; i++) {
        if (i % 1000 == 0)
            write_at(fd, "f");
        mkdirat(fd, "d", 0700);
        int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
        close(fd);
        fd = next;
    }
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
}

static void deep_tree(int top)
{
    /* 30,000 levels: 60 KB of path, and 30,000 descriptors if each level
     * kept one open */
    make_deep(top, "deep", 30000);
    int before = count_fds();
    CHECK(td_remove_tree_at(top, "deep") == 0);
    CHECK(!exists_at(top, "deep"));
    CHECK(count_fds() == before);
}

static void links_are_not_followed(int top)
{
    CHECK(mkdirat(top, "outside", 0700) == 0);
    write_at(top, "outside/keep");
    CHECK(mkdirat(top, "t", 0700) == 0);
    CHECK(mkdirat(top, "t/sub", 0700) == 0);
    CHECK(symlinkat("../outside", top, "t/to-dir") == 0);
    CHECK(symlinkat("../../outside/keep", top, "t/sub/to-file") == 0);
    write_at(top, "t/sub/keep"); /* the same name as the file outside */
    CHECK(td_remove_tree_at(top, "t") == 0);
    CHECK(!exists_at(top, "t"));
    CHECK(exists_at(top, "outside/keep"));
    /* a link as the top name: the link goes, not what it points to */
    CHECK(symlinkat("outside", top, "top-link") == 0);
    CHECK(td_remove_tree_at(top, "top-link") == 0);
    CHECK(!exists_at(top, "top-link"));
    CHECK(exists_at(top, "outside/keep"));
    /* a plain file; nothing at all */
    write_at(top, "file");
    CHECK(td_remove_tree_at(top, "file") == 0);
    CHECK(!exists_at(top, "file"));
    CHECK(td_remove_tree_at(top, "nothing") == 0);
}

static void mount_point_is_not_crossed(int top, const char *topdir)
{
    char m[4096];
    snprintf(m, sizeof(m), "%s/mnt/m", topdir);
    CHECK(mkdirat(top, "mnt", 0700) == 0);
    CHECK(mkdirat(top, "mnt/m", 0700) == 0);
    write_at(top, "mnt/other");
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("tmpfs", m, "tmpfs", 0, "size=1m") < 0) {
        fprintf(stderr, "mount point: skipped (%s)\n", strerror(errno));
        CHECK(td_remove_tree_at(top, "mnt") == 0);
        return;
    }
    write_at(top, "mnt/m/inside");
    CHECK(td_remove_tree_at(top, "mnt") < 0); /* something was left: the mount */
    CHECK(exists_at(top, "mnt/m/inside"));
    CHECK(!exists_at(top, "mnt/other"));
    CHECK(umount(m) == 0);
    CHECK(td_remove_tree_at(top, "mnt") == 0);
    CHECK(!exists_at(top, "mnt"));
}

static bool is_hex32(const char *s)
{
    return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

static void work_dir_and_call_dirs(int top, const char *topdir)
{
    char work[4096];
    snprintf(work, sizeof(work), "%s/work", topdir);
    CHECK(mkdirat(top, "work", 0755) == 0);
    CHECK(mkdirat(top, "work/0123456789abcdef0123456789abcdef", 0700) == 0);
    make_deep(top, "work/0123456789abcdef0123456789abcdef/d", 100);
    CHECK(mkdirat(top, "work/results", 0711) == 0);
    write_at(top, "work/results/b-1.txt");
    write_at(top, "work/keep"); /* not the daemon's: left alone */
    CHECK(td_calldir_setup(work) == 0);
    CHECK(!exists_at(top, "work/0123456789abcdef0123456789abcdef"));
    CHECK(!exists_at(top, "work/results"));
    CHECK(exists_at(top, "work/keep"));
    struct stat st;
    CHECK(stat(work, &st) == 0 && (st.st_mode & 07777) == 0711);

    /* 0700 whatever the umask the daemon runs under (read at setup): one
     * that leaves the owner's bits, and one that clears them (chmod'ed) */
    static const mode_t masks[] = {022, 0777};
    for (size_t k = 0; k < sizeof(masks) / sizeof(masks[0]); k++) {
        char *a = NULL, *b = NULL;
        const char *what = NULL;
        if (k) {
            td_calldir_shutdown();
            free(td_cfg.work_dir);
            td_cfg.work_dir = NULL;
            umask(masks[k]);
            CHECK(td_calldir_setup(work) == 0);
        }
        CHECK(td_calldir_make((uid_t)-1, (gid_t)-1, &a, &what) == 0);
        CHECK(td_calldir_make((uid_t)-1, (gid_t)-1, &b, &what) == 0);
        umask(022);
        CHECK(a && b && strcmp(a, b) != 0);
        if (a && b) {
            CHECK(strncmp(a, work, strlen(work)) == 0 && is_hex32(strrchr(a, '/') + 1));
            CHECK(is_hex32(strrchr(b, '/') + 1));
            CHECK(stat(a, &st) == 0 && (st.st_mode & 07777) == 0700);
            CHECK(stat(b, &st) == 0 && (st.st_mode & 07777) == 0700);
            CHECK(td_remove_tree_at(top, a + strlen(topdir) + 1) == 0);
            CHECK(td_remove_tree_at(top, b + strlen(topdir) + 1) == 0);
        }
        free(a);
        free(b);
    }
    /* the umask as /proc/PID/status says it */
    CHECK(td_calldir_umask_ok("Name:\tx\nUmask:\t0022\nState:\tR\n"));
    CHECK(td_calldir_umask_ok("Name:\tx\nUmask:\t0077\n"));
    CHECK(!td_calldir_umask_ok("Name:\tx\nUmask:\t0277\n"));
    CHECK(!td_calldir_umask_ok("Name:\tx\nUmask:\t0777\n"));
    CHECK(!td_calldir_umask_ok("Name:\tx\nUmask:\t\n"));
    CHECK(!td_calldir_umask_ok("Name:\tx\nState:\tR\n"));
    CHECK(!td_calldir_umask_ok(NULL));
    td_calldir_shutdown();
    free(td_cfg.work_dir);
    td_cfg.work_dir = NULL;
    CHECK(td_remove_tree_at(top, "work") == 0);
}

int main(void)
{
    char topdir[] = "/tmp/te-calldir-XXXXXX";
    if (!mkdtemp(topdir)) {
        perror("mkdtemp");
        return 1;
    }
    int top = open(topdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(top >= 0);
    deep_tree(top);
    links_are_not_followed(top);
    work_dir_and_call_dirs(top, topdir);
    if (geteuid() == 0)
        mount_point_is_not_crossed(top, topdir);
    /* everything made above is gone again */
    CHECK(td_remove_tree_at(top, "outside") == 0);
    close(top);
    CHECK(rmdir(topdir) == 0);
    CHECK_DONE();
}
