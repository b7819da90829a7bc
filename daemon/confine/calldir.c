/*
 * calldir.c - each call's private directory (see calldir.h).
 *
 * A tool owns its directory and everything below it, and a hostile one (or
 * a sibling call of the same user) can rename, swap and refill it while
 * the daemon removes it. So removal never resolves a path of more than one
 * component: it walks from directory descriptors, opens each child with
 * O_NOFOLLOW, unlinks relative to the directory it listed, and comes back
 * up through ".." only after checking it is the directory it left. A
 * single component opened with O_NOFOLLOW is what openat2()'s
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS would give; the st_dev comparison
 * stands for RESOLVE_NO_XDEV and works on kernels before 5.6.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calldir.h"
#include "config.h"
#include "log.h"
#include "randhex.h"
#include "util.h"
#include "workshared.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
/* 128 random bits: a name no other call can guess. */
#define NAME_BYTES 16
/* Directories kept open on the way down; below them a directory is reached
 * again through "..". Bounds a removal to 16 descriptors and 16 readdir
 * buffers (32 KiB each) whatever the depth. */
#define OPEN_DEPTH 16
/* Passes over one directory that a racing process keeps refilling. */
#define MAX_PASSES 4

static int work_fd = -1;   /* the work directory, flock()ed while we run */
static int base_fd = -1;   /* parent of a default work directory, else -1 */
static char work_name[32]; /* "work.XXXXXX" under base_fd, when we made it */
/* Our umask clears none of 0700 (as any usual one): a directory made 0700
 * is 0700 (td_calldir_make). Read at setup (td_calldir_umask_ok). */
static bool mode_exact;

/* ---- removal ---------------------------------------------------------- */

struct level {
    ino_t ino;   /* the directory, as fstat() saw it */
    ino_t d_ino; /* its entry in its parent, as readdir() saw it */
    int passes;
};

struct rm {
    dev_t dev; /* never leave it: a mount point is not ours */
    struct level *lv;
    size_t depth, cap;
    DIR *open[OPEN_DEPTH];                /* open[i]: level i, while below it */
    char names[OPEN_DEPTH][NAME_MAX + 1]; /* names[i]: level i+1 in level i */
    ino_t *stuck;                         /* entries given up on, by d_ino */
    size_t nstuck, capstuck;
    int err; /* the first error */
};

static void note(struct rm *r, int err)
{
    if (!r->err)
        r->err = err;
}

static bool is_stuck(const struct rm *r, ino_t ino)
{
    for (size_t i = 0; i < r->nstuck; i++)
        if (r->stuck[i] == ino)
            return true;
    return false;
}

static bool add_stuck(struct rm *r, ino_t ino, int err)
{
    note(r, err);
    if (r->nstuck == r->capstuck) {
        size_t cap = r->capstuck ? 2 * r->capstuck : 16;
        ino_t *s = realloc(r->stuck, cap * sizeof(*s));
        if (!s)
            return false;
        r->stuck = s;
        r->capstuck = cap;
    }
    r->stuck[r->nstuck++] = ino;
    return true;
}

/* A directory entry, opened without following a link. A tool of an
 * unprivileged daemon runs as the daemon's uid and may take its own
 * permissions away: the owner gives them back. */
static int open_dir(int dfd, const char *name, struct stat *st)
{
    int fd = openat(dfd, name, DIR_FLAGS);
    if (fd < 0 && errno == EACCES && fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st->st_mode) && st->st_uid == geteuid() &&
        fchmodat(dfd, name, (st->st_mode & 07777) | 0700, AT_SYMLINK_NOFOLLOW) == 0)
        fd = openat(dfd, name, DIR_FLAGS);
    if (fd < 0)
        return -errno;
    if (fstat(fd, st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if ((st->st_mode & 0700) != 0700 && st->st_uid == geteuid())
        fchmod(fd, (st->st_mode & 07777) | 0700);
    return fd;
}

/* One entry of the directory d: removed, given up on, or (a non-empty
 * directory) opened and returned for the walk to go down into. */
static DIR *entry(struct rm *r, DIR *d, const struct dirent *de, bool *abort)
{
    int dfd = dirfd(d);
    const char *name = de->d_name;
    /* d_type is a hint (the entry may change under us): it only orders the
     * attempts. */
    if (de->d_type != DT_DIR && (unlinkat(dfd, name, 0) == 0 || errno == ENOENT))
        return NULL;
    if (unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return NULL;
    if (errno == ENOTDIR) { /* swapped for a file or a link since */
        if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
            return NULL;
    }
    if (errno != ENOTEMPTY && errno != EEXIST) {
        *abort = !add_stuck(r, de->d_ino, errno);
        return NULL;
    }
    struct stat st;
    int c = open_dir(dfd, name, &st);
    if (c == -ELOOP || c == -ENOTDIR) {
        /* Swapped for a link: the link goes; the directory, wherever the
         * racer put it in this tree, is found by another pass (as is this
         * name, should the unlink fail). */
        unlinkat(dfd, name, 0);
        return NULL;
    }
    if (c < 0 || st.st_dev != r->dev) {
        if (c >= 0)
            close(c);
        *abort = !add_stuck(r, de->d_ino, c < 0 ? -c : EXDEV);
        return NULL;
    }
    DIR *child = NULL;
    if (r->depth + 1 >= r->cap) {
        size_t cap = r->cap * 2;
        struct level *lv = realloc(r->lv, cap * sizeof(*lv));
        if (lv) {
            r->lv = lv;
            r->cap = cap;
        }
    }
    if (r->depth + 1 < r->cap)
        child = fdopendir(c);
    if (!child) {
        close(c);
        note(r, ENOMEM);
        *abort = true;
        return NULL;
    }
    /* de lives in d's buffer: used before d may be closed */
    r->lv[r->depth + 1] = (struct level){.ino = st.st_ino, .d_ino = de->d_ino};
    if (r->depth < OPEN_DEPTH) {
        r->open[r->depth] = d;
        snprintf(r->names[r->depth], sizeof(r->names[0]), "%s", name);
    } else {
        closedir(d);
    }
    r->depth++;
    return child;
}

/* Back from the emptied (or given up) directory d to its parent. */
static DIR *up(struct rm *r, DIR *d)
{
    r->depth--;
    if (r->depth < OPEN_DEPTH) {
        closedir(d);
        DIR *p = r->open[r->depth];
        r->open[r->depth] = NULL;
        /* Failing, it was refilled after the last look (the parent's next
         * pass sees it) or given up on (already noted). */
        unlinkat(dirfd(p), r->names[r->depth], AT_REMOVEDIR);
        return p;
    }
    int pfd = openat(dirfd(d), "..", DIR_FLAGS);
    closedir(d);
    struct stat st;
    if (pfd >= 0 && fstat(pfd, &st) == 0 && st.st_dev == r->dev &&
        st.st_ino == r->lv[r->depth].ino) {
        /* Read again from the start: the emptied child goes with one
         * rmdir(), and what was removed is no longer listed. */
        DIR *p = fdopendir(pfd);
        if (p)
            return p;
    }
    if (pfd >= 0)
        close(pfd);
    /* Moved by a racing process: back to the deepest directory still held,
     * leaving alone the subtree that was moved under us. */
    r->depth = OPEN_DEPTH - 1;
    DIR *p = r->open[r->depth];
    r->open[r->depth] = NULL;
    if (!add_stuck(r, r->lv[OPEN_DEPTH].d_ino, ESTALE)) {
        closedir(p);
        return NULL;
    }
    rewinddir(p);
    return p;
}

int td_remove_tree_at(int dirfd, const char *name)
{
    struct rm r = {0};
    struct stat st;
    if (fstat(dirfd, &st) < 0)
        return -errno;
    r.dev = st.st_dev;
    int fd = open_dir(dirfd, name, &st);
    if (fd == -ENOTDIR || fd == -ELOOP) /* not a directory: one unlink */
        return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
    if (fd < 0)
        return fd == -ENOENT ? 0 : fd;
    DIR *d = st.st_dev == r.dev ? fdopendir(fd) : NULL;
    r.cap = 64;
    r.lv = malloc(r.cap * sizeof(*r.lv));
    if (!d || !r.lv) {
        int e = st.st_dev != r.dev ? EXDEV : errno ? errno : ENOMEM;
        if (d)
            closedir(d);
        else
            close(fd);
        free(r.lv);
        return -e;
    }
    r.lv[0] = (struct level){.ino = st.st_ino};
    bool abort = false;
    while (d && !abort) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                is_stuck(&r, de->d_ino))
                continue;
            DIR *child = entry(&r, d, de, &abort);
            if (child)
                d = child;
            continue;
        }
        if (errno)
            note(&r, errno);
        /* Listed through: look again, for what a racer added meanwhile. */
        size_t left = 0, stuck = 0;
        rewinddir(d);
        while ((de = readdir(d)))
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                *(is_stuck(&r, de->d_ino) ? &stuck : &left) += 1;
        rewinddir(d);
        struct level *l = &r.lv[r.depth];
        if (left && l->passes++ < MAX_PASSES)
            continue;
        if (left)
            note(&r, ENOTEMPTY);
        if (r.depth == 0)
            break;
        if ((left || stuck) && !add_stuck(&r, l->d_ino, ENOTEMPTY))
            abort = true;
        else
            d = up(&r, d);
    }
    if (d)
        closedir(d);
    for (size_t i = 0; i < OPEN_DEPTH; i++)
        if (r.open[i])
            closedir(r.open[i]);
    if (abort)
        note(&r, ENOMEM);
    else if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        note(&r, errno);
    free(r.lv);
    free(r.stuck);
    return -r.err;
}

/* ---- one call's directory ------------------------------------------------ */

int td_calldir_make(uid_t uid, gid_t gid, char **path, const char **what)
{
    char name[2 * NAME_BYTES + 1];
    *path = NULL;
    /* A repeat of 128 random bits is not expected, but costs a retry. */
    for (int tries = 0;; tries++) {
        *what = "getrandom";
        int rc = te_random_hex(name, NAME_BYTES);
        if (rc < 0)
            return rc;
        *what = "mkdir";
        if (mkdirat(work_fd, name, 0700) == 0)
            break;
        if (errno != EEXIST || tries == 8)
            return -errno;
    }
    /* Owner and mode (0700 whatever the umask) set before any tool runs;
     * the mode first, while the directory is ours: a chmod of another
     * user's needs CAP_FOWNER, which the unit and the manifests do not
     * grant (the DaemonSet's calls all failed "chmod: EPERM"). Where the
     * umask left it 0700, only the owner, by name and not followed: nobody
     * else adds to the work directory (check_stat), and no tool has seen
     * the name yet (three system calls less than through a descriptor). */
    int rc = 0, fd = -1;
    if (mode_exact) {
        if (uid != (uid_t)-1 && fchownat(work_fd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = -errno;
            *what = "chown";
        }
    } else if ((fd = openat(work_fd, name, DIR_FLAGS)) < 0) {
        rc = -errno;
        *what = "open";
    } else if (fchmod(fd, 0700) < 0) {
        rc = -errno;
        *what = "chmod";
    } else if (uid != (uid_t)-1 && fchown(fd, uid, gid) < 0) {
        rc = -errno;
        *what = "chown";
    }
    if (fd >= 0)
        close(fd);
    if (rc == 0 && asprintf(path, "%s/%s", td_cfg.work_dir, name) < 0) {
        *path = NULL;
        *what = "malloc";
        rc = -ENOMEM;
    }
    if (rc < 0)
        unlinkat(work_fd, name, AT_REMOVEDIR);
    return rc;
}

struct remove_req {
    uv_work_t req;
    char *path;
    int rc;
    int dirfd; /* -1: the work directory */
};

static void remove_work(uv_work_t *req)
{
    struct remove_req *r = req->data;
    r->rc = td_remove_tree_at(r->dirfd >= 0 ? r->dirfd : work_fd, strrchr(r->path, '/') + 1);
}

static void remove_done(uv_work_t *req, int status)
{
    (void)status;
    struct remove_req *r = req->data;
    if (r->rc < 0)
        td_log(TD_LOG_WARN, "cannot remove all of %s: %s", r->path, strerror(-r->rc));
    if (r->dirfd >= 0)
        close(r->dirfd);
    free(r->path);
    free(r);
}

void td_calldir_remove_in_async(int dirfd, char *path)
{
    const char *name = strrchr(path, '/') + 1;
    if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
        free(path);
        return;
    }
    struct remove_req *r = malloc(sizeof(*r));
    if (r) {
        *r = (struct remove_req){.path = path, .dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3)};
        r->req.data = r;
        if (r->dirfd >= 0 && uv_queue_work(td_loop, &r->req, remove_work, remove_done) == 0)
            return;
        if (r->dirfd >= 0)
            close(r->dirfd);
    }
    int rc = td_remove_tree_at(dirfd, name);
    if (rc < 0)
        td_log(TD_LOG_WARN, "cannot remove all of %s: %s", path, strerror(-rc));
    free(path);
    free(r);
}

void td_calldir_remove_async(char *path)
{
    /* Most tools leave their directory empty: one rmdir() here is cheaper
     * than a trip through the threadpool. */
    if (unlinkat(work_fd, strrchr(path, '/') + 1, AT_REMOVEDIR) == 0 || errno == ENOENT) {
        free(path);
        return;
    }
    struct remove_req *r = malloc(sizeof(*r));
    if (r) {
        *r = (struct remove_req){.path = path, .dirfd = -1};
        r->req.data = r;
        if (uv_queue_work(td_loop, &r->req, remove_work, remove_done) == 0)
            return;
    }
    /* no memory for the request: on the loop, once */
    int rc = td_remove_tree_at(work_fd, strrchr(path, '/') + 1);
    if (rc < 0)
        td_log(TD_LOG_WARN, "cannot remove all of %s: %s", path, strerror(-rc));
    free(path);
    free(r);
}

/* ---- the work directory ------------------------------------------------ */

/* Ours, and nobody else can add to it. */
static int check_stat(const struct stat *sp, const char *path)
{
    if (sp->st_uid != geteuid()) {
        td_log(TD_LOG_ERR,
               "%s: owned by uid %u, not by uid %u that the daemon runs as; refusing it as a "
               "work directory",
               path, (unsigned)sp->st_uid, (unsigned)geteuid());
        return -1;
    }
    if (sp->st_mode & 022) {
        td_log(TD_LOG_ERR,
               "%s: writable by group or others (mode %04o); refusing it as a work directory "
               "(make it 0711 or stricter)",
               path, (unsigned)(sp->st_mode & 07777));
        return -1;
    }
    return 0;
}

static int check_dir(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        td_log(TD_LOG_ERR, "%s: %s", path, strerror(errno));
        return -1;
    }
    return check_stat(&st, path);
}

/* 0711: workers running as another user reach their own directory (and
 * clients their spill files) by name, without listing the others. */
static int set_mode(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0711)
        return 0;
    if (fchmod(fd, 0711) == 0)
        return 0;
    td_log(TD_LOG_ERR, "%s: cannot set mode 0711: %s", path, strerror(errno));
    return -1;
}

static bool is_call_name(const char *s)
{
    size_t n = strspn(s, "0123456789abcdef");
    return n == 2 * NAME_BYTES && !s[n];
}

/* What a daemon killed before its exit left: call directories and spill
 * files. Nothing else in an operator's directory is touched. */
static void clean_leftovers(const char *path)
{
    DIR *d = td_opendir_dup(work_fd);
    if (!d)
        return;
    unsigned n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_call_name(de->d_name) && strcmp(de->d_name, "results"))
            continue;
        int rc = td_remove_tree_at(work_fd, de->d_name);
        if (rc < 0)
            td_log(TD_LOG_WARN, "cannot remove all of %s/%s left by an earlier run: %s", path,
                   de->d_name, strerror(-rc));
        n++;
    }
    closedir(d);
    if (n)
        td_log(TD_LOG_INFO, "removed %u entries left in %s by an earlier run", n, path);
}

/* 0 locked, 1 held by another process, -1 not lockable here (logged when
 * path is given). */
static int lock(int fd, const char *path, bool wait)
{
    if (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) == 0)
        return 0;
    if (errno == EWOULDBLOCK)
        return 1;
    if (path)
        td_log(TD_LOG_WARN, "cannot lock %s (%s): a second daemon on it would not be noticed", path,
               strerror(errno));
    return -1;
}

static int open_checked(const char *path);

static int open_given(const char *path)
{
    if (mkdir(path, 0711) < 0 && errno != EEXIST) {
        td_log(TD_LOG_ERR, "--work-dir %s: %s", path, strerror(errno));
        return -1;
    }
    work_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (work_fd < 0) {
        td_log(TD_LOG_ERR, "--work-dir %s: %s", path, strerror(errno));
        return -1;
    }
    /* an emptyDir or a tmpfs mount is 1777: a directory of ours in it */
    struct stat st;
    char *sub = NULL;
    if (fstat(work_fd, &st) == 0 && td_workshared_is(&st)) {
        int own = td_workshared_open(work_fd, path, &sub);
        close(work_fd);
        work_fd = own;
        if (own < 0) {
            free(sub);
            return -1;
        }
        path = sub;
    }
    int rc = open_checked(path);
    free(sub);
    return rc;
}

/* The work directory work_fd at path: checked, locked, cleared. */
static int open_checked(const char *path)
{
    if (check_dir(work_fd, path) < 0)
        return -1;
    if (lock(work_fd, path, false) == 1) {
        td_log(TD_LOG_ERR, "--work-dir %s: in use by another toolexecd", path);
        return -1;
    }
    if (set_mode(work_fd, path) < 0)
        return -1;
    clean_leftovers(path);
    return (td_cfg.work_dir = strdup(path)) ? 0 : -1;
}

/* Where the default work directory's parent lives: a runtime directory
 * (tmpfs, private to the user, cleared at boot), not /tmp; only without one
 * (no /run, no XDG_RUNTIME_DIR) a directory of the user's own in $TMPDIR. */
static char *default_base(mode_t *mode)
{
    const char *rt = getenv("RUNTIME_DIRECTORY"); /* systemd: RuntimeDirectory= */
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    const char *tmp = getenv("TMPDIR");
    char *base = NULL;
    struct stat st;
    /* 0711: a root daemon's workers pass through to their directory */
    *mode = 0711;
    if (rt && *rt) {
        base = strndup(rt, strcspn(rt, ":"));
    } else if (geteuid() == 0 && stat("/run", &st) == 0 && S_ISDIR(st.st_mode)) {
        base = strdup("/run/toolexecd");
        *mode = 0755; /* also the default socket's directory */
    } else if (xdg && *xdg) {
        if (asprintf(&base, "%s/toolexecd", xdg) < 0)
            base = NULL;
    } else {
        if (asprintf(&base, "%s/toolexecd-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)geteuid()) < 0)
            base = NULL;
    }
    return base;
}

/* Every work.XXXXXX beside ours that no daemon holds any more. */
static void remove_stale(const char *base)
{
    DIR *d = td_opendir_dup(base_fd);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "work.", 5) || strlen(de->d_name) != 11 ||
            strcmp(de->d_name, work_name) == 0)
            continue;
        int w = openat(base_fd, de->d_name, DIR_FLAGS);
        struct stat st;
        /* locked: its daemon is alive; not lockable: not ours to judge */
        if (w < 0 || fstat(w, &st) < 0 || st.st_uid != geteuid() || lock(w, NULL, false)) {
            if (w >= 0)
                close(w);
            continue;
        }
        int rc = td_remove_tree_at(base_fd, de->d_name);
        close(w);
        if (rc < 0)
            td_log(TD_LOG_WARN, "cannot remove all of %s/%s left by an earlier run: %s", base,
                   de->d_name, strerror(-rc));
        else
            td_log(TD_LOG_INFO, "removed %s/%s left by an earlier run", base, de->d_name);
    }
    closedir(d);
}

static int open_default(void)
{
    mode_t mode;
    char *base = default_base(&mode), *path = NULL;
    if (!base)
        return -1;
    int rc = -1;
    if (mkdir(base, mode) < 0 && errno != EEXIST) {
        td_log(TD_LOG_ERR, "cannot create %s for the work directory: %s", base, strerror(errno));
        goto out;
    }
    base_fd = open(base, DIR_FLAGS);
    if (base_fd < 0) {
        int e = errno;
        struct stat st;
        /* made by someone else first: say so rather than "permission denied" */
        if (lstat(base, &st) < 0 || check_stat(&st, base) == 0)
            td_log(TD_LOG_ERR, "%s: %s", base, strerror(e));
        goto out;
    }
    if (check_dir(base_fd, base) < 0)
        goto out;
    /* Held while we look for stale siblings and make ours, so that no two
     * starting daemons take each other's for a dead one. */
    lock(base_fd, base, true);
    if (asprintf(&path, "%s/work.XXXXXX", base) < 0) {
        path = NULL;
        goto unlock;
    }
    if (!mkdtemp(path)) {
        td_log(TD_LOG_ERR, "cannot create a work directory under %s: %s", base, strerror(errno));
        goto unlock;
    }
    snprintf(work_name, sizeof(work_name), "%s", strrchr(path, '/') + 1);
    td_cfg.work_dir_owned = true;
    work_fd = openat(base_fd, work_name, DIR_FLAGS);
    if (work_fd < 0 || lock(work_fd, path, false) == 1 || set_mode(work_fd, path) < 0) {
        td_log(TD_LOG_ERR, "cannot use the work directory %s", path);
        goto unlock;
    }
    remove_stale(base);
    td_cfg.work_dir = path;
    path = NULL;
    rc = 0;
unlock:
    flock(base_fd, LOCK_UN);
out:
    free(path);
    free(base);
    return rc;
}

bool td_calldir_umask_ok(const char *status)
{
    const char *u = status ? strstr(status, "\nUmask:\t") : NULL;
    char *end;
    unsigned long m = u ? strtoul(u + 8, &end, 8) : 0700;
    return u && end != u + 8 && (m & 0700) == 0;
}

int td_calldir_setup(const char *path)
{
    /* the umask from /proc (4.7): umask() reads it only by setting it,
     * under the feet of any thread that makes a file meanwhile */
    char status[4096];
    int sf = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    ssize_t n = sf < 0 ? -1 : read(sf, status, sizeof(status) - 1);
    if (sf >= 0)
        close(sf);
    status[n > 0 ? n : 0] = '\0';
    mode_exact = td_calldir_umask_ok(status);
    /* getrandom() blocks only until the kernel's pool is first ready (early
     * boot): wait for that here, not on the loop. */
    char name[2 * NAME_BYTES + 1];
    int rc = te_random_hex(name, NAME_BYTES);
    if (rc < 0) {
        td_log(TD_LOG_ERR, "getrandom: %s", strerror(-rc));
        return -1;
    }
    return path ? open_given(path) : open_default();
}

void td_calldir_shutdown(void)
{
    if (td_cfg.work_dir_owned && base_fd >= 0) {
        int rc = td_remove_tree_at(base_fd, work_name);
        if (rc < 0)
            td_log(TD_LOG_WARN, "cannot remove all of the work directory %s: %s", work_name,
                   strerror(-rc));
    }
    if (work_fd >= 0)
        close(work_fd);
    if (base_fd >= 0)
        close(base_fd);
    work_fd = base_fd = -1;
}
