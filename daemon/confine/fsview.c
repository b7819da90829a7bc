/*
 * fsview.c - what a call sees of the file system.
 *
 * By default a call sees the host read-only, with its own directory
 * writable; a /tmp and a /dev of its own (tmpfs, gone with the call; /dev
 * holds null, zero, full, random, urandom, the host's devices made again
 * (mknod; bound from the host where that is refused), the fd and
 * std* links and a /dev/shm); the /proc of its PID namespace; and hidden
 * (an empty directory or file nobody may read): /root, /home, /run,
 * /var/lib, /var/tmp, /etc/shadow, /etc/gshadow, /etc/ssh, the tools
 * directory, the work directory but for its own directory (the spill files
 * are in it), the daemon's sockets. A definition adds "read" (shown
 * read-only even where hidden), "write" (bound writable) and "hide" paths,
 * or says "root": "minimal" (only /usr, /bin, /sbin, /lib*, /etc, minus
 * its secrets, plus those), or "filesystem": "host" (no view of its own).
 *
 * The view is built fresh in each call's mount namespace by the child
 * (sandbox.c, step 7c) from a plan made here once per tool: a list of
 * system calls in order. Why not a template namespace joined with setns():
 * the call's own directory, /tmp and /proc are per call anyway, and an
 * unprivileged daemon's template would belong to a user namespace the call
 * must then join instead of making its own, which leaves its PID namespace
 * owned by a user namespace in which it may not mount /proc (see the notes
 * in bench/confine.py for the measured costs). Nor, for a root daemon, a
 * namespace kept per tool with the covers made, each call unsharing a copy
 * and adding its own /dev, /tmp, veil and /proc, though it would save a
 * third of the namespace's cost (bench/viewns: ~0.5 ms a call at a load of
 * 8 on 2 CPUs): the host renaming a file over a covered one (passwd over
 * /etc/shadow) detaches the kept namespace's cover of it, and every call
 * made from it after sees the file. Each cover would have to be checked
 * before a call is cloned (statx, STATX_ATTR_MOUNT_ROOT) and the kept
 * namespace made again when one is gone; an exposure kept there shows what
 * was there when it was made, and the host's mounts as they were then (made
 * again when its mount table changes: POLLPRI on mountinfo).
 *
 * How the plan is made: every path that is covered (hidden), exposed
 * (read, write, the call's directory) or made private (/tmp, /dev) is an
 * item; sorted, so a directory comes before what is below it. What an item
 * needs depends on its nearest ancestor item: below something fresh (a
 * tmpfs of ours) the path does not exist, so a cover is not needed and an
 * exposure needs its directories made first; below host content, a cover
 * is a bind of the empty directory or file, a hidden directory with an
 * exposure below it becomes a tmpfs (a veil) with just the way down. Then
 * everything is made read-only at once (mount_setattr, recursive) and the
 * writable mounts writable again. Covers are binds of one empty mode-0
 * directory and file, made in the /dev tmpfs and removed once bound (a
 * removed one cannot be bound): no new superblock each.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "fsview.h"
#include "log.h"
#include "toolexec.h"
#include "util.h"

enum td_fs_default td_fs_default = TD_FS_VIEW;
const char *td_fsview_ca_bundle;
const char *td_fsview_secret_dir;

/* At most this many read and write paths together: each takes a slot. */
#define MAX_EXPOSED 32
#define TMP_OPTS TD_FS_TMP_OPTS
#define DEV_OPTS TD_FS_DEV_OPTS
#define VEIL_OPTS "mode=0711,size=64k,nr_inodes=1024"

const char *const td_fs_hidden[] = {
    "/root",       "/home",        "/run",     "/var/lib", "/var/tmp",
    "/etc/shadow", "/etc/gshadow", "/etc/ssh", NULL,
};
const char *const *td_fsview_default_hidden(size_t *n)
{
    for (*n = 0; td_fs_hidden[*n];)
        (*n)++;
    return td_fs_hidden;
}
static const char *const devices[] = {"null", "zero", "full", "random", "urandom"};
#define SLOT_CALL 0
#define SLOT_DEV 3 /* after the two hiders */
#define SLOT_FIRST (SLOT_DEV + 5)

static void free_strv(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

/* ---- the definition key ---------------------------------------------------- */

/* NULL when path is absolute, normalised and (resolve) names what is
 * there; else why. */
static const char *path_problem(const char *p, bool resolve, char *why, size_t len)
{
    if (p[0] != '/')
        return "not an absolute path";
    if (strcmp(p, "/") == 0)
        return "the whole root: use \"filesystem\": \"host\" or \"root\"";
    size_t n = strlen(p);
    if (n >= PATH_MAX)
        return "too long";
    if (p[n - 1] == '/' || strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../") ||
        (n >= 2 && strcmp(p + n - 2, "/.") == 0) || (n >= 3 && strcmp(p + n - 3, "/..") == 0))
        return "not normalised (no //, /./, /../ or trailing /)";
    if (!resolve)
        return NULL;
    char real[PATH_MAX];
    if (!realpath(p, real)) {
        snprintf(why, len, "%s", strerror(errno));
        return why;
    }
    if (strcmp(real, p) != 0) {
        snprintf(why, len, "not normalised: it resolves to %s", real);
        return why;
    }
    return NULL;
}

static int parse_paths(const char *file, json_t *obj, const char *key, bool resolve, char ***out,
                       size_t *total, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key), *a;
    size_t i;
    if (!v)
        return 0;
    if (!json_is_array(v))
        return td_fail(err, errlen, "%s: filesystem.%s: expected an array of paths", file, key);
    if (strcmp(key, "hide") && (*total += json_array_size(v)) > MAX_EXPOSED)
        return td_fail(err, errlen, "%s: filesystem.%s: at most %d read and write paths together",
                       file, key, MAX_EXPOSED);
    *out = calloc(json_array_size(v) + 1, sizeof(char *));
    if (!*out)
        return -ENOMEM;
    json_array_foreach(v, i, a)
    {
        char why[PATH_MAX + 64];
        const char *p = te_json_text_value(a), *bad;
        if (!p || strlen(p) != json_string_length(a))
            return td_fail(err, errlen, "%s: filesystem.%s[%zu]: expected a path", file, key, i);
        if ((bad = path_problem(p, resolve, why, sizeof(why))))
            return td_fail(err, errlen, "%s: filesystem.%s[%zu]: \"%s\": %s", file, key, i, p, bad);
        if (!((*out)[i] = strdup(p)))
            return -ENOMEM;
    }
    return 0;
}

static int parse(const char *file, json_t *v, bool resolve, struct td_fsview **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    struct td_fsview *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    int rc = 0;
    if (!v) {
        f->dflt = true;
    } else if (te_json_is_text(v) && strcmp(json_string_value(v), "host") == 0) {
        f->host = true;
        td_log(TD_LOG_WARN,
               "%s: \"filesystem\": \"host\": this tool sees the host's file "
               "system as far as its user may",
               file);
    } else if (json_is_object(v)) {
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val)
        {
            if (strcmp(key, "root") && strcmp(key, "read") && strcmp(key, "write") &&
                strcmp(key, "hide")) {
                rc = td_fail(err, errlen,
                             "%s: filesystem.%s: unknown key (root, read, write, hide)", file, key);
                break;
            }
        }
        json_t *root = json_object_get(v, "root");
        const char *r = te_json_text_value(root);
        if (rc == 0 && root && (!r || (strcmp(r, "host") && strcmp(r, "minimal"))))
            rc =
                td_fail(err, errlen, "%s: filesystem.root: expected \"host\" or \"minimal\"", file);
        f->minimal = r && strcmp(r, "minimal") == 0;
        size_t total = 0;
        if (rc == 0)
            rc = parse_paths(file, v, "read", resolve, &f->read, &total, err, errlen);
        if (rc == 0)
            rc = parse_paths(file, v, "write", resolve, &f->write, &total, err, errlen);
        if (rc == 0)
            rc = parse_paths(file, v, "hide", resolve, &f->hide, &total, err, errlen);
    } else {
        rc = td_fail(err, errlen,
                     "%s: filesystem: expected \"host\" or an object (root, read, write, hide)",
                     file);
    }
    if (rc < 0) {
        td_fsview_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

int td_fsview_parse(const char *file, json_t *v, struct td_fsview **out, char *err, size_t errlen)
{
    return parse(file, v, true, out, err, errlen);
}

int td_fsview_parse_lexical(const char *key, json_t *v, struct td_fsview **out, char *err,
                            size_t errlen)
{
    int rc = parse(key, v, false, out, err, errlen);
    if (rc == 0)
        (*out)->lexical = true;
    return rc;
}

/* ---- the plan ---------------------------------------------------------------- */

enum item_kind {
    I_COVER_DIR,
    I_COVER_FILE,
    I_COVER_ANY, /* a narrowed view's: which of the two, the child sees */
    I_VEIL,      /* a hidden directory with something exposed below: a tmpfs */
    I_TMP,
    I_DEV,
    I_RO,
    I_RW,
    I_CALL, /* the call's directory, below the work directory */
    I_SYS_DIR,
    I_SYS_LINK,
};
struct item {
    char *path;
    enum item_kind kind;
    bool file;    /* an exposed file, not a directory */
    bool unknown; /* file or not: the child sees (a narrowed view's) */
    bool dropped; /* makes nothing: below something fresh already */
    int slot;
    char *target; /* I_SYS_LINK */
};
struct td_fsprep {
    struct td_fsplan plan;
    struct td_fs_op *ops;
    size_t nops, cap;
    char **strings; /* everything the ops point to */
    size_t nstrings, scap;
    const char **ll_write;
    const char *tools; /* the tools directory resolved, as hidden */
    bool failed;
};

static void prep_free(struct td_fsprep *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nstrings; i++)
        free(p->strings[i]);
    free(p->strings);
    free(p->ops);
    free(p->ll_write);
    free(p);
}

void td_fsview_free(struct td_fsview *v)
{
    if (!v)
        return;
    free_strv(v->read);
    free_strv(v->write);
    free_strv(v->hide);
    prep_free(v->prep);
    free(v);
}

/* A string the plan keeps (fmt as printf); NULL when out of memory. */
static const char *keep(struct td_fsprep *p, const char *fmt, ...)
{
    if (p->failed)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (s && p->nstrings == p->scap) {
        char **more = realloc(p->strings, (p->scap = p->scap ? p->scap * 2 : 64) * sizeof(*more));
        if (!more) {
            free(s);
            s = NULL;
        } else {
            p->strings = more;
        }
    }
    if (!s) {
        p->failed = true;
        return NULL;
    }
    return p->strings[p->nstrings++] = s;
}

static void op(struct td_fsprep *p, enum td_fs_kind kind, bool optional, int slot, unsigned mode,
               const char *path, const char *arg, const char *arg2)
{
    if (p->failed)
        return;
    if (p->nops == p->cap) {
        struct td_fs_op *more =
            realloc(p->ops, (p->cap = p->cap ? p->cap * 2 : 64) * sizeof(*more));
        if (!more) {
            p->failed = true;
            return;
        }
        p->ops = more;
    }
    p->ops[p->nops++] = (struct td_fs_op){.kind = (unsigned char)kind,
                                          .optional = optional,
                                          .slot = (short)slot,
                                          .mode = mode,
                                          .path = path,
                                          .arg = arg,
                                          .arg2 = arg2};
}

/* a is b or an ancestor of it */
static bool covers(const char *a, const char *b)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/' || (n == 1 && a[0] == '/'));
}

static bool strictly_below(const char *b, const char *a)
{
    return strcmp(a, b) != 0 && covers(a, b);
}

static int by_path(const void *x, const void *y)
{
    const struct item *a = x, *b = y;
    int c = strcmp(a->path, b->path);
    /* the call's directory is below the work directory, after its cover */
    return c ? c : (a->kind == I_CALL) - (b->kind == I_CALL);
}

static bool fresh(enum item_kind k)
{
    /* a cover of either kind: nothing can be below a file */
    return k == I_VEIL || k == I_TMP || k == I_DEV || k == I_COVER_DIR || k == I_COVER_ANY;
}

static bool cover(enum item_kind k)
{
    return k == I_COVER_DIR || k == I_COVER_FILE || k == I_COVER_ANY;
}

struct items {
    struct item *v;
    size_t n, cap;
    bool failed;
};

static struct item *add(struct items *it, const char *path, enum item_kind kind)
{
    for (size_t i = 0; i < it->n; i++)
        if (strcmp(it->v[i].path, path) == 0 && kind != I_CALL && it->v[i].kind != I_CALL) {
            /* a path named twice: an exposure wins over a cover, write over read */
            struct item *o = &it->v[i];
            if (kind == I_RW || (kind == I_RO && o->kind != I_RW) || cover(o->kind))
                if (!cover(kind))
                    o->kind = kind;
            return NULL;
        }
    if (it->n == it->cap) {
        struct item *more = realloc(it->v, (it->cap = it->cap ? it->cap * 2 : 32) * sizeof(*more));
        if (!more) {
            it->failed = true;
            return NULL;
        }
        it->v = more;
    }
    char *copy = strdup(path);
    if (!copy) {
        it->failed = true;
        return NULL;
    }
    struct item *e = &it->v[it->n++];
    *e = (struct item){.path = copy, .kind = kind, .slot = -1};
    return e;
}

static void add_cover(struct items *it, const char *path)
{
    struct stat st;
    if (path && lstat(path, &st) == 0)
        add(it, path, S_ISDIR(st.st_mode) ? I_COVER_DIR : I_COVER_FILE);
}

/* Would the view leave path out: hidden, or below the call's fresh /tmp or
 * /dev? (A daemon built or installed under /tmp, or a tool kept in a home
 * directory, still has to be executed.) */
static bool left_out(const struct items *it, const char *path)
{
    for (size_t k = 0; k < it->n; k++) {
        enum item_kind kd = it->v[k].kind;
        if ((cover(kd) || kd == I_TMP || kd == I_DEV) && covers(it->v[k].path, path))
            return true;
    }
    return false;
}

/* The nearest item that is an ancestor of v[i] and makes something; NULL:
 * none (the host's root, or in a minimal root a fresh one). */
static const struct item *ancestor(const struct items *it, size_t i)
{
    const struct item *best = NULL;
    for (size_t k = 0; k < it->n; k++) {
        const struct item *a = &it->v[k];
        if (k == i || a->dropped || a->kind == I_CALL || a->kind == I_COVER_FILE ||
            a->kind == I_SYS_LINK)
            continue;
        if (!strictly_below(it->v[i].path, a->path) &&
            !(it->v[i].kind == I_CALL && strcmp(it->v[i].path, a->path) == 0))
            continue;
        if (!best || strlen(a->path) > strlen(best->path))
            best = a;
    }
    return best;
}

static struct td_fsprep *prepare(const struct td_fsview *v, bool minimal, const char *cmd,
                                 const char *init)
{
    struct td_fsprep *p = calloc(1, sizeof(*p));
    struct items it = {0};
    if (!p)
        return NULL;
    const char *work = td_cfg.work_dir;
    char tools[PATH_MAX];
    /* what is hidden */
    for (size_t i = 0; td_fs_hidden[i]; i++)
        add_cover(&it, td_fs_hidden[i]);
    bool have_tools = realpath(td_cfg.tools_dir, tools) != NULL;
    add_cover(&it, have_tools ? tools : NULL);
    p->tools = have_tools ? keep(p, "%s", tools) : NULL;
    add_cover(&it, work);
    add_cover(&it, td_cfg.socket_path);
    add_cover(&it, td_cfg.events_socket_path);
    add_cover(&it, td_fsview_secret_dir);
    /* a narrowed view's paths are a client's: never looked up here, on the
     * loop (a hung mount; what is there): the child sees what each is */
    bool lexical = v && v->lexical;
    for (char **h = v ? v->hide : NULL; h && *h; h++)
        if (lexical)
            add(&it, *h, I_COVER_ANY);
        else
            add_cover(&it, *h);
    /* what is private, and exposed */
    add(&it, "/tmp", I_TMP);
    add(&it, "/dev", I_DEV);
    int slot = SLOT_FIRST;
    for (int k = 0; k < 2; k++)
        for (char **x = v ? (k ? v->write : v->read) : NULL; x && *x; x++) {
            add(&it, *x, k ? I_RW : I_RO);
        }
    add(&it, work, I_CALL);
    /* the tool's own program, where a definition names one beside it */
    /* (only where no symbolic link is on the way: the child will not
     * follow one) */
    char real[PATH_MAX], norm[PATH_MAX];
    if (cmd && cmd[0] == '/' && strlen(cmd) < sizeof(norm)) {
        /* "DIR/./bin/x" (a command relative to the definition) as "DIR/bin/x" */
        char *d = norm;
        for (const char *c = cmd; *c; c++) {
            if (c[0] == '/' && c[1] == '/')
                continue;
            if (c[0] == '/' && c[1] == '.' && (c[2] == '/' || !c[2])) {
                c++; /* the "/." */
                continue;
            }
            *d++ = *c;
        }
        *d = '\0';
        if (((have_tools && covers(tools, norm)) || minimal || left_out(&it, norm)) &&
            realpath(norm, real) && strcmp(real, norm) == 0)
            add(&it, norm, I_RO);
    }
    if (init && (minimal || left_out(&it, init)) && realpath(init, real) && strcmp(real, init) == 0)
        add(&it, init, I_RO); /* toolexecd-init, the call's PID 1 */
    for (size_t i = 0; i < it.n; i++) {
        struct stat st;
        if ((it.v[i].kind == I_RO || it.v[i].kind == I_RW) && !(it.v[i].unknown = lexical))
            it.v[i].file = lstat(it.v[i].path, &st) == 0 && !S_ISDIR(st.st_mode);
    }

    if (minimal) {
        static const char *const sys[] = {"/usr", "/bin", "/sbin", "/etc"};
        for (size_t i = 0; i < 4; i++)
            add(&it, sys[i], I_SYS_DIR);
        DIR *d = opendir("/");
        struct dirent *de;
        while (d && (de = readdir(d)))
            if (strncmp(de->d_name, "lib", 3) == 0) {
                char path[NAME_MAX + 2];
                snprintf(path, sizeof(path), "/%s", de->d_name);
                add(&it, path, I_SYS_DIR);
            }
        if (d)
            closedir(d);
        for (size_t i = 0; i < it.n; i++) {
            struct stat st;
            char target[PATH_MAX];
            ssize_t n;
            if (it.v[i].kind != I_SYS_DIR)
                continue;
            if (lstat(it.v[i].path, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode))) {
                it.v[i].dropped = true;
            } else if (S_ISLNK(st.st_mode) &&
                       (n = readlink(it.v[i].path, target, sizeof(target) - 1)) > 0) {
                target[n] = '\0';
                it.v[i].kind = I_SYS_LINK;
                it.v[i].target = strdup(target);
                it.failed |= !it.v[i].target;
            }
        }
    }
    if (it.failed)
        goto out;
    /* a hidden directory with something exposed below it is a veil */
    for (size_t i = 0; i < it.n; i++)
        if (it.v[i].kind == I_COVER_DIR || it.v[i].kind == I_COVER_ANY)
            for (size_t k = 0; k < it.n; k++)
                if ((it.v[k].kind == I_RO || it.v[k].kind == I_RW || it.v[k].kind == I_CALL) &&
                    (strictly_below(it.v[k].path, it.v[i].path) ||
                     (it.v[k].kind == I_CALL && covers(it.v[i].path, it.v[k].path))))
                    it.v[i].kind = I_VEIL;
    qsort(it.v, it.n, sizeof(*it.v), by_path);

    /* the minimal root is made at the work directory, then becomes / */
    const char *pre = minimal ? work : "";
    const char *base_root = minimal ? keep(p, "%s", work) : NULL;
    op(p, TD_FS_OPEN, false, SLOT_CALL, 0, NULL, NULL, NULL);
    for (int i = 0; i < 5; i++)
        op(p, TD_FS_OPEN, true, SLOT_DEV + i, 0, keep(p, "/dev/%s", devices[i]), NULL, NULL);
    for (size_t i = 0; i < it.n; i++)
        if ((it.v[i].kind == I_RO || it.v[i].kind == I_RW) && !it.v[i].dropped) {
            it.v[i].slot = slot++;
            op(p, TD_FS_OPEN, false, it.v[i].slot, 0, keep(p, "%s", it.v[i].path), NULL, NULL);
        }
    int ca_slot = -1;
    if (v && v->proxy_ca && td_fsview_ca_bundle) {
        ca_slot = slot++;
        op(p, TD_FS_OPEN, false, ca_slot, 0, keep(p, "%s", td_fsview_ca_bundle), NULL, NULL);
    }
    if (minimal) {
        op(p, TD_FS_TMPFS, false, 0, MS_NOSUID | MS_NODEV, base_root, "mode=0755,size=64k", NULL);
        /* the host's /proc below the call's own: in a user namespace a
         * proc mount needs one fully visible already (mnt_already_visible) */
        const char *proc = keep(p, "%s/proc", work);
        op(p, TD_FS_MKDIR, false, 0, 0555, proc, NULL, NULL);
        op(p, TD_FS_OPEN, false, slot, 0, "/proc", NULL, NULL);
        op(p, TD_FS_BIND, false, slot++, 1, proc, NULL, NULL);
    }
    /* /dev first: the covers are made in it */
    const char *dev = keep(p, "%s/dev", pre);
    if (minimal)
        op(p, TD_FS_MKDIR, false, 0, 0755, dev, NULL, NULL);
    op(p, TD_FS_TMPFS, false, 0, MS_NOSUID | MS_NOEXEC, dev, DEV_OPTS, NULL);
    op(p, TD_FS_HIDERS, false, 0, 0, dev, NULL, NULL);
    for (int i = 0; i < 5; i++) {
        const char *node = keep(p, "%s/%s", dev, devices[i]);
        op(p, TD_FS_NODE, false, SLOT_DEV + i, 0666, node, NULL, NULL);
    }
    static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                           {"stdin", "/proc/self/fd/0"},
                                           {"stdout", "/proc/self/fd/1"},
                                           {"stderr", "/proc/self/fd/2"}};
    for (int i = 0; i < 4; i++)
        op(p, TD_FS_SYMLINK, false, 0, 0, keep(p, "%s/%s", dev, links[i][0]), links[i][1], NULL);
    op(p, TD_FS_MKDIR, false, 0, 01777, keep(p, "%s/shm", dev), NULL, NULL);

    size_t nll = 2;
    for (size_t i = 0; i < it.n; i++) {
        struct item *e = &it.v[i];
        if (e->kind == I_DEV || e->dropped)
            continue;
        const struct item *a = ancestor(&it, i);
        bool below_fresh = minimal ? (!a || fresh(a->kind)) : (a && fresh(a->kind));
        const char *path = keep(p, "%s%s", pre, e->path);
        const char *base = a ? keep(p, "%s%s", pre, a->path) : minimal ? base_root : "/";
        switch (e->kind) {
        case I_COVER_DIR:
        case I_COVER_FILE:
            if (below_fresh)
                e->dropped = true;
            else
                op(p, TD_FS_BIND, true, e->kind == I_COVER_DIR ? TD_FS_SLOT_HDIR : TD_FS_SLOT_HFILE,
                   0, path, NULL, NULL);
            break;
        case I_COVER_ANY:
            if (below_fresh)
                e->dropped = true;
            else
                op(p, TD_FS_COVER, true, 0, 0, path, NULL, NULL);
            break;
        case I_VEIL:
            if (below_fresh) {
                e->dropped = true; /* what is below it chains from the fresh one */
                break;
            }
            op(p, TD_FS_TMPFS, false, 0, MS_NOSUID | MS_NODEV | MS_NOEXEC, path, VEIL_OPTS, NULL);
            break;
        case I_TMP:
            if (below_fresh)
                op(p, TD_FS_CHAIN, false, 0, 0, path, base, NULL);
            op(p, TD_FS_TMPFS, false, 0, MS_NOSUID | MS_NODEV, path, TMP_OPTS, NULL);
            break;
        case I_RO:
        case I_RW:
            nll += e->kind == I_RW;
            if (below_fresh)
                op(p, TD_FS_CHAIN, false, e->slot, e->unknown ? 2 : e->file, path, base, NULL);
            else if (e->kind == I_RO && !(a && a->kind == I_RW))
                break; /* the host's, read-only already */
            op(p, TD_FS_BIND, false, e->slot, 1, path, NULL, NULL);
            break;
        case I_CALL:
            op(p, TD_FS_CALLDIR, false, 0, 0, NULL, base, pre);
            break;
        case I_SYS_DIR:
            if (!below_fresh)
                break; /* below an exposure: already there */
            op(p, TD_FS_MKDIR, false, 0, 0755, path, NULL, NULL);
            op(p, TD_FS_OPEN, false, slot, 0, keep(p, "%s", e->path), NULL, NULL);
            /* opened after the first binds: the root tmpfs covers only the
             * work directory, so the host's path is still there */
            op(p, TD_FS_BIND, false, slot++, 1, path, NULL, NULL);
            break;
        case I_SYS_LINK:
            op(p, TD_FS_SYMLINK, false, 0, 0, path, keep(p, "%s", e->target), NULL);
            break;
        case I_DEV:
            break;
        }
    }
    if (slot > TD_FS_SLOTS) {
        p->failed = true;
        goto out;
    }
    /* the proxy's CA where TLS libraries look (optional: no system bundle,
     * no bind; the environment still names it) */
    if (ca_slot >= 0)
        op(p, TD_FS_BIND, true, ca_slot, 0, keep(p, "%s/etc/ssl/certs/ca-certificates.crt", pre),
           NULL, NULL);
    op(p, TD_FS_HIDERS, false, 0, 1, dev, NULL, NULL);
    if (minimal)
        op(p, TD_FS_PIVOT, false, 0, 0, base_root, NULL, NULL);
    op(p, TD_FS_RDONLY, false, 0, 0, NULL, NULL, NULL);
    op(p, TD_FS_RDWR, false, 0, 0, "/tmp", NULL, NULL);
    op(p, TD_FS_RDWR, false, 0, 0, "/dev", NULL, NULL);
    op(p, TD_FS_RDWR, false, 0, 0, NULL, NULL, "");
    p->ll_write = calloc(nll + 1, sizeof(char *));
    if (!p->ll_write)
        p->failed = true;
    size_t n = 0;
    if (!p->failed) {
        p->ll_write[n++] = "/tmp";
        p->ll_write[n++] = "/dev";
    }
    for (size_t i = 0; i < it.n && !p->failed; i++)
        if (it.v[i].kind == I_RW) {
            const char *w = keep(p, "%s", it.v[i].path);
            op(p, TD_FS_RDWR, false, 0, 0, w, NULL, NULL);
            p->ll_write[n++] = w;
        }
    p->plan.ops = p->ops;
    p->plan.n = p->nops;
out:
    for (size_t i = 0; i < it.n; i++) {
        free(it.v[i].path);
        free(it.v[i].target);
    }
    free(it.v);
    if (it.failed || p->failed) {
        prep_free(p);
        return NULL;
    }
    return p;
}

/* Without a mount namespace (--containment pgroup): no view; Landlock
 * still keeps writes to the call's directory, the write paths and the
 * harmless devices. */
static const char **bare_ll_write(const struct td_fsview *v)
{
    size_t n = 0;
    for (char **w = v ? v->write : NULL; w && *w; w++)
        n++;
    const char **out = calloc(n + 6, sizeof(char *));
    if (!out)
        return NULL;
    n = 0;
    static const char *const nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                        "/dev/urandom"};
    for (int i = 0; i < 5; i++)
        out[n++] = nodes[i];
    for (char **w = v ? v->write : NULL; w && *w; w++)
        out[n++] = *w;
    return out;
}

bool td_fsview_is_host(const struct td_fsview *v)
{
    return !v || (v->dflt ? td_fs_default == TD_FS_HOST : v->host);
}

int td_fsview_plan(struct td_fsview *v, const char *cmd, const char *init, bool mount_ns,
                   const struct td_fsplan **plan, const char *const **ll_write)
{
    *plan = NULL;
    *ll_write = NULL;
    bool minimal = v->dflt ? td_fs_default == TD_FS_MINIMAL : v->minimal;
    if (td_fsview_is_host(v))
        return 0;
    bool ll = td_fsview_landlock_abi() > 0;
    if (!mount_ns) {
        if (!ll)
            return 0;
        if (!v->prep && (v->prep = calloc(1, sizeof(*v->prep))))
            v->prep->ll_write = bare_ll_write(v);
        if (!v->prep || !v->prep->ll_write)
            return -ENOMEM;
        *ll_write = (const char *const *)v->prep->ll_write;
        return 0;
    }
    if (!v->prep && !(v->prep = prepare(v, minimal, cmd, init)))
        return -ENOMEM;
    *plan = &v->prep->plan;
    if (ll)
        *ll_write = (const char *const *)v->prep->ll_write;
    return 0;
}

const char *td_fsview_planned_tools(const struct td_fsview *v, bool *known)
{
    *known = v->prep && !v->prep->failed; /* a plan resolves it first thing */
    return *known ? v->prep->tools : NULL;
}

int td_fsview_landlock_abi(void)
{
    static int abi = -1;
    if (abi < 0)
        abi = te_landlock_abi();
    return td_cfg.layers_off & TD_LAYER_LANDLOCK ? 0 : abi;
}

bool td_fsview_mount_ns;

void td_fsview_setup(bool mount_ns)
{
    td_fsview_mount_ns = mount_ns;
    int abi = td_fsview_landlock_abi();
    if (td_fs_default == TD_FS_HOST)
        td_log(TD_LOG_WARN, "--filesystem host: tools without a \"filesystem\" key see the host's "
                            "file system as far as their user may");
    else if (mount_ns)
        td_log(TD_LOG_INFO,
               "filesystem: each call sees %s, a /tmp, /dev and directory of its "
               "own, secrets and other calls hidden%s",
               td_fs_default == TD_FS_MINIMAL ? "a minimal root (/usr, /etc, /lib*)"
                                              : "the host read-only",
               abi ? "; Landlock keeps its writes there too" : "");
    else
        td_log(TD_LOG_WARN,
               "filesystem: no mount namespace per call: calls see the host's file "
               "system; %s",
               abi ? "Landlock keeps their writes to their own directory and \"write\" paths"
                   : "nothing keeps their writes in");
}
