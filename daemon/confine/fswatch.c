/*
 * fswatch.c - a root daemon's calls' file-system refusals (fswatch.h):
 * fswatch.bpf.c loaded, its ring read on the loop, each watched uid's
 * records kept (distinct, bounded) until its call's end classifies them.
 *
 * Why BPF: the view refuses by its mounts (a read-only bind: EROFS; an
 * empty cover over a hidden tree: EACCES or ENOENT; a noexec mount:
 * EACCES), checks
 * the kernel makes before any security module runs, so neither Landlock's
 * audit records (which need the host's audit on, besides) nor fanotify
 * (which sees only files that were opened) ever see them. A system call's
 * end is where every one of them passes, with the path as the call named
 * it. Cost: the program runs at the end of every system call on the host
 * and returns at its first test unless the call failed with one of four
 * errors; then a hash lookup by uid, and for a watched one a walk up its
 * ancestors to this daemon.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "config.h"
#include "containment.h"
#include "denials.h"
#include "fsview.h"
#include "fswatch.h"
#include "log.h"
#include "toolexec.h"

#ifdef TD_HAVE_FSWATCH
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <unistd.h>

#include "fswatch_noloop_obj.h" /* the same without bpf_loop: td_fswatch_obj_noloop[] */
#include "fswatch_obj.h"        /* fswatch.bpf.c compiled: td_fswatch_obj[] */
#include "kbtf.h"
#include "fswatch_rec.h"
#include <bpf/libbpf_version.h>
#include <dlfcn.h>
#endif

/* Distinct records kept per uid: the BPF program's budgets, so that
 * nothing it sends is dropped here; each path its own length. */
#define KEEP_MAX 512
#define BUCKETS 1024

struct rec {
    int err;
    const char *access;
    char *path;
};

struct entry {
    uid_t uid;
    struct rec *recs;
    size_t n, cap;
    /* no more watched, its records not collected yet: a warm call's PID 1
     * may end (and its uid go back) before its result is out */
    bool retired;
    uint64_t refused; /* the BPF counter, once retired */
    struct entry *next;
};

static struct entry *table[BUCKETS];
static bool active;

#ifdef TD_HAVE_FSWATCH
/* libbpf (and libelf and zlib under it) opened when a watch is loaded,
 * not linked: a run that loads none (an unprivileged toolexec sandbox, a
 * daemon with --fs-refusals no) maps none of them, 0.35 ms of each such
 * start. These are all of it this file calls. */
#define LIBBPF_FNS(X)                                                                              \
    X(bpf_link__destroy)                                                                           \
    X(bpf_map__set_max_entries)                                                                    \
    X(bpf_map_delete_elem)                                                                         \
    X(bpf_map_lookup_elem)                                                                         \
    X(bpf_map_update_elem)                                                                         \
    X(bpf_object__close)                                                                           \
    X(bpf_object__find_map_by_name)                                                                \
    X(bpf_object__find_map_fd_by_name)                                                             \
    X(bpf_object__find_program_by_name)                                                            \
    X(bpf_object__load)                                                                            \
    X(bpf_object__open_mem)                                                                        \
    X(bpf_program__attach)                                                                         \
    X(libbpf_set_print)                                                                            \
    X(ring_buffer__consume)                                                                        \
    X(ring_buffer__epoll_fd)                                                                       \
    X(ring_buffer__free)                                                                           \
    X(ring_buffer__new)
static struct {
#define LIBBPF_PTR(f) __typeof__(f) *f;
    LIBBPF_FNS(LIBBPF_PTR)
#undef LIBBPF_PTR
} lb;
#define STR_(x) #x
#define STR(x) STR_(x)
#define LIBBPF_SONAME "libbpf.so." STR(LIBBPF_MAJOR_VERSION)

/* 0, or -ELIBACC (libbpf not there, or not the one built against). */
static int libbpf_open(void)
{
    static void *lib;
    if (lib)
        return 0;
    void *h = dlopen(LIBBPF_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -ELIBACC;
#define LIBBPF_SYM(f)                                                                              \
    if (!(lb.f = (__typeof__(f) *)dlsym(h, #f))) {                                                 \
        dlclose(h);                                                                                \
        return -ELIBACC;                                                                           \
    }
    LIBBPF_FNS(LIBBPF_SYM)
#undef LIBBPF_SYM
    lib = h;
    return 0;
}

static struct bpf_object *obj;
static struct bpf_link *link_;
static struct ring_buffer *rb;
static int calls_fd = -1;
static uv_poll_t ring_poll;
static bool polling;
#endif

static struct entry **slot(uid_t uid)
{
    struct entry **e = &table[uid % BUCKETS];
    while (*e && (*e)->uid != uid)
        e = &(*e)->next;
    return e;
}

static void entry_free(struct entry *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->recs[i].path);
    free(e->recs);
    free(e);
}

static void entry_drop(uid_t uid)
{
    struct entry **s = slot(uid), *e = *s;
    if (e) {
        *s = e->next;
        entry_free(e);
    }
}

bool td_fswatch_active(void)
{
    return active;
}

#ifdef TD_HAVE_FSWATCH
/* What the call tried, from its system call and open flags. */
static const char *access_of(unsigned nr, unsigned flags)
{
    switch (nr) {
    case TD_FSW_NR_OPEN:
    case TD_FSW_NR_OPENAT:
    case TD_FSW_NR_OPENAT2:
    case TD_FSW_NR_CREAT:
        if (flags & O_CREAT)
            return "create";
        return (flags & (O_WRONLY | O_RDWR | O_TRUNC)) ? "write" : "read";
    case TD_FSW_NR_EXECVE:
    case TD_FSW_NR_EXECVEAT:
        return "execute";
    case TD_FSW_NR_MKDIR:
    case TD_FSW_NR_MKDIRAT:
    case TD_FSW_NR_MKNOD:
    case TD_FSW_NR_MKNODAT:
    case TD_FSW_NR_LINK:
    case TD_FSW_NR_LINKAT:
    case TD_FSW_NR_SYMLINK:
    case TD_FSW_NR_SYMLINKAT:
        return "create";
    case TD_FSW_NR_UNLINK:
    case TD_FSW_NR_UNLINKAT:
    case TD_FSW_NR_RMDIR:
    case TD_FSW_NR_RENAME:
    case TD_FSW_NR_RENAMEAT:
    case TD_FSW_NR_RENAMEAT2:
        return "remove";
    default: /* truncate, chmod, chown */
        return "write";
    }
}

static int on_record(void *ctx, void *data, size_t size)
{
    (void)ctx;
    const struct td_fsw_rec *r = data;
    if (size < sizeof(*r))
        return 0;
    struct entry *e = *slot(r->uid);
    if (!e) /* no more watched: its call is over */
        return 0;
    char path[TD_FSW_PATH_MAX];
    memcpy(path, r->path, sizeof(path));
    path[sizeof(path) - 1] = 0;
    te_utf8_repair(path); /* whatever bytes the tool named: JSON text */
    /* a relative name that is not there: nothing the view did (a hidden
     * tree is only ever named from the root); one relative to a directory
     * descriptor says nothing of where it is (a library probing what is
     * beneath a directory it opened) */
    if (!path[0] || (path[0] != '/' && (r->err == ENOENT || r->dirfd != TD_FSW_AT_FDCWD)))
        return 0;
    const char *access = access_of(r->nr, r->flags);
    for (size_t i = 0; i < e->n; i++)
        if (e->recs[i].err == r->err && e->recs[i].access == access &&
            strcmp(e->recs[i].path, path) == 0)
            return 0;
    if (e->n == KEEP_MAX)
        return 0;
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8;
        struct rec *n = realloc(e->recs, cap * sizeof(*n));
        if (!n)
            return 0;
        e->recs = n, e->cap = cap;
    }
    if (!(e->recs[e->n].path = strdup(path)))
        return 0;
    e->recs[e->n].err = r->err;
    e->recs[e->n++].access = access;
    return 0;
}

static void on_ring(uv_poll_t *p, int status, int events)
{
    (void)p, (void)status, (void)events;
    lb.ring_buffer__consume(rb);
}

static void drain(void)
{
    if (rb)
        lb.ring_buffer__consume(rb);
}

static bool counters(uid_t uid, struct td_fsw_call *c)
{
    __u32 k = uid;
    memset(c, 0, sizeof(*c));
    return calls_fd >= 0 && lb.bpf_map_lookup_elem(calls_fd, &k, c) == 0;
}

static int silent(enum libbpf_print_level l, const char *f, va_list ap)
{
    (void)l, (void)f, (void)ap;
    return 0;
}

/* Why it is off, and everything of it undone. */
static void say_off(const char *what, int err)
{
    td_log(TD_LOG_INFO,
           "file-system refusals are not reported: BPF %s: %s (a root daemon's, with "
           "CAP_BPF and CAP_PERFMON)",
           what, strerror(err ? err : EINVAL));
    td_fswatch_stop();
}

/* Its calls' table sized for calls uids (0: the object's, a daemon's
 * TD_FSW_CALLS_MAX): a hash map's elements are all allocated and zeroed
 * at its creation, 1.2 MB for a daemon's, which a one-shot run with one
 * uid paid for (0.4 ms of its CPU). Its ring too: fswatch.bpf.c puts in
 * it only records it sends, at most a call's two budgets of them (each
 * with 8 bytes of header), so a ring of calls times that (a power of two,
 * whole pages; 256 KiB for one) holds every record its calls can send
 * however late the loop reads them, where the daemon's 1 MiB (its pages
 * allocated and mapped at each load) cost a one-shot run 0.3 ms. */
static int load(struct bpf_object *o, unsigned calls)
{
    struct bpf_map *m = lb.bpf_object__find_map_by_name(o, "calls");
    int rc = calls && m ? lb.bpf_map__set_max_entries(m, calls) : 0;
    if (rc == 0 && calls) {
        size_t need = calls * (TD_FSW_REFUSED_BUDGET + TD_FSW_NOENT_BUDGET) *
                      ((sizeof(struct td_fsw_rec) + 8 + 7) & ~(size_t)7);
        size_t bytes = (size_t)sysconf(_SC_PAGESIZE);
        while (bytes < need)
            bytes *= 2;
        struct bpf_map *ring = lb.bpf_object__find_map_by_name(o, "ring");
        rc =
            ring && bytes < TD_FSW_RING_BYTES ? lb.bpf_map__set_max_entries(ring, (__u32)bytes) : 0;
    }
    return rc < 0 ? rc : lb.bpf_object__load(o);
}

int td_fswatch_load(unsigned calls)
{
#if !defined(__x86_64__)
    (void)calls;
    td_log(TD_LOG_INFO, "file-system refusals are not reported: only on x86-64");
    return -ENOTSUP;
#else
    const char *what = LIBBPF_SONAME;
    int err = -libbpf_open();
    if (err > 0) {
        const char *why = dlerror();
        td_log(TD_LOG_INFO, "file-system refusals are not reported: %s", why ? why : what);
        return -err;
    }
    lb.libbpf_set_print(silent);
    what = "the kernel's BTF (task_struct)";
    uint32_t off_tgid = 0, off_parent = 0;
    err = -td_kbtf_task_offsets(&off_tgid, &off_parent);
    if (err > 0)
        goto fail;
    what = "open";
    obj = lb.bpf_object__open_mem(td_fswatch_obj, sizeof(td_fswatch_obj), NULL);
    if (!obj) {
        err = errno;
        goto fail;
    }
    what = "load";
    if (load(obj, calls) < 0) { /* no bpf_loop (before Linux 5.17)? */
        lb.bpf_object__close(obj);
        obj = lb.bpf_object__open_mem(td_fswatch_obj_noloop, sizeof(td_fswatch_obj_noloop), NULL);
        if (!obj) {
            err = errno;
            goto fail;
        }
        if ((err = -load(obj, calls)) > 0)
            goto fail;
    }
    what = "attach";
    struct bpf_program *prog = lb.bpf_object__find_program_by_name(obj, "fsw_sys_exit");
    if (!prog || !(link_ = lb.bpf_program__attach(prog))) {
        err = prog ? errno : ENOENT;
        goto fail;
    }
    what = "ring";
    __u32 zero = 0;
    struct td_fsw_self me = {
        .tgid = (__u32)getpid(), .off_tgid = off_tgid, .off_parent = off_parent};
    if (lb.bpf_map_update_elem(lb.bpf_object__find_map_fd_by_name(obj, "self"), &zero, &me,
                               BPF_ANY) < 0) {
        err = errno;
        goto fail;
    }
    calls_fd = lb.bpf_object__find_map_fd_by_name(obj, "calls");
    rb =
        lb.ring_buffer__new(lb.bpf_object__find_map_fd_by_name(obj, "ring"), on_record, NULL, NULL);
    if (calls_fd < 0 || !rb) {
        err = rb ? ENOENT : errno;
        goto fail;
    }
    active = true;
    return 0;
fail:
    say_off(what, err);
    return -(err ? err : EINVAL);
#endif
}

int td_fswatch_serve(void)
{
    if (!active || polling)
        return active ? 0 : -ENOTSUP;
    int err = -uv_poll_init(td_loop, &ring_poll, lb.ring_buffer__epoll_fd(rb));
    if (err <= 0) {
        polling = true;
        err = -uv_poll_start(&ring_poll, UV_READABLE, on_ring);
    }
    if (err > 0) {
        say_off("ring", err);
        return -err;
    }
    uv_unref((uv_handle_t *)&ring_poll); /* never what keeps the loop running */
    td_log(TD_LOG_INFO, "file-system refusals: reported (BPF at each system call's end)");
    return 0;
}

void td_fswatch_watch(uid_t uid)
{
    if (!active)
        return;
    struct entry *old = *slot(uid);
    if (old && !old->retired)
        return;
    if (old) /* a call that never collected its records (its result went out before) */
        entry_drop(uid);
    struct entry *e = calloc(1, sizeof(*e));
    struct td_fsw_call zero = {0};
    __u32 k = uid;
    if (!e || lb.bpf_map_update_elem(calls_fd, &k, &zero, BPF_ANY) < 0) {
        free(e);
        return;
    }
    e->uid = uid;
    *slot(uid) = e;
}

void td_fswatch_unwatch(uid_t uid)
{
    struct entry *e = *slot(uid);
    if (!e || e->retired)
        return;
    drain(); /* its processes are gone: every record of theirs is in the ring */
    struct td_fsw_call c;
    bool counted = counters(uid, &c);
    __u32 k = uid;
    lb.bpf_map_delete_elem(calls_fd, &k);
    if (!e->n && !(counted && c.refused)) {
        entry_drop(uid);
        return;
    }
    e->retired = true;
    e->refused = counted ? c.refused : 0;
}

#else
int td_fswatch_load(unsigned calls)
{
    (void)calls;
    td_log(TD_LOG_INFO, "file-system refusals are not reported: built without libbpf");
    return -ENOTSUP;
}
int td_fswatch_serve(void)
{
    return -ENOTSUP;
}
void td_fswatch_watch(uid_t uid)
{
    (void)uid;
}
void td_fswatch_unwatch(uid_t uid)
{
    (void)uid;
}
static void drain(void) {}
#endif

int td_fswatch_start(unsigned calls)
{
    int rc = td_fswatch_load(calls);
    return rc < 0 ? rc : td_fswatch_serve();
}

/* Is path at or beneath dir? */
static bool beneath(const char *dir, const char *path)
{
    size_t n = strlen(dir);
    if (n == 1)
        return true;
    return strncmp(dir, path, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* A refusal no tool asked for: the C library's name service (nss-systemd)
 * looks a uid with no passwd entry up in systemd's userdb, whose sockets
 * the view hides with /run. Every call of a root daemon runs as such a uid
 * (--call-uids), so every Python call was refused that directory: noise
 * that would teach a model and --learn nothing. */
static bool library_probe(const char *path)
{
    return beneath("/run/systemd/userdb", path);
}

/* Which of the view's rules refused it, or NULL: not the view's doing (a
 * name that is simply not there). The tool is told nothing by it: the
 * rule is read from its definition, never from a lookup on the host. */
static const char *rule_of(const struct rec *r, const struct td_fsview *v,
                           const char *const *ll_write)
{
    /* a hidden tree's cover refuses what is beneath it (EACCES), and
     * what is not there is not there (ENOENT) */
    const char *by = v ? td_fsview_hides(v, r->path) : NULL;
    if (by && strcmp(by, "/tmp") && strcmp(by, "/dev")) { /* those two: the call's own */
        if (!strcmp(by, "the minimal root"))
            return "not in the minimal root";
        for (char **h = v->hide; h && *h; h++)
            if (!strcmp(*h, by))
                return "hide";
        return "hidden by the view";
    }
    if (r->err == ENOENT) /* simply not there */
        return NULL;
    if (r->err == EROFS)
        return "read-only in the view";
    /* EACCES, EPERM */
    if (!strcmp(r->access, "execute"))
        return r->path[0] == '/' && (beneath("/dev", r->path) || beneath("/run", r->path))
                   ? "not executable in the view"
                   : "permissions";
    if (!strcmp(r->access, "read"))
        return "permissions"; /* Landlock here governs writes only */
    if (ll_write && r->path[0] == '/') {
        for (const char *const *w = ll_write; *w; w++)
            if (beneath(*w, r->path))
                return "permissions";
        return "outside Landlock's rules";
    }
    return "permissions";
}

void td_fswatch_collect(uid_t uid, struct td_denials *d, struct td_fsview *v, const char *cmd)
{
    drain();
    struct entry *e = *slot(uid);
    if (!e)
        return;
    /* what Landlock lets it write (the view's plan, made at its tool's
     * first call and kept), only when there is something to tell */
    const struct td_fsplan *plan;
    const char *const *ll_write = NULL;
    if (e->n && v && td_fsview_plan(v, cmd, td_init_path, td_fsview_mount_ns, &plan, &ll_write) < 0)
        ll_write = NULL;
    size_t listed = 0;
    for (size_t i = 0; i < e->n; i++) {
        const char *rule =
            library_probe(e->recs[i].path) ? NULL : rule_of(&e->recs[i], v, ll_write);
        if (rule) {
            td_denials_filesystem(d, e->recs[i].path, e->recs[i].access, rule);
            listed += e->recs[i].err == ENOENT;
        }
        free(e->recs[i].path);
    }
    e->n = 0;
    d->fs_count += listed + e->refused;
    e->refused = 0;
    if (e->retired) {
        entry_drop(uid);
        return;
    }
#ifdef TD_HAVE_FSWATCH
    struct td_fsw_call c;
    if (counters(uid, &c)) {
        d->fs_count += c.refused;
        struct td_fsw_call zero = {0};
        __u32 k = uid;
        lb.bpf_map_update_elem(calls_fd, &k, &zero, BPF_EXIST);
    }
#endif
}

void td_fswatch_stop(void)
{
    for (size_t b = 0; b < BUCKETS; b++)
        while (table[b]) {
            struct entry *e = table[b];
            table[b] = e->next;
            entry_free(e);
        }
    active = false;
#ifdef TD_HAVE_FSWATCH
    if (polling)
        uv_close((uv_handle_t *)&ring_poll, NULL);
    polling = false;
    if (rb) /* libbpf opened only if there is anything of it */
        lb.ring_buffer__free(rb);
    rb = NULL;
    if (link_)
        lb.bpf_link__destroy(link_);
    link_ = NULL;
    if (obj)
        lb.bpf_object__close(obj);
    obj = NULL;
    calls_fd = -1;
#endif
}
