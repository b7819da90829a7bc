/*
 * spill.c - spill files: the full content of a cut result, for the client
 * that ran the call, in WORK/results. td_spill_write runs in the threadpool;
 * a file is removed when the connection that ran its batch closes (the
 * daemon cannot see when the client has read it, and after the client is
 * gone it is nobody's), or --spill-max-age seconds after it was written
 * (times kept here, since the client owns its file and could reset its
 * mtime and ctime) for a client that stays, so a long-running daemon does
 * not fill its disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "spill.h"

/* Open WORK/results, made on first use, refusing one that is not ours or
 * that others may write to (they could plant or swap names in it). 0711:
 * each client reads its own files by name, without listing the others. */
static int results_dir(void)
{
    char *dir = NULL;
    if (asprintf(&dir, "%s/results", td_cfg.work_dir) < 0)
        return -ENOMEM;
    if (mkdir(dir, 0711) < 0 && errno != EEXIST) {
        int e = errno;
        free(dir);
        return -e;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    free(dir);
    if (dfd < 0)
        return -e;
    struct stat st;
    if (fstat(dfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
        close(dfd);
        return -EPERM;
    }
    return dfd;
}

int td_spill_write(const char *name, const char *text, size_t len, uid_t uid)
{
    int dfd = results_dir();
    if (dfd < 0)
        return dfd;
    /* a fresh file, never one that is there (O_EXCL), never through a link */
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int err = fd < 0 ? errno : 0;
    if (fd < 0) {
        close(dfd);
        return -err;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            break;
        }
        off += (size_t)n;
    }
    /* Readable by the client that ran the batch (and nobody else: 0600).
     * An unprivileged daemon cannot give it to another uid: then it is not
     * a spill file for that client and is removed (root reads it as is). */
    if (!err && uid != geteuid() && fchown(fd, uid, (gid_t)-1) < 0 && !(errno == EPERM && uid == 0))
        err = errno;
    close(fd);
    if (err)
        unlinkat(dfd, name, 0);
    close(dfd);
    return -err;
}

/* One spill in the threadpool. */
struct spill {
    uv_work_t req;
    char *batch_id, *call_id;
    char *text, *name, *path;
    size_t len;
    uid_t uid;
    int err;
    struct td_spill_owner *owner;
    void (*done)(void *data, const char *path);
    void *data;
};

static void spill_write(uv_work_t *req)
{
    struct spill *sp = req->data;
    sp->err = -td_spill_write(sp->name, sp->text, sp->len, sp->uid);
}

static void spill_free(struct spill *sp)
{
    free(sp->batch_id);
    free(sp->call_id);
    free(sp->text);
    free(sp->name);
    free(sp->path);
    free(sp);
}

static void spill_done(uv_work_t *req, int status)
{
    struct spill *sp = req->data;
    if (sp->err)
        td_logc(TD_LOG_WARN, sp->batch_id, sp->call_id, "cannot spill to %s: %s", sp->path,
                strerror(sp->err));
    else
        td_spill_track(sp->path, sp->owner);
    sp->done(sp->data, sp->err ? NULL : sp->path);
    spill_free(sp);
}

int td_spill_start(const char *batch_id, const char *call_id, char *text, size_t len, uid_t uid,
                   struct td_spill_owner *owner, void (*done)(void *data, const char *path),
                   void *data)
{
    static unsigned long long spills;
    struct spill *sp = calloc(1, sizeof(*sp));
    if (!sp) {
        free(text);
        return -1;
    }
    sp->text = text;
    sp->len = len;
    sp->uid = uid;
    sp->owner = owner;
    sp->done = done;
    sp->data = data;
    sp->req.data = sp;
    /* the batch's id names the file: never one that leaves the directory */
    if (!strchr(batch_id, '/') && asprintf(&sp->name, "%s-%llu.txt", batch_id, ++spills) < 0)
        sp->name = NULL;
    if (sp->name && asprintf(&sp->path, "%s/results/%s", td_cfg.work_dir, sp->name) < 0)
        sp->path = NULL;
    if (sp->path && (sp->batch_id = strdup(batch_id)) && (sp->call_id = strdup(call_id)) &&
        uv_queue_work(td_loop, &sp->req, spill_write, spill_done) == 0)
        return 0;
    spill_free(sp);
    return -1;
}

/* ---- removal ------------------------------------------------------------ */

/* Files in the order they were written, so the oldest is always first; each
 * also on its owner's list. */
struct td_spilled {
    char *path;
    uint64_t written_ms;
    int err; /* of the unlink */
    TAILQ_ENTRY(td_spilled) link;
    LIST_ENTRY(td_spilled) olink;
    bool owned; /* on an owner's list */
};
TAILQ_HEAD(spill_list, td_spilled);

struct sweep {
    uv_work_t req;
    const char *why; /* NULL: they aged out */
    struct spill_list files;
};

static struct spill_list files = TAILQ_HEAD_INITIALIZER(files);
static uv_timer_t timer;
static bool timer_ready, stopped;

/* Off its owner's list (each owner's list stays valid after the files are
 * gone). */
static void disown(struct td_spilled *s)
{
    if (s->owned)
        LIST_REMOVE(s, olink);
    s->owned = false;
}

static void free_list(struct spill_list *l)
{
    struct td_spilled *s;
    while ((s = TAILQ_FIRST(l))) {
        TAILQ_REMOVE(l, s, link);
        disown(s);
        free(s->path);
        free(s);
    }
}

static void sweep_work(uv_work_t *req)
{
    struct sweep *sw = req->data;
    struct td_spilled *s;
    TAILQ_FOREACH(s, &sw->files, link)
        s->err = unlink(s->path) < 0 && errno != ENOENT ? errno : 0;
}

static void sweep_done(uv_work_t *req, int status)
{
    struct sweep *sw = req->data;
    struct td_spilled *s;
    TAILQ_FOREACH(s, &sw->files, link)
        if (s->err)
            td_log(TD_LOG_WARN, "cannot remove spill file %s: %s", s->path, strerror(s->err));
        else if (sw->why)
            td_log(TD_LOG_DEBUG, "removed spill file %s (%s)", s->path, sw->why);
        else
            td_log(TD_LOG_DEBUG, "removed spill file %s (older than %u s)", s->path,
                   td_cfg.spill_max_age_s);
    free_list(&sw->files);
    free(sw);
}

/* Hand the files of due to the threadpool (an unlink of a large file may
 * take a while); what cannot be handed over is left for the next start. */
static void sweep(struct spill_list *due, const char *why)
{
    struct sweep *sw = !TAILQ_EMPTY(due) ? calloc(1, sizeof(*sw)) : NULL;
    if (sw) {
        TAILQ_INIT(&sw->files);
        TAILQ_CONCAT(&sw->files, due, link);
        sw->why = why;
        sw->req.data = sw;
        if (uv_queue_work(td_loop, &sw->req, sweep_work, sweep_done) != 0) {
            TAILQ_CONCAT(due, &sw->files, link);
            free(sw);
        }
    }
    free_list(due);
}

static void arm(void);

/* Every file past its age goes; then wait for the next one. */
static void on_timer(uv_timer_t *t)
{
    uint64_t now = uv_now(td_loop), age = td_cfg.spill_max_age_s * 1000ULL;
    struct spill_list due = TAILQ_HEAD_INITIALIZER(due);
    struct td_spilled *s;
    while ((s = TAILQ_FIRST(&files)) && s->written_ms + age <= now) {
        TAILQ_REMOVE(&files, s, link);
        disown(s);
        TAILQ_INSERT_TAIL(&due, s, link);
    }
    sweep(&due, NULL);
    arm();
}

static void arm(void)
{
    if (TAILQ_EMPTY(&files) || stopped || !td_cfg.spill_max_age_s)
        return;
    uint64_t now = uv_now(td_loop),
             due = TAILQ_FIRST(&files)->written_ms + td_cfg.spill_max_age_s * 1000ULL;
    uv_timer_start(&timer, on_timer, due > now ? due - now : 0, 0);
}

void td_spill_track(const char *path, struct td_spill_owner *owner)
{
    if ((!td_cfg.spill_max_age_s && !owner) || stopped)
        return;
    struct td_spilled *s = calloc(1, sizeof(*s));
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return;
    }
    if (!timer_ready) {
        uv_timer_init(td_loop, &timer);
        /* a file's removal alone does not keep the daemon running */
        uv_unref((uv_handle_t *)&timer);
        timer_ready = true;
    }
    s->written_ms = uv_now(td_loop);
    if (owner) {
        LIST_INSERT_HEAD(&owner->files, s, olink);
        s->owned = true;
    }
    bool first = TAILQ_EMPTY(&files);
    TAILQ_INSERT_TAIL(&files, s, link);
    if (first)
        arm();
}

void td_spill_release(struct td_spill_owner *owner)
{
    struct spill_list due = TAILQ_HEAD_INITIALIZER(due);
    struct td_spilled *s;
    while ((s = LIST_FIRST(&owner->files))) {
        disown(s);
        TAILQ_REMOVE(&files, s, link);
        TAILQ_INSERT_TAIL(&due, s, link);
    }
    sweep(&due, "its client is gone");
    /* the oldest may have been among them */
    if (timer_ready && TAILQ_EMPTY(&files))
        uv_timer_stop(&timer);
}

void td_spill_stop(void)
{
    stopped = true;
    if (timer_ready)
        uv_close((uv_handle_t *)&timer, NULL);
    timer_ready = false;
    free_list(&files);
}
