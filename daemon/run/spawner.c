/*
 * spawner.c - the daemon's side of the spawner (spawner.h): the process
 * forked and restarted, requests sent, replies read and handed to each
 * call's worker. The spawner's own loop is spawnproc.c.
 *
 * Calls are slots (an index and a generation, so that a late reply for a
 * slot reused since is recognised and dropped); a request the socket
 * cannot take now waits in a queue, sent when it can, and one not yet sent
 * when the spawner dies goes to the next.
 *
 * If the spawner dies, the calls it had started die with it (their
 * parent-death signal): each ends with why (its worker makes it a
 * handler_exit), those sent but not started fail to start, and a new
 * spawner is forked at once; its death is logged as an error.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "fdpass.h"
#include "log.h"
#include "reaper.h"
#include "spawner.h"
#include "spawnmsg.h"
#include "spawnproc.h"

#define MAX_REPLY_FDS (1 + TD_HAND_COUNT)
#define MAX_REQ_FDS (TD_SANDBOX_ENDS + 2)

struct slot {
    const struct td_spawner_ops *ops;
    const struct td_spare_ops *spare; /* a spare's slot, not a call's */
    void *data;
    uint32_t gen;
    bool busy, sent, started;
};

struct queued {
    STAILQ_ENTRY(queued) link;
    uint32_t type, id, gen; /* the slot it speaks for, at its generation */
    bool orphan;            /* a DROP of a spare whose slot is gone (fail_queued) */
    uint8_t *msg;
    size_t len;
    int fds[MAX_REQ_FDS];
    size_t nfds;
};

static struct slot *slots;
static uint32_t nslots, *free_ids, nfree;
static STAILQ_HEAD(, queued) queue = STAILQ_HEAD_INITIALIZER(queue);
static int sock = -1;
static pid_t spid;
static uv_poll_t *io; /* one per spawner: closed with it */
/* the events io is started with, -1 stopped: uv_poll_start() takes the fd
 * out of epoll and puts it back on every call (two epoll_ctl), so it is
 * called only when they change, not at every request and reply */
static int io_events = -1;
static bool active, stopping;
static unsigned restarts, in_flight, spares_held;

static void fork_spawner(void);
static void on_io(uv_poll_t *h, int status, int events);

static void free_slot(uint32_t id)
{
    if (slots[id].spare)
        spares_held--;
    slots[id].busy = false;
    slots[id].spare = NULL;
    slots[id].gen++;
    free_ids[nfree++] = id;
    in_flight--;
}

static void drop_queued(struct queued *q)
{
    for (size_t i = 0; i < q->nfds; i++)
        close(q->fds[i]);
    if (q->msg) /* it may hold a credential (a call's env_credentials) */
        explicit_bzero(q->msg, q->len);
    free(q->msg);
    free(q);
}

static void watch_io(void)
{
    int want = UV_READABLE | (STAILQ_EMPTY(&queue) ? 0 : UV_WRITABLE);
    if (io && want != io_events && uv_poll_start(io, want, on_io) == 0)
        io_events = want;
}

static bool slot_is(uint32_t id, uint32_t gen)
{
    return id < nslots && slots[id].busy && slots[id].gen == gen;
}

/* A DROP of a spare whose slot has ended since (the spawner that held it
 * died): nothing left to drop. */
static bool stale_drop(const struct queued *q)
{
    return q->type == TD_SPAWN_REQ_DROP && !q->orphan && !slot_is(q->id, q->gen);
}

/* A request the socket refused for good: its call fails to start, its spare
 * is not made (a DROP is let go: the spare goes with its spawner). A call's
 * spare, never told of it, is dropped first: the DROP goes before anything
 * later, so that the call's uid, given back now, is not another's while it
 * still runs as that uid. */
static void fail_queued(struct queued *q, int err)
{
    uint32_t type = q->type, id = q->id, gen = q->gen;
    struct td_spawn_req h;
    memcpy(&h, q->msg, sizeof(h));
    if (type == TD_SPAWN_REQ_START && h.spare_id != TD_SPAWN_NO_SPARE) {
        uint8_t *msg = malloc(sizeof(h));
        struct queued *d = calloc(1, sizeof(*d));
        if (msg && d) {
            memcpy(msg,
                   &(struct td_spawn_req){.type = TD_SPAWN_REQ_DROP,
                                          .id = h.spare_id,
                                          .gen = h.spare_gen,
                                          .spare_id = TD_SPAWN_NO_SPARE},
                   sizeof(h));
            *d = (struct queued){.type = TD_SPAWN_REQ_DROP,
                                 .id = h.spare_id,
                                 .gen = h.spare_gen,
                                 .orphan = true,
                                 .msg = msg,
                                 .len = sizeof(h)};
            STAILQ_INSERT_HEAD(&queue, d, link);
        } else {
            free(msg);
            free(d);
        }
    }
    drop_queued(q);
    td_log(TD_LOG_ERR, "spawner: send: %s: the request fails", strerror(err));
    if (type == TD_SPAWN_REQ_DROP || !slot_is(id, gen))
        return;
    const struct td_spawner_ops *ops = slots[id].ops;
    const struct td_spare_ops *sops = slots[id].spare;
    void *data = slots[id].data;
    free_slot(id);
    if (sops)
        sops->prepared(data, err, "spawn request");
    else
        ops->started(data, 0, -1, (int[TD_HAND_COUNT]){-1, -1}, err, "spawn request");
}

/* Send what the queue holds, in order, until the socket is full. A send
 * that can never succeed (EMSGSIZE, ENOBUFS, ETOOMANYREFS...) fails its
 * request and the rest go on; from the loop only (on_io): the callers of
 * td_spawner_call() and _prepare() are not ready for a callback, and the
 * socket, writable, brings on_io at once. */
static void flush(bool from_loop)
{
    while (sock >= 0 && !STAILQ_EMPTY(&queue)) {
        struct queued *q = STAILQ_FIRST(&queue);
        if (stale_drop(q)) {
            STAILQ_REMOVE_HEAD(&queue, link);
            drop_queued(q);
            continue;
        }
        struct iovec iov = {.iov_base = q->msg, .iov_len = q->len};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        te_fds_space u;
        te_fds_put(&m, &u, q->fds, q->nfds);
        if (sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
            int err = errno;
            if (err == EINTR)
                continue;
            if (err == EAGAIN || err == EPIPE || err == ECONNRESET || err == ENOTCONN)
                return; /* full, or the spawner is gone: its restart resends */
            if (!from_loop)
                return;
            STAILQ_REMOVE_HEAD(&queue, link);
            fail_queued(q, err);
            continue;
        }
        STAILQ_REMOVE_HEAD(&queue, link);
        /* sent for its own slot only: a DROP is not its spare's request,
         * and a slot ended and reused since is another's */
        if (q->type != TD_SPAWN_REQ_DROP && slot_is(q->id, q->gen))
            slots[q->id].sent = true;
        drop_queued(q);
    }
}

static void on_reply(const struct td_spawn_reply *r, const struct td_spawn_got *g, int *fds,
                     size_t nfds)
{
    size_t used = 0;
    if (slot_is(r->id, r->gen) && slots[r->id].spare) {
        struct slot *s = &slots[r->id];
        const struct td_spare_ops *ops = s->spare;
        void *data = s->data;
        if (r->type == TD_SPAWN_PREPARED && r->err) {
            free_slot(r->id);
            ops->prepared(data, r->err, g->what);
        } else if (r->type == TD_SPAWN_PREPARED) {
            s->started = true;
            ops->prepared(data, 0, NULL);
        } else if (r->type == TD_SPAWN_SPARE_GONE) {
            free_slot(r->id);
            ops->gone(data);
        }
    } else if (slot_is(r->id, r->gen)) {
        struct slot *s = &slots[r->id];
        if (r->type == TD_SPAWN_STARTED && !s->started) {
            int handed[TD_HAND_COUNT], pidfd = g->pidfd >= 0 ? fds[g->pidfd] : -1;
            for (int k = 0; k < TD_HAND_COUNT; k++)
                handed[k] = g->handed[k] >= 0 ? fds[g->handed[k]] : -1;
            used = g->used;
            if (r->err || pidfd < 0) {
                free_slot(r->id);
                s->ops->started(s->data, 0, -1, handed, r->err ? r->err : EBADMSG,
                                g->what[0] ? g->what : "spawner");
            } else {
                s->started = true;
                s->ops->started(s->data, r->pid, pidfd, handed, 0, NULL);
            }
        } else if (r->type == TD_SPAWN_EXITED && s->started) {
            const struct td_spawner_ops *ops = s->ops;
            void *data = s->data;
            free_slot(r->id);
            ops->exited(data, r->status, &g->ru, NULL);
        }
    }
    for (size_t i = used; i < nfds; i++)
        close(fds[i]);
}

/* Every reply queued on the socket, handed on. */
static void drain(void)
{
    while (sock >= 0) {
        struct td_spawn_reply r;
        struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        te_fds_space u;
        te_fds_room(&m, &u, MAX_REPLY_FDS);
        ssize_t n = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 && io) { /* the spawner is gone: its reaping decides */
                uv_poll_stop(io);
                io_events = -1;
            }
            return;
        }
        int fds[MAX_REPLY_FDS];
        size_t nfds = te_fds_take(&m, fds, MAX_REPLY_FDS);
        struct td_spawn_reply r2;
        struct td_spawn_got g;
        if (!td_spawnmsg_reply(&r, (size_t)n, nfds, &r2, &g)) {
            for (size_t i = 0; i < nfds; i++)
                close(fds[i]);
            continue;
        }
        on_reply(&r2, &g, fds, nfds);
    }
}

static void on_io(uv_poll_t *h, int status, int events)
{
    (void)h;
    if (status < 0) /* libuv stopped the handle before telling */
        io_events = -1;
    if (status < 0 || (events & UV_READABLE))
        drain();
    if (events & UV_WRITABLE)
        flush(true);
    watch_io();
}

static void on_io_closed(uv_handle_t *h)
{
    free(h);
}

/* The spawner exited: what it still said is read, its calls end, and, but
 * at shutdown, the next one starts. */
static void on_spawner_exit(void *data, int status, const struct rusage *ru)
{
    (void)ru;
    if ((pid_t)(intptr_t)data != spid)
        return;
    drain();
    if (io)
        uv_close((uv_handle_t *)io, on_io_closed);
    io = NULL;
    io_events = -1;
    close(sock);
    sock = -1;
    spid = 0;
    /* Left on its own, not killed: it could not run (an upgrade changed
     * the libraries its exec loads, say), nor would the next. No loop of
     * restarts: the loop starts calls from here on, and those queued fail. */
    bool unable = !stopping && WIFEXITED(status);
    if (unable) {
        active = false;
        td_log(TD_LOG_ERR, "the spawner could not run (status %d): calls are started by the loop",
               WEXITSTATUS(status));
    } else if (!stopping) {
        td_log(TD_LOG_ERR, "the spawner exited (%s %d) with %u calls: they end; starting another",
               WIFSIGNALED(status) ? "signal" : "status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
               td_spawner_in_flight());
    }
    for (uint32_t id = 0; id < nslots; id++) {
        struct slot *s = &slots[id];
        if (!s->busy || (!s->sent && !unable))
            continue; /* free, or still queued: sent to the next spawner */
        const struct td_spawner_ops *ops = s->ops;
        const struct td_spare_ops *sops = s->spare;
        void *data2 = s->data;
        bool started = s->started;
        free_slot(id);
        if (sops && started)
            sops->gone(data2);
        else if (sops)
            sops->prepared(data2, ECHILD, "spawner");
        else if (started)
            ops->exited(data2, SIGKILL, NULL, "the spawner died, and the call with it");
        else
            ops->started(data2, 0, -1, (int[TD_HAND_COUNT]){-1, -1}, ECHILD, "spawner");
    }
    /* the DROPs of spares that died with it: nothing to drop in the next;
     * all of it when no spawner comes next */
    struct queued *q, *next;
    for (q = STAILQ_FIRST(&queue); q; q = next) {
        next = STAILQ_NEXT(q, link);
        if (unable || stale_drop(q) || q->orphan) {
            STAILQ_REMOVE(&queue, q, queued, link);
            drop_queued(q);
        }
    }
    if (stopping || unable)
        return;
    restarts++;
    fork_spawner();
}

/* The socket takes the largest request as one datagram: a Unix datagram
 * larger than the send buffer (less a little) fails with EMSGSIZE, and the
 * buffer is net.core.wmem_default's, which a host may keep small. Past
 * wmem_max with SO_SNDBUFFORCE where we may (root), else up to it.
 * TOOLEXECD_TEST_SPAWNER_SNDBUF (tests only): a buffer of that size
 * instead, for a request that cannot be sent. */
static void size_sndbuf(int fd)
{
    int want = (int)(sizeof(struct td_spawn_req) + TD_SPAWNMSG_MAX + 4096), have = 0;
    socklen_t len = sizeof(have);
    const char *test = getenv("TOOLEXECD_TEST_SPAWNER_SNDBUF");
    if (test && *test) {
        int n = atoi(test);
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof(n));
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &have, &len) == 0 && have >= want)
        return;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
    len = sizeof(have);
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &have, &len) == 0 && have < want)
        td_log(TD_LOG_WARN,
               "spawner: its socket's send buffer is %d bytes, less than the largest "
               "request (%d; net.core.wmem_max): larger ones fail",
               have, want);
}

/* The spawner is our own binary exec'd in its mode (spawnproc.h), not a
 * fork: a fork copies the daemon's memory, which by then holds every tool
 * definition with its credential header values and, once a tool has some,
 * the egress proxy's CA key (a restart comes after both), into the spawner,
 * each spare (its copy) and each cold call until its exec. Exec'd, it holds
 * none; what it needs comes over its socket. /proc/self/exe: this very
 * binary, even once an upgrade replaced it on disk, so both ends speak the
 * same wire. posix_spawn() suspends us until that exec instead of copying
 * our page tables; its child runs none of our signal handlers. No
 * environment: a call's comes in its description. */
static pid_t exec_spawner(int theirs)
{
    char daemon[24];
    snprintf(daemon, sizeof(daemon), "%d", (int)getpid());
    char *argv[] = {"toolexecd-spawn", TD_SPAWNPROC_ARG, daemon, NULL}, *envp[] = {NULL};
    posix_spawn_file_actions_t fa;
    pid_t pid = 0;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) {
        /* onto fd 3; were it 3 already, glibc clears its close-on-exec */
        rc = posix_spawn_file_actions_adddup2(&fa, theirs, TD_SPAWNPROC_FD);
        if (rc == 0)
            rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
    }
    if (rc)
        td_log(TD_LOG_ERR, "spawner: exec: %s", strerror(rc));
    return rc ? -1 : pid;
}

static void fork_spawner(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        td_log(TD_LOG_ERR, "spawner: socketpair: %s", strerror(errno));
        return;
    }
    pid_t pid = exec_spawner(sv[1]);
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return;
    }
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    size_sndbuf(sv[0]);
    sock = sv[0];
    spid = pid;
    io = malloc(sizeof(*io));
    if (!io || uv_poll_init(td_loop, io, sock) < 0) {
        free(io);
        io = NULL;
        td_log(TD_LOG_ERR, "spawner: cannot watch its socket");
    } else if (uv_poll_start(io, UV_READABLE, on_io) == 0) {
        io_events = UV_READABLE;
    }
    td_reaper_watch(pid, NULL, on_spawner_exit, (void *)(intptr_t)pid);
    flush(false);
    watch_io();
}

int td_spawner_start(void)
{
    fork_spawner();
    active = spid > 0;
    if (active)
        td_log(TD_LOG_INFO, "calls started by the spawner, pid %d, off the loop", (int)spid);
    return active ? 0 : -ECHILD;
}

void td_spawner_stop(void)
{
    stopping = true;
    while (!STAILQ_EMPTY(&queue)) {
        struct queued *q = STAILQ_FIRST(&queue);
        STAILQ_REMOVE_HEAD(&queue, link);
        drop_queued(q);
    }
    if (io)
        uv_close((uv_handle_t *)io, on_io_closed);
    io = NULL;
    io_events = -1;
    if (sock >= 0)
        close(sock); /* the spawner leaves on this end's close */
    sock = -1;
    free(slots);
    free(free_ids);
    slots = NULL;
    free_ids = NULL;
    nslots = nfree = 0;
    in_flight = spares_held = 0;
    active = false;
}

bool td_spawner_active(void)
{
    return active;
}

pid_t td_spawner_pid(void)
{
    return spid;
}

unsigned td_spawner_restarts(void)
{
    return restarts;
}

unsigned td_spawner_in_flight(void)
{
    return in_flight - spares_held;
}

static int take_slot(uint32_t *id)
{
    if (!nfree) {
        uint32_t n = nslots ? nslots * 2 : 64;
        struct slot *s = realloc(slots, n * sizeof(*s));
        if (!s)
            return -ENOMEM;
        slots = s;
        uint32_t *f = realloc(free_ids, n * sizeof(*f));
        if (!f)
            return -ENOMEM;
        free_ids = f;
        for (uint32_t i = n; i > nslots; i--) {
            slots[i - 1] = (struct slot){0};
            free_ids[nfree++] = i - 1;
        }
        nslots = n;
    }
    *id = free_ids[--nfree];
    in_flight++;
    return 0;
}

static int request(uint32_t type, uint32_t flags, const struct td_spawn *s, int *theirs,
                   uint32_t id, uint64_t spare, const char **what)
{
    struct queued *q = calloc(1, sizeof(*q));
    uint8_t *body = NULL;
    size_t blen = 0;
    struct td_spawn_req req = {.type = type,
                               .id = id,
                               .gen = slots[id].gen,
                               .flags = flags,
                               .spare_id = spare ? (uint32_t)(spare - 1) : TD_SPAWN_NO_SPARE,
                               .spare_gen = (uint32_t)(spare >> 32)};
    int rc = q ? 0 : -ENOMEM;
    *what = "spawn request";
    if (q && theirs)
        for (int i = 0; i < TD_SANDBOX_ENDS; i++)
            q->fds[q->nfds++] = theirs[i];
    /* the cgroup's descriptors are its worker's: copies travel */
    int cg[2] = {s ? s->cgroup_dir : -1, s ? s->cgroup_procs : -1};
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (cg[i] < 0)
            continue;
        int fd = fcntl(cg[i], F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            rc = -errno;
        else
            q->fds[q->nfds++] = fd;
        req.flags |= i ? TD_SPAWN_CGROUP_PROCS : TD_SPAWN_CGROUP_DIR;
    }
    if (rc == 0 && s)
        rc = td_spawnmsg_pack(s, &body, &blen);
    if (rc == 0 && !(q->msg = malloc(sizeof(req) + blen)))
        rc = -ENOMEM;
    if (rc < 0) {
        free(body);
        if (q)
            drop_queued(q);
        else if (theirs)
            for (int i = 0; i < TD_SANDBOX_ENDS; i++)
                close(theirs[i]);
        return rc;
    }
    memcpy(q->msg, &req, sizeof(req));
    if (blen)
        memcpy(q->msg + sizeof(req), body, blen);
    free(body);
    q->len = sizeof(req) + blen;
    q->type = type;
    q->id = id;
    q->gen = req.gen;
    STAILQ_INSERT_TAIL(&queue, q, link);
    flush(false);
    watch_io();
    return 0;
}

int td_spawner_call(const struct td_spawn *s, int theirs[TD_SANDBOX_ENDS],
                    const struct td_spawner_ops *ops, void *data, uint64_t spare, const char **what)
{
    uint32_t id;
    int rc = take_slot(&id);
    if (rc < 0) {
        for (int i = 0; i < TD_SANDBOX_ENDS; i++)
            close(theirs[i]);
        *what = "spawn request";
        return rc;
    }
    slots[id] = (struct slot){.ops = ops, .data = data, .gen = slots[id].gen, .busy = true};
    rc = request(TD_SPAWN_REQ_START, 0, s, theirs, id, spare, what);
    if (rc < 0) { /* the spare, not asked for, is still its owner's to drop */
        free_slot(id);
        return rc;
    }
    /* a spare's slot is the call's from here: nothing more is said of it */
    uint32_t sid = spare ? (uint32_t)(spare - 1) : 0;
    if (spare && sid < nslots && slots[sid].busy && slots[sid].spare &&
        slots[sid].gen == (uint32_t)(spare >> 32))
        free_slot(sid);
    return 0;
}

uint64_t td_spawner_prepare(const struct td_spawn *s, bool init_waits,
                            const struct td_spare_ops *ops, void *data, const char **what)
{
    uint32_t id;
    *what = "spare";
    if (!active || take_slot(&id) < 0)
        return TD_NO_SPARE;
    slots[id] = (struct slot){.spare = ops, .data = data, .gen = slots[id].gen, .busy = true};
    spares_held++;
    if (request(TD_SPAWN_REQ_PREPARE, init_waits ? TD_SPAWN_INIT_WAITS : 0, s, NULL, id,
                TD_NO_SPARE, what) < 0) {
        free_slot(id);
        return TD_NO_SPARE;
    }
    return ((uint64_t)slots[id].gen << 32) | (id + 1);
}

void td_spawner_drop(uint64_t spare)
{
    uint32_t id = (uint32_t)(spare & 0xffffffffu) - 1, gen = (uint32_t)(spare >> 32);
    const char *what;
    if (spare && id < nslots && slots[id].busy && slots[id].spare && slots[id].gen == gen) {
        request(TD_SPAWN_REQ_DROP, 0, NULL, NULL, id, TD_NO_SPARE, &what);
    }
}
