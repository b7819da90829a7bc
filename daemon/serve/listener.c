/*
 * listener.c - the listening sockets: the main socket (requests) and the
 * optional events socket (connecting subscribes to every event). Either we
 * bind them ourselves, replacing a stale socket file and refusing a live
 * one, or systemd hands them over (socket activation, LISTEN_FDS): then the
 * files are systemd's and we never remove them.
 *
 * Accepting is driven by our own poll on each socket, so that running out
 * of descriptors pauses accepting for a moment (the clients wait in the
 * backlog) instead of spinning on a socket that stays readable.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef TD_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "cleanup.h"
#include "config.h"
#include "listener.h"
#include "log.h"
#include "server.h"

/* Pending connections the kernel queues for us. */
#define LISTEN_BACKLOG 128
/* Out of descriptors, accepting pauses this long before it is retried. */
#define ACCEPT_RETRY_MS 100

struct listener {
    int fd;
    bool events; /* the events socket */
    bool ours;   /* we created the file: we remove it */
    bool active;
    const char *path;
    uv_poll_t poll;
    uv_timer_t retry;
};

static struct listener listeners[2];
static int nlisteners;

/* Refuse to replace a socket someone is listening on; remove a stale one. */
static int check_existing(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) {
        td_log(TD_LOG_ERR, "%s exists and is not a socket", path);
        return -EEXIST;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    close(fd);
    if (rc == 0) {
        td_log(TD_LOG_ERR, "another toolexecd is listening on %s", path);
        return -EADDRINUSE;
    }
    if (e != ECONNREFUSED) {
        td_log(TD_LOG_ERR, "%s: %s", path, strerror(e));
        return -e;
    }
    td_log(TD_LOG_INFO, "removing stale socket %s", path);
    return unlink(path) < 0 ? -errno : 0;
}

static void on_ready(uv_poll_t *p, int status, int events);

static void resume_accepting(uv_timer_t *t)
{
    struct listener *l = t->data;
    if (l->active)
        uv_poll_start(&l->poll, UV_READABLE, on_ready);
}

static void on_ready(uv_poll_t *p, int status, int events)
{
    struct listener *l = p->data;
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            td_conn_accept(fd, l->events);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN)
            return;
        td_log(TD_LOG_WARN, "accept: %s; not accepting for %d ms", strerror(errno),
               ACCEPT_RETRY_MS);
        uv_poll_stop(&l->poll);
        uv_timer_start(&l->retry, resume_accepting, ACCEPT_RETRY_MS, 0);
        return;
    }
}

/* A name beside path to bind first: path.tmpPID, or DIR/.tdPID where that
 * is too long; NULL when neither fits in a socket address. A live process
 * owns its pid, so a file of that name is a dead one's leftover. */
static const char *temp_name(const char *path, char *buf, size_t len)
{
    if ((size_t)snprintf(buf, len, "%s.tmp%d", path, (int)getpid()) < len)
        return buf;
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path) : 1;
    if ((size_t)snprintf(buf, len, "%.*s/.td%d", dir, slash ? path : ".", (int)getpid()) < len)
        return buf;
    return NULL;
}

/* Bind and listen on path with the configured mode and group. The socket
 * is bound to a temporary name and renamed to path once it listens, mode
 * and group set: a client that waits for path to appear and connects at
 * once is never refused (a socket that exists but does not listen yet
 * refuses). */
static int bind_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        td_log(TD_LOG_ERR, "socket path too long (%zu bytes, at most %zu): %s", strlen(path),
               sizeof(sa.sun_path) - 1, path);
        return -ENAMETOOLONG;
    }
    int rc = check_existing(path);
    if (rc < 0)
        return rc;
    char tmpbuf[sizeof(sa.sun_path)];
    const char *tmp = temp_name(path, tmpbuf, sizeof(tmpbuf));
    if (!tmp)
        td_log(TD_LOG_INFO, "%s: no room for a temporary name beside it; binding it directly",
               path);
    const char *name = tmp ? tmp : path;
    strcpy(sa.sun_path, name);
    te_autofd int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const char *step = "socket";
    if (fd < 0)
        goto fail;
    step = "bind";
    if (tmp && unlink(tmp) < 0 && errno != ENOENT)
        goto fail;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        goto fail;
    step = "chmod";
    if (chmod(name, td_cfg.socket_mode) < 0)
        goto bound;
    if (td_cfg.socket_group) {
        struct group *gr = getgrnam(td_cfg.socket_group);
        step = "--socket-group";
        if (!gr)
            errno = ENOENT;
        if (!gr || chown(name, (uid_t)-1, gr->gr_gid) < 0)
            goto bound;
    }
    step = "listen";
    if (listen(fd, LISTEN_BACKLOG) < 0)
        goto bound;
    /* no replacing: a socket that took path since check_existing is another
     * daemon's, as bind's EADDRINUSE said before */
    step = "rename";
    if (tmp && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) < 0 &&
        (errno != EINVAL || rename(tmp, path) < 0))
        goto bound;
    return te_steal_fd(&fd);
bound:
    rc = -errno;
    unlink(name);
    errno = -rc;
fail:
    rc = -errno;
    td_log(TD_LOG_ERR, "cannot listen on %s: %s: %s", path, step, strerror(errno));
    return rc;
}

static void add(int fd, bool events, bool ours, const char *path)
{
    struct listener *l = &listeners[nlisteners++];
    *l = (struct listener){.fd = fd, .events = events, .ours = ours, .active = true, .path = path};
    uv_poll_init(td_loop, &l->poll, fd);
    uv_timer_init(td_loop, &l->retry);
    l->poll.data = l->retry.data = l;
    uv_poll_start(&l->poll, UV_READABLE, on_ready);
}

/* Sockets systemd passed us: the one named "events" is the events socket,
 * any other the main socket. Returns how many were taken. */
static int inherited(void)
{
#ifdef TD_HAVE_SYSTEMD
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names);
    if (n <= 0)
        return 0;
    int taken = 0;
    for (int i = 0; i < n; i++) {
        int fd = SD_LISTEN_FDS_START + i;
        /* named "events" by its socket unit, or bound to --events-socket */
        bool events = (names && names[i] && strcmp(names[i], "events") == 0) ||
                      (td_cfg.events_socket_path &&
                       sd_is_socket_unix(fd, SOCK_STREAM, 1, td_cfg.events_socket_path, 0) > 0);
        if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0 || taken == 2 ||
            (nlisteners && listeners[0].events == events)) {
            td_log(TD_LOG_WARN, "ignoring inherited descriptor %d (%s)", fd,
                   names && names[i] ? names[i] : "?");
            close(fd);
            continue;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        add(fd, events, false, events ? "(systemd events socket)" : "(systemd socket)");
        td_log(TD_LOG_INFO, "using the %s socket passed by systemd (fd %d)",
               events ? "events" : "main", fd);
        taken++;
    }
    for (int i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
    return taken;
#else
    if (getenv("LISTEN_FDS"))
        td_log(TD_LOG_WARN, "LISTEN_FDS is set but this toolexecd was built without libsystemd; "
                            "binding the sockets itself");
    return 0;
#endif
}

int td_listeners_start(void)
{
    int taken = inherited();
    bool have_main = false, have_events = false;
    for (int i = 0; i < nlisteners; i++)
        *(listeners[i].events ? &have_events : &have_main) = true;
    if (taken && !have_main) {
        td_log(TD_LOG_ERR, "systemd passed only an events socket; no main socket");
        return -EINVAL;
    }
    /* The events socket first: a client that can reach the main socket
     * must find the events socket there too. */
    if (!have_events && td_cfg.events_socket_path) {
        int fd = bind_socket(td_cfg.events_socket_path);
        if (fd < 0)
            return fd;
        add(fd, true, true, td_cfg.events_socket_path);
    }
    if (!have_main) {
        int fd = bind_socket(td_cfg.socket_path);
        if (fd < 0)
            return fd;
        add(fd, false, true, td_cfg.socket_path);
    }
    return 0;
}

const char *td_listeners_describe(char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < nlisteners && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s%s", i ? " and " : "", listeners[i].path,
                                listeners[i].events ? " (events)" : "");
    return buf;
}

static void close_fd(uv_handle_t *h)
{
    struct listener *l = h->data;
    close(l->fd);
    l->fd = -1;
}

void td_listeners_stop(void)
{
    for (int i = 0; i < nlisteners; i++) {
        struct listener *l = &listeners[i];
        if (!l->active)
            continue;
        l->active = false;
        uv_close((uv_handle_t *)&l->retry, NULL);
        uv_close((uv_handle_t *)&l->poll, close_fd);
        if (l->ours && unlink(l->path) < 0 && errno != ENOENT)
            td_log(TD_LOG_WARN, "cannot remove %s: %s", l->path, strerror(errno));
    }
}
