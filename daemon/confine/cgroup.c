/*
 * cgroup.c - a cgroup v2 directory per call, where the daemon has a cgroup
 * of its own to manage: one systemd delegated to it (Delegate=yes, seen as
 * the trusted.delegate or user.delegate attribute on the directory), or one
 * named with --cgroup DIR.
 *
 * What a call's cgroup gives:
 *   - containment (--containment cgroup): one write to cgroup.kill kills
 *     every process in it, setsid() strays included, without a PID
 *     namespace;
 *   - memory_mb as memory.max, with memory.swap.max 0 (the limit is memory,
 *     not memory plus swap) and memory.oom.group 1 (an OOM kill takes the
 *     whole call, as systemd's OOMPolicy=kill does); memory.events then
 *     tells that the kernel's OOM killer ended the call;
 *   - processes as pids.max.
 * Where the memory or pids controller is not available to us, those limits
 * stay rlimits (RLIMIT_AS, RLIMIT_NPROC); the start-up log says which.
 *
 * Layout under the base directory B:
 *   B/supervisor  the daemon itself, if it started inside B: a cgroup may
 *                 hand controllers to its children only while it has no
 *                 processes of its own (cgroup v2's "no internal processes").
 *   B/call-N      one per running call; the child joins it before anything
 *                 else it does (sandbox.c). Once empty it waits in a pool
 *                 for the next call (see CG_POOL_MAX); all are removed when
 *                 the daemon stops.
 * call-* directories found at start were left by a daemon that was killed:
 * whatever still runs in them is killed and they are removed.
 *
 * Nothing here blocks: cgroupfs files are kernel memory, and an emptied
 * cgroup is waited for with inotify on its cgroup.events ("populated 0").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "log.h"
#include "util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

struct td_cgroup {
    char name[32]; /* call-N under the base */
    int dirfd;
    int procs;           /* cgroup.procs, written by the child to join */
    long long oom_base;  /* memory.events oom_kill when the call began */
    long long pids_base; /* pids.events max when the call began */
    bool killed;         /* cgroup.kill was written: see td_cgroup_dir_fd() */
    uv_fs_event_t watch;
    SLIST_ENTRY(td_cgroup) link; /* in the pool of empty ones */
};

static int base_fd = -1;
static char base_path[PATH_MAX];
static bool have_memory, have_pids;
static bool by_delegation; /* the base is ours by Delegate=yes, not --cgroup */
static unsigned long long cg_seq;

bool td_cgroup_delegated(void)
{
    return base_fd >= 0 && by_delegation;
}

bool td_cgroup_active(void)
{
    return base_fd >= 0;
}

bool td_cgroup_memory(void)
{
    return have_memory;
}

bool td_cgroup_pids(void)
{
    return have_pids;
}

const char *td_cgroup_base(void)
{
    return base_path;
}

/* ---- small file helpers --------------------------------------------------- */

static ssize_t read_at(int dirfd, const char *file, char *buf, size_t len)
{
    int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return n;
}

/* Whether a space-separated list (cgroup.controllers) names word. */
static bool has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
            return true;
    return false;
}

/* "key N" from a flat keyed file (memory.events, cgroup.events); -1 if not
 * there. */
static long long keyed(const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, n) == 0 && p[n] == ' ')
            return strtoll(p + n + 1, NULL, 10);
    return -1;
}

/* ---- where: our own cgroup, the cgroup2 mount ----------------------------- */

/* The cgroup2 mount point, "" if there is none. */
static void cgroup2_mount(char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];
    while (f && fgets(line, sizeof(line), f)) {
        /* id parent major:minor root mountpoint options... - fstype ... */
        char *dash = strstr(line, " - cgroup2 ");
        char root[PATH_MAX], mnt[PATH_MAX];
        if (dash && sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) == 2 &&
            strcmp(root, "/") == 0) {
            if ((size_t)snprintf(out, len, "%s", mnt) >= len)
                out[0] = '\0'; /* too long to use */
            break;
        }
    }
    if (f)
        fclose(f);
}

/* Our cgroup v2 path ("/system.slice/toolexecd.service"), "" if unknown. */
static void own_cgroup(char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[PATH_MAX + 8];
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            if ((size_t)snprintf(out, len, "%s", line + 3) >= len)
                out[0] = '\0';
        }
    if (f)
        fclose(f);
}

static bool delegated(const char *dir)
{
    char v[8];
    ssize_t n = getxattr(dir, "trusted.delegate", v, sizeof(v));
    if (n <= 0)
        n = getxattr(dir, "user.delegate", v, sizeof(v));
    return n > 0 && v[0] == '1';
}

void td_cgroup_probe(const char *want, struct td_cgroup_info *in)
{
    memset(in, 0, sizeof(*in));
    cgroup2_mount(in->mount, sizeof(in->mount));
    own_cgroup(in->own, sizeof(in->own));
    const char *mnt = in->mount, *own = in->own;
    if (!mnt[0]) {
        snprintf(in->why, sizeof(in->why), "no cgroup v2 mount");
        return;
    }
    if (want) {
        snprintf(in->dir, sizeof(in->dir), "%s", want);
        in->delegated = true; /* named by the administrator */
    } else {
        if (!own[0] || strcmp(own, "/") == 0) {
            snprintf(in->why, sizeof(in->why), "%s is in the root cgroup",
                     td_cfg.one_shot ? "toolexec sandbox" : "the daemon");
            return;
        }
        snprintf(in->dir, sizeof(in->dir), "%s%s", mnt, own);
        in->delegated = delegated(in->dir);
        /* started in a subgroup already (systemd's DelegateSubgroup=) */
        char *slash = strrchr(in->dir, '/');
        if (!in->delegated && slash && strcmp(slash, "/supervisor") == 0) {
            *slash = '\0';
            in->delegated = delegated(in->dir);
            if (!in->delegated)
                *slash = '/';
        }
    }
    struct statfs sf;
    if (statfs(in->dir, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC) {
        snprintf(in->why, sizeof(in->why), "not a cgroup v2 directory");
        return;
    }
    /* a child we may make, join and kill: everything the calls need */
    char probe[PATH_MAX + 64], file[PATH_MAX + 96];
    snprintf(probe, sizeof(probe), "%s/probe-%d", in->dir, (int)getpid());
    if (mkdir(probe, 0755) == 0 || errno == EEXIST) {
        snprintf(file, sizeof(file), "%s/cgroup.procs", probe);
        in->writable = access(file, W_OK) == 0;
        snprintf(file, sizeof(file), "%s/cgroup.kill", probe);
        in->kill = access(file, W_OK) == 0;
        rmdir(probe);
    }
    char list[256];
    int fd = open(in->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && read_at(fd, "cgroup.controllers", list, sizeof(list)) >= 0) {
        in->memory = has_word(list, "memory");
        in->pids = has_word(list, "pids");
    }
    if (fd >= 0)
        close(fd);
    if (!in->delegated)
        snprintf(in->why, sizeof(in->why), "not delegated to the daemon (systemd: Delegate=yes)");
    else if (!in->writable)
        snprintf(in->why, sizeof(in->why), "cannot make and join a cgroup there");
    else if (!in->kill)
        snprintf(in->why, sizeof(in->why), "no cgroup.kill (Linux 5.14 or later)");
    else
        in->usable = true;
}

/* ---- set-up --------------------------------------------------------------- */

/* Kill and remove call-* cgroups a killed daemon left behind. */
static void remove_stale(void)
{
    DIR *d = td_opendir_dup(base_fd);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "call-", 5) != 0)
            continue;
        int cfd = openat(base_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cfd < 0)
            continue;
        td_write_at(cfd, "cgroup.kill", "1");
        close(cfd);
        /* Their processes die within moments; a start-up may wait that
         * long, and what cannot be removed yet is logged. */
        int tries = 0;
        while (unlinkat(base_fd, e->d_name, AT_REMOVEDIR) < 0 && errno == EBUSY && tries++ < 1000)
            usleep(1000);
        td_log(tries > 1000 ? TD_LOG_WARN : TD_LOG_INFO, "cgroup %s/%s: left by an earlier run; %s",
               base_path, e->d_name, tries > 1000 ? "still busy, left" : "killed and removed");
    }
    closedir(d);
}

int td_cgroup_setup(const char *want)
{
    struct td_cgroup_info in;
    td_cgroup_probe(want, &in);
    if (!in.usable) {
        if (want) {
            td_log(TD_LOG_ERR, "--cgroup %s: %s", want, in.why);
            return -1;
        }
        td_log(TD_LOG_INFO, "cgroups: none per call (%s)", in.why[0] ? in.why : "unavailable");
        return 0;
    }
    base_fd = open(in.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (base_fd < 0) {
        td_log(TD_LOG_ERR, "cgroup %s: %s", in.dir, strerror(errno));
        return -1;
    }
    snprintf(base_path, sizeof(base_path), "%s", in.dir);
    by_delegation = !want;
    /* If we live in the base ourselves, move to a leaf of our own so that
     * the base may enable controllers for the calls. */
    char mine[2 * PATH_MAX];
    snprintf(mine, sizeof(mine), "%s%s", in.mount, in.own);
    if (strcmp(mine, in.dir) == 0) {
        int rc = mkdirat(base_fd, "supervisor", 0755) < 0 && errno != EEXIST ? -errno : 0;
        char self[16];
        snprintf(self, sizeof(self), "%d", (int)getpid());
        int sfd = rc == 0 ? openat(base_fd, "supervisor", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        rc = sfd < 0 ? -errno : td_write_at(sfd, "cgroup.procs", self);
        if (sfd >= 0)
            close(sfd);
        if (rc < 0)
            td_log(TD_LOG_WARN, "cgroup %s: cannot move the daemon to supervisor/: %s", in.dir,
                   strerror(-rc));
    }
    char on[64] = "";
    if (in.memory && td_write_at(base_fd, "cgroup.subtree_control", "+memory") == 0)
        have_memory = true;
    if (in.pids && td_write_at(base_fd, "cgroup.subtree_control", "+pids") == 0)
        have_pids = true;
    snprintf(on, sizeof(on), "%s%s", have_memory ? " memory" : "", have_pids ? " pids" : "");
    remove_stale();
    td_log(TD_LOG_INFO,
           "cgroups: a cgroup per call under %s (controllers:%s); memory_mb as %s, "
           "processes as %s",
           base_path, on[0] ? on : " none", have_memory ? "memory.max" : "RLIMIT_AS",
           have_pids ? "pids.max" : "RLIMIT_NPROC");
    return 0;
}

/* ---- one call's cgroup ---------------------------------------------------- */

/*
 * Emptied cgroups are kept for the next calls rather than removed: a mkdir
 * and rmdir in cgroupfs cost about 75 us together on the machine we measured
 * (more than everything else a call's cgroup costs), and a removed cgroup
 * that still has page cache charged to it lingers in the kernel as a
 * "dying" memory cgroup. A reused one gets its limits written afresh and
 * its OOM count read relative to the start of the call. Beyond this many
 * idle ones, emptied cgroups are removed.
 */
#define CG_POOL_MAX 64

static SLIST_HEAD(, td_cgroup) pool;
static unsigned npool;

static int write_limit(int dirfd, const char *file, uint64_t v)
{
    char num[32] = "max";
    if (v)
        snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
    return td_write_at(dirfd, file, num);
}

static void cg_destroy(struct td_cgroup *c)
{
    if (c->procs >= 0)
        close(c->procs);
    if (c->dirfd >= 0)
        close(c->dirfd);
    if (unlinkat(base_fd, c->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        td_log(TD_LOG_WARN, "cgroup %s/%s: rmdir: %s", base_path, c->name, strerror(errno));
    free(c);
}

static struct td_cgroup *cg_make(int *err)
{
    struct td_cgroup *c = calloc(1, sizeof(*c));
    if (!c) {
        *err = ENOMEM;
        return NULL;
    }
    c->dirfd = c->procs = -1;
    snprintf(c->name, sizeof(c->name), "call-%llu", ++cg_seq);
    if (mkdirat(base_fd, c->name, 0755) < 0) {
        *err = errno;
        free(c);
        return NULL;
    }
    c->dirfd = openat(base_fd, c->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dirfd >= 0)
        c->procs = openat(c->dirfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    /* an OOM kill takes the whole call, not one process of it */
    if (c->procs < 0 || (have_memory && td_write_at(c->dirfd, "memory.oom.group", "1") < 0)) {
        *err = errno;
        cg_destroy(c);
        return NULL;
    }
    return c;
}

struct td_cgroup *td_cgroup_new(uint64_t memory_mb, uint64_t pids_max, int *err)
{
    struct td_cgroup *c = SLIST_FIRST(&pool);
    if (c) {
        SLIST_REMOVE_HEAD(&pool, link);
        npool--;
    } else if (!(c = cg_make(err))) {
        return NULL;
    }
    c->oom_base = 0;
    int rc = 0;
    if (have_memory) {
        rc = write_limit(c->dirfd, "memory.max", memory_mb << 20);
        /* the limit is memory, not memory plus swap; the file is absent
         * without swap accounting, and then there is nothing to cap */
        int sw = rc == 0 ? td_write_at(c->dirfd, "memory.swap.max", memory_mb ? "0" : "max") : 0;
        if (sw < 0 && sw != -ENOENT)
            rc = sw;
        c->oom_base = td_cgroup_oom_kills(c);
    }
    c->pids_base = 0;
    if (rc == 0 && have_pids) {
        rc = write_limit(c->dirfd, "pids.max", pids_max);
        c->pids_base = td_cgroup_pids_refusals(c);
    }
    if (rc < 0) {
        *err = -rc;
        cg_destroy(c);
        return NULL;
    }
    return c;
}

int td_cgroup_dir_fd(const struct td_cgroup *c)
{
    /* A process cloned into a cgroup that was ever killed with cgroup.kill
     * is itself killed at birth (seen on Linux 6.18: the cgroup's kill
     * sequence no longer matches its css_set's), while one that moves in
     * through cgroup.procs is not. So such a cgroup is joined the slower
     * way, and cgroup.kill is only used when something is left to kill. */
    return c && !c->killed ? c->dirfd : -1;
}

int td_cgroup_procs_fd(const struct td_cgroup *c)
{
    return c ? c->procs : -1;
}

static bool populated(const struct td_cgroup *c)
{
    char buf[128];
    /* unreadable: treat as busy; the watch or the next start deals with it */
    return read_at(c->dirfd, "cgroup.events", buf, sizeof(buf)) < 0 || keyed(buf, "populated") != 0;
}

static void cg_kill(struct td_cgroup *c)
{
    c->killed = true;
    int rc = td_write_at(c->dirfd, "cgroup.kill", "1");
    if (rc < 0)
        td_log(TD_LOG_WARN, "cgroup %s/%s: cgroup.kill: %s", base_path, c->name, strerror(-rc));
}

void td_cgroup_kill(struct td_cgroup *c)
{
    if (c && populated(c))
        cg_kill(c);
}

long long td_cgroup_oom_kills(const struct td_cgroup *c)
{
    char buf[512];
    if (!c || read_at(c->dirfd, "memory.events", buf, sizeof(buf)) < 0)
        return 0;
    long long n = keyed(buf, "oom_kill") - c->oom_base;
    return n > 0 ? n : 0;
}

long long td_cgroup_pids_refusals(const struct td_cgroup *c)
{
    char buf[128];
    if (!c || !have_pids || read_at(c->dirfd, "pids.events", buf, sizeof(buf)) < 0)
        return 0;
    long long n = keyed(buf, "max") - c->pids_base;
    return n > 0 ? n : 0;
}

/* An empty cgroup: back to the pool, or removed. */
static void cg_done(struct td_cgroup *c)
{
    if (npool >= CG_POOL_MAX || td_shutting_down) {
        cg_destroy(c);
        return;
    }
    SLIST_INSERT_HEAD(&pool, c, link);
    npool++;
}

static void on_watch_closed(uv_handle_t *h)
{
    cg_done(h->data);
}

static void on_watch_failed(uv_handle_t *h)
{
    cg_destroy(h->data); /* says so if it cannot be removed yet */
}

static void on_events(uv_fs_event_t *h, const char *file, int events, int status)
{
    (void)file;
    (void)events;
    (void)status;
    if (!populated(h->data))
        uv_close((uv_handle_t *)h, on_watch_closed);
}

void td_cgroup_release(struct td_cgroup *c)
{
    if (!c)
        return;
    /* one read of cgroup.events per call on the usual path: empty already */
    if (!populated(c)) {
        cg_done(c);
        return;
    }
    /* Kill what is left; it is on its way out then, and cgroup.events
     * changes ("populated 0") when the last one has gone. */
    cg_kill(c);
    char events[PATH_MAX + 64];
    snprintf(events, sizeof(events), "%s/%s/cgroup.events", base_path, c->name);
    uv_fs_event_init(td_loop, &c->watch);
    c->watch.data = c;
    int rc = uv_fs_event_start(&c->watch, on_events, events, 0);
    if (rc < 0) {
        td_log(TD_LOG_WARN,
               "cgroup %s/%s: cannot watch cgroup.events (%s); left for the next start", base_path,
               c->name, uv_strerror(rc));
        uv_close((uv_handle_t *)&c->watch, on_watch_failed);
        return;
    }
    /* it may have emptied between the read and the watch */
    if (!populated(c))
        uv_close((uv_handle_t *)&c->watch, on_watch_closed);
}

void td_cgroup_close(void)
{
    struct td_cgroup *c;
    while ((c = SLIST_FIRST(&pool))) {
        SLIST_REMOVE_HEAD(&pool, link);
        cg_destroy(c);
    }
    npool = 0;
    if (base_fd >= 0)
        close(base_fd);
    base_fd = -1;
}
