/*
 * warmid.c - a uid of its own for each warm call (warmid.h).
 *
 * Why the daemon: the template runs as one uid with no privilege, and P1's
 * user namespace can map another uid only by the hand of a process with
 * CAP_SETUID (CAP_SETGID) over the namespace's parent, the initial one:
 * root, here. The template keeps no privilege for it; it only sends P1's
 * pidfd, and P1 waits for the answer before its first step.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <unistd.h>

#include "config.h"
#include "identity.h"
#include "pidinfo.h"
#include "sandbox.h"
#include "util.h"
#include "warmid.h"

/* A uid lent to a P1: given back when its pidfd says it has exited (a PID
 * namespace's init exits after every other process of it). */
struct lent {
    LIST_ENTRY(lent) link;
    uv_poll_t poll;
    int pidfd;
    uid_t uid;
};
static LIST_HEAD(, lent) lents = LIST_HEAD_INITIALIZER(lents);

static void lent_closed(uv_handle_t *h)
{
    struct lent *l = h->data;
    close(l->pidfd);
    free(l);
}

static void lent_end(struct lent *l, bool give)
{
    if (give)
        td_identity_give(l->uid);
    LIST_REMOVE(l, link);
    uv_close((uv_handle_t *)&l->poll, lent_closed);
}

static void on_p1_exit(uv_poll_t *p, int status, int events)
{
    (void)status, (void)events;
    lent_end(p->data, true);
}

int td_warmid_map(int pidfd, int answer, pid_t tpid, uid_t tuid, gid_t tgid, bool own_gid,
                  uid_t *lent)
{
    int rc = -EPERM, dir = -1, ns = -1;
    struct lent *l = NULL;
    char path[64];
    pid_t pid = 0, ppid = 0;
    /* its pid and parent read first, the pidfd alive after: both were the
     * process's, and the directory opened while it lives is its own,
     * whatever the number is later */
    if (td_pidfd_ids(pidfd, &pid, &ppid) < 0 || ppid != tpid)
        goto out;
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    if ((dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 || !td_pidfd_alive(pidfd))
        goto out;
    uid_t owner;
    if ((ns = openat(dir, "ns/user", O_RDONLY | O_CLOEXEC)) < 0 ||
        ioctl(ns, NS_GET_OWNER_UID, &owner) < 0 || owner != tuid)
        goto out;
    uid_t uid;
    if ((rc = td_identity_take(&uid)) < 0)
        goto out;
    gid_t gid = own_gid ? (gid_t)uid : tgid;
    char umap[64], gmap[64];
    snprintf(umap, sizeof(umap), "%u %u 1\n%u %u 1\n", (unsigned)tuid, (unsigned)tuid,
             (unsigned)uid, (unsigned)uid);
    if (gid != tgid)
        snprintf(gmap, sizeof(gmap), "%u %u 1\n%u %u 1\n", (unsigned)tgid, (unsigned)tgid,
                 (unsigned)gid, (unsigned)gid);
    else
        snprintf(gmap, sizeof(gmap), "%u %u 1\n", (unsigned)tgid, (unsigned)tgid);
    /* (the uid_map of a namespace is written once: a second request for
     * the same P1 fails here) */
    if ((rc = td_write_at(dir, "setgroups", "deny")) < 0 ||
        (rc = td_write_at(dir, "uid_map", umap)) < 0 ||
        (rc = td_write_at(dir, "gid_map", gmap)) < 0 || !(l = calloc(1, sizeof(*l)))) {
        td_identity_give(uid);
        rc = rc < 0 ? rc : -ENOMEM;
        goto out;
    }
    l->pidfd = pidfd;
    l->uid = uid;
    l->poll.data = l;
    if (uv_poll_init(td_loop, &l->poll, pidfd) < 0) {
        /* not watched: the uid stays lent (never given to another call) */
        free(l);
    } else {
        LIST_INSERT_HEAD(&lents, l, link);
        uv_poll_start(&l->poll, UV_READABLE, on_p1_exit);
        pidfd = -1;
    }
    unsigned v[2] = {(unsigned)uid, (unsigned)gid};
    if (write(answer, v, sizeof(v)) != (ssize_t)sizeof(v))
        rc = -EPIPE; /* P1 is gone: its lent uid comes back with its exit */
    else
        rc = 0, *lent = uid;
out:
    if (dir >= 0)
        close(dir);
    if (ns >= 0)
        close(ns);
    if (pidfd >= 0)
        close(pidfd);
    close(answer);
    return rc;
}

void td_warmid_close(void)
{
    while (!LIST_EMPTY(&lents))
        lent_end(LIST_FIRST(&lents), false);
}
