/*
 * warmview.c - a warm call's file-system view (warmview.h).
 *
 * The template's view (the daemon's step 7c) gave it a /tmp and a /dev of
 * its own, tmpfs mounts its calls would share: each call gets fresh ones,
 * with what the view mounted below the template's (the device nodes, "read"
 * and "write" paths, the way down to the work directory) cloned onto the
 * same places. What is below is found in mountinfo, by the template once
 * (plan_fresh()); P1 runs refresh(): system calls and static buffers only
 * (no at-fork handlers ran in it).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "toolexec.h"

#include "warmview.h"

/* The tool's file-system view, as the last fork request gave it (the same
 * for every call of a template): on when the template was started in one
 * (the daemon's step 7c). */
#define VIEW_MAX 40 /* write paths: the daemon's 32 and /tmp, /dev */
static struct {
    bool on;
    int landlock;              /* its ABI; 0: no Landlock */
    char *write[VIEW_MAX + 1]; /* NULL-terminated */
    struct {
        char *path, *options;
        /* what refresh() clones back below path, planned in the template
         * (plan_fresh()); plan_err: why there is no plan */
        bool planned;
        int plan_err;
        size_t nkids;
        char *kids[64];
    } fresh[2];
    int nfresh;
    json_t *given; /* the view as the fork frame gave it, to see it unchanged */
} view;
static unsigned view_gen; /* one more at each change of the view */

static void view_clear(void)
{
    for (int i = 0; view.write[i]; i++) {
        free(view.write[i]);
        view.write[i] = NULL;
    }
    for (int i = 0; i < view.nfresh; i++) {
        free(view.fresh[i].path);
        free(view.fresh[i].options);
        for (size_t k = 0; k < view.fresh[i].nkids; k++)
            free(view.fresh[i].kids[k]);
    }
    json_decref(view.given);
    memset(&view, 0, sizeof(view));
}

static char *abs_path(const json_t *v)
{
    const char *p = json_string_value(v);
    return p && p[0] == '/' && strlen(p) < PATH_MAX ? strdup(p) : NULL;
}

int te_warm_view_parse(const json_t *v)
{
    /* the same for every call of a template: kept, with its plans (and a
     * spare made in it: view_gen), while the frames say the same, no view
     * included */
    static bool known;
    bool none = !v || json_is_null(v);
    if (known && (none ? !view.given : view.given && json_equal(v, view.given)))
        return 0;
    view_clear();
    view_gen++;
    known = true;
    if (none)
        return 0;
    view.given = json_incref((json_t *)v);
    json_t *fresh = json_object_get(v, "fresh"), *write = json_object_get(v, "write"), *x;
    json_t *ll = json_object_get(v, "landlock");
    size_t i;
    if (!json_is_object(v) || !json_is_array(fresh) || json_array_size(fresh) > 2 ||
        !json_is_array(write) || json_array_size(write) > VIEW_MAX || !json_is_integer(ll))
        return -1;
    view.on = true;
    view.landlock = (int)json_integer_value(ll);
    json_array_foreach(write, i, x)
    {
        if (!(view.write[i] = abs_path(x)))
            goto bad;
    }
    json_array_foreach(fresh, i, x)
    {
        const char *o = json_string_value(json_object_get(x, "options"));
        view.fresh[i].path = abs_path(json_object_get(x, "path"));
        view.fresh[i].options = o ? strdup(o) : NULL;
        view.nfresh++;
        if (!view.fresh[i].path || !view.fresh[i].options)
            goto bad;
    }
    return 0;
bad:
    view_clear();
    return -1;
}

unsigned te_warm_view_gen(void)
{
    return view_gen;
}

struct mnt {
    int id, parent;
    const char *at;
};
#define MNT_MAX 256
static struct mnt mnts[MNT_MAX];
static size_t nmnts, pool_used;
static char mnt_pool[65536], mi_buf[16384];

/* mountinfo's octal escapes ("\040") back to bytes, in place */
static void unescape(char *s)
{
    char *d = s;
    while (*s) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
            s += 4;
        } else {
            *d++ = *s++;
        }
    }
    *d = '\0';
}

/* One line of mountinfo ("ID PARENT MAJ:MIN ROOT MOUNTPOINT ..."): kept
 * when its mount point is path or below it. */
static int take_mount(char *line, const char *path, size_t plen)
{
    char *f[5];
    int k = 0;
    for (char *p = line; k < 5 && *p;) {
        while (*p == ' ')
            p++;
        f[k++] = p;
        while (*p && *p != ' ')
            p++;
        if (*p)
            *p++ = '\0';
    }
    if (k < 5)
        return 0;
    unescape(f[4]);
    if (strncmp(f[4], path, plen) || (f[4][plen] && f[4][plen] != '/'))
        return 0;
    size_t n = strlen(f[4]) + 1;
    if (nmnts == MNT_MAX || pool_used + n > sizeof(mnt_pool)) {
        errno = E2BIG;
        return -1;
    }
    memcpy(mnt_pool + pool_used, f[4], n);
    mnts[nmnts++] = (struct mnt){atoi(f[0]), atoi(f[1]), mnt_pool + pool_used};
    pool_used += n;
    return 0;
}

static int scan_mounts(const char *path)
{
    nmnts = pool_used = 0;
    int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t have = 0, plen = strlen(path);
    int err = 0;
    while (!err) {
        ssize_t n = read(fd, mi_buf + have, sizeof(mi_buf) - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? errno : 0;
            break;
        }
        have += (size_t)n;
        char *line = mi_buf, *nl;
        while (!err && (nl = memchr(line, '\n', have - (size_t)(line - mi_buf)))) {
            *nl = '\0';
            if (take_mount(line, path, plen) < 0)
                err = errno;
            line = nl + 1;
        }
        have -= (size_t)(line - mi_buf);
        if (have == sizeof(mi_buf) - 1) /* a line longer than the buffer */
            err = E2BIG;
        memmove(mi_buf, line, have);
    }
    close(fd);
    if (!err && !nmnts)
        err = ENOENT;
    errno = err;
    return err ? -1 : 0;
}

/* a is strictly below b */
static bool under(const char *a, const char *b)
{
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && a[n] == '/';
}

/* The directories of rel below dir (0711, as the view's), the last one a
 * file when file is set (a mount point for one). */
static int make_chain_at(int dir, const char *rel, bool file)
{
    char p[PATH_MAX];
    size_t n = strlen(rel);
    if (n >= sizeof(p)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(p, rel, n + 1);
    for (size_t i = 0; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        p[i] = '\0';
        int rc;
        if (i == n && file) {
            int fd = openat(dir, p, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0);
            rc = fd < 0 ? -1 : close(fd);
        } else {
            rc = mkdirat(dir, p, 0711);
        }
        if (rc < 0 && errno != EEXIST)
            return -1;
        p[i] = i == n ? '\0' : '/';
    }
    return 0;
}

/* The root of a tmpfs being configured owned by the call's uid and gid
 * (id->set; those of the namespace's, the template's, otherwise): with a
 * uid of its own, the call may use its fresh /dev, /tmp and cover as a cold
 * call of that uid does. */
static int own_root(int fs, const struct te_warm_id *id)
{
    char u[16], g[16];
    if (!id->set)
        return 0;
    snprintf(u, sizeof(u), "%u", (unsigned)id->uid);
    snprintf(g, sizeof(g), "%u", (unsigned)id->gid);
    return fsconfig(fs, FSCONFIG_SET_STRING, "uid", u, 0) < 0 ||
                   fsconfig(fs, FSCONFIG_SET_STRING, "gid", g, 0) < 0
               ? -1
               : 0;
}

/* "k=v,k=v" into the tmpfs being configured */
static int configure(int fs, const char *options)
{
    char o[256];
    if (strlen(options) >= sizeof(o)) {
        errno = EINVAL;
        return -1;
    }
    strcpy(o, options);
    for (char *k = o, *next; k && *k; k = next) {
        next = strchr(k, ',');
        if (next)
            *next++ = '\0';
        char *v = strchr(k, '=');
        if (v)
            *v++ = '\0';
        if (fsconfig(fs, v ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, k, v, 0) < 0)
            return -1;
    }
    return 0;
}

/* In the template, before P1 is cloned (its mounts are where every P1's
 * copy starts from): which mounts below fresh path i a call's fresh tmpfs
 * gets back, once per template. P1 read mountinfo for it twice a call:
 * ~160 us of a ~3.5 ms warm call on a 2-CPU VM (perf, 300 calc calls:
 * show_mountinfo and seq_read 2.3% of all samples). */
static void plan_fresh(int which)
{
    __typeof__(view.fresh[0]) *f = &view.fresh[which];
    if (f->planned)
        return;
    f->planned = true;
    const char *path = f->path;
    if (scan_mounts(path) < 0) {
        f->plan_err = errno;
        return;
    }
    const struct mnt *top = NULL;
    for (size_t i = 0; i < nmnts; i++) {
        bool covered = false;
        for (size_t k = 0; k < nmnts; k++)
            covered |= mnts[k].parent == mnts[i].id && strcmp(mnts[k].at, path) == 0;
        if (strcmp(mnts[i].at, path) == 0 && !covered)
            top = &mnts[i];
    }
    if (!top) {
        f->plan_err = ENOENT;
        return;
    }
    for (size_t i = 0; i < nmnts; i++) {
        const struct mnt *m = &mnts[i];
        bool below = false; /* below another child: covered by it */
        for (size_t k = 0; k < nmnts; k++)
            below |=
                mnts[k].parent == top->id && strcmp(mnts[k].at, path) && under(m->at, mnts[k].at);
        if (m->parent != top->id || strcmp(m->at, path) == 0 || below)
            continue;
        if (f->nkids == sizeof(f->kids) / sizeof(f->kids[0]) ||
            !(f->kids[f->nkids] = strdup(m->at))) {
            f->plan_err = E2BIG;
            return;
        }
        f->nkids++;
    }
}

/* A fresh tmpfs at path, built detached and then moved there. The cover
 * of the template's directory (its path cdpath, open as *cd), where the
 * call's directory goes, may be below a mount cloned here: *cd is then
 * reopened in the clone, so that nothing the call can reach (not even "..")
 * is of the template's mounts underneath. */
static int refresh(int which, const char *cdpath, int *cd, const struct te_warm_id *id)
{
    const __typeof__(view.fresh[0]) *f = &view.fresh[which];
    const char *path = f->path, *options = f->options;
    if (f->plan_err || !f->planned) {
        errno = f->planned ? f->plan_err : EINVAL;
        return -1;
    }
    bool dev = strcmp(path, "/dev") == 0;
    int fs = -1, mnt = -1, rc = -1;
    if ((fs = fsopen("tmpfs", FSOPEN_CLOEXEC)) < 0 || configure(fs, options) < 0 ||
        own_root(fs, id) < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (mnt = fsmount(fs, FSMOUNT_CLOEXEC,
                       MOUNT_ATTR_NOSUID | (dev ? MOUNT_ATTR_NOEXEC : MOUNT_ATTR_NODEV))) < 0)
        goto out;
    size_t plen = strlen(path);
    for (size_t k = 0; k < f->nkids; k++) {
        const char *at = f->kids[k];
        const char *rel = at + plen + 1;
        struct stat st;
        int clone = (int)syscall(SYS_open_tree, AT_FDCWD, at,
                                 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (clone < 0)
            goto out;
        if (fstat(clone, &st) < 0 || make_chain_at(mnt, rel, !S_ISDIR(st.st_mode)) < 0 ||
            move_mount(clone, "", mnt, rel, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
            int e = errno;
            close(clone);
            errno = e;
            goto out;
        }
        size_t n = strlen(at);
        if (strcmp(cdpath, at) == 0 || under(cdpath, at)) {
            int again =
                openat(clone, cdpath[n] ? cdpath + n + 1 : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (again < 0) {
                int e = errno;
                close(clone);
                errno = e;
                goto out;
            }
            close(*cd);
            *cd = again;
        }
        close(clone);
    }
    if (dev) { /* the rest of fsview.c's /dev */
        static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                               {"stdin", "/proc/self/fd/0"},
                                               {"stdout", "/proc/self/fd/1"},
                                               {"stderr", "/proc/self/fd/2"}};
        for (int i = 0; i < 4; i++)
            if (symlinkat(links[i][1], mnt, links[i][0]) < 0 && errno != EEXIST)
                goto out;
        if (mkdirat(mnt, "shm", 01777) < 0 && errno != EEXIST)
            goto out;
    }
    rc = move_mount(mnt, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH);
out:;
    int e = errno;
    if (fs >= 0)
        close(fs);
    if (mnt >= 0)
        close(mnt);
    errno = e;
    return rc;
}

int te_warm_view_base_mounts(int *here, int *cover, const struct te_warm_id *id)
{
    int fs = -1, rc = -1;
    char tpath[PATH_MAX];
    *here = *cover = -1;
    if (view.on && !getcwd(tpath, sizeof(tpath))) /* for refresh() */
        return -1;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        (*here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        (fs = fsopen("tmpfs", FSOPEN_CLOEXEC)) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0711", 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", "8", 0) < 0 || own_root(fs, id) < 0 ||
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (*cover = fsmount(fs, FSMOUNT_CLOEXEC,
                          MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0 ||
        move_mount(*cover, "", *here, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        goto out;
    mode_t mask = umask(0); /* the modes as the view's (1777 for /dev/shm) */
    for (int i = 0; i < view.nfresh; i++)
        if (refresh(i, tpath, cover, id) < 0) {
            int e = errno;
            umask(mask);
            errno = e;
            goto out;
        }
    umask(mask);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        goto out;
    rc = 0;
out:;
    int e = errno;
    if (fs >= 0)
        close(fs);
    errno = e;
    return rc;
}

int te_warm_view_call_dir(int here, int cover, const char *dir)
{
    int call = -1, tree = -1, cd = -1, rc = -1;
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
    if ((call = openat(here, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        (tree = open_tree(call, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH)) < 0 ||
        mkdirat(cover, dir, 0700) < 0 ||
        move_mount(tree, "", cover, dir, MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
        mount_setattr(cover, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0 ||
        (cd = openat(cover, dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        goto out;
    rc = fchdir(cd) < 0 ? -2 : 0;
out:;
    int e = errno, fds[] = {call, tree, cd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    errno = e;
    return rc;
}

void te_warm_view_plan(void)
{
    for (int i = 0; i < view.nfresh; i++)
        plan_fresh(i); /* once: a failure is P1's to report, as before */
}

int te_warm_view_landlock(int ll_abi)
{
    /* the view's second layer, as a cold call's step 11a (after the mounts:
     * Landlock forbids them to its domain) */
    if (view.landlock > 0)
        return te_landlock_writes(view.landlock, (const char *const *)view.write);
    return te_warm_fence(ll_abi);
}
