/*
 * sandboxrun_check.c - before the command runs, what its user must be able
 * to do (sandboxrun_check.h): write its --write directories; and, once the
 * call stopped at its chdir, enter the directory it starts in (asked only
 * then: a process a run). Otherwise a root caller, whose command runs as
 * toolexec or nobody, sees only the command's own bare "Permission denied"
 * (or the sandbox's "chdir: Permission denied").
 *
 * Each is asked about from a child that has become the user, as the
 * command will see it: the whole path, but where the view hides a tree
 * (/root, /home) and shows something below it, the way down is a veil's
 * (mode 0711) and only the directory's own mode counts: faccessat(fd, ".")
 * on it opened here. --learn sees the host's file system: the whole path.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsview.h"
#include "sandboxrun_check.h"

#define MAX_CHECKED 33 /* the view's exposed paths and the start directory */

struct checked {
    const char *path;
    int fd, mode;
};

/* Under a tree the view hides, the way down to what it shows is a veil's
 * (mode 0711): only the directory's own mode counts. */
static bool veiled(const char *path, bool host_view)
{
    size_t n;
    const char *const *hidden = td_fsview_default_hidden(&n);
    for (size_t i = 0; !host_view && i < n; i++) {
        size_t k = strlen(hidden[i]);
        if (strncmp(path, hidden[i], k) == 0 && path[k] == '/')
            return true;
    }
    return false;
}

static bool refused_here(const struct checked *c, bool host_view)
{
    int rc = veiled(c->path, host_view) ? faccessat(c->fd, ".", c->mode, 0)
                                        : faccessat(AT_FDCWD, c->path, c->mode, 0);
    return rc < 0 && errno == EACCES;
}

/* Is c refused to uid/gid? Asked here when the command runs as we do, else
 * from a child become the user: a vfork, so that no page of ours is
 * copied; it makes raw system calls only (no C library's set*id, which
 * would signal our threads) and exits. */
static bool refused(const struct checked *c, bool host_view, bool switch_user, uid_t uid, gid_t gid)
{
    if (!switch_user)
        return refused_here(c, host_view);
    pid_t pid = vfork();
    if (pid < 0)
        return false; /* no answer: the run says what fails */
    if (pid == 0) {
        if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, gid, gid, gid) < 0 ||
            syscall(SYS_setresuid, uid, uid, uid) < 0)
            _exit(0);
        _exit(refused_here(c, host_view) ? 1 : 0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == 1;
}

int td_sbx_check_access(json_t *fs, const char *run_dir, bool host_view, bool switch_user,
                        uid_t uid, gid_t gid)
{
    struct checked c[MAX_CHECKED];
    size_t n = 0, i;
    json_t *v;
    json_array_foreach(json_object_get(fs, "write"), i, v) if (n < MAX_CHECKED - 1) c[n++] =
        (struct checked){json_string_value(v), -1, W_OK | X_OK};
    if (run_dir)
        c[n++] = (struct checked){run_dir, -1, X_OK};
    for (i = 0; i < n; i++) /* a file to --write is its own matter: not a directory */
        c[i].fd = open(c[i].path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    char name[64] = "";
    for (i = 0; i < n; i++) {
        if (c[i].fd < 0 || !refused(&c[i], host_view, switch_user, uid, gid))
            continue;
        if (!*name) { /* the user's name only to say so: a passwd read less a run */
            struct passwd *pw = getpwuid(switch_user ? uid : getuid());
            snprintf(name, sizeof(name), "%s", pw ? pw->pw_name : "USER");
        }
        char who[96];
        snprintf(who, sizeof(who), "%s (uid %u)", name, (unsigned)(switch_user ? uid : getuid()));
        if (c[i].mode & W_OK)
            fprintf(stderr,
                    "toolexec sandbox: --write %s: not writable by %s, the user the command "
                    "runs as; make it theirs (chown %s '%s') or run the command as a user who "
                    "may write there (--user NAME)\n",
                    c[i].path, who, name, c[i].path);
        else
            fprintf(stderr,
                    "toolexec sandbox: the current directory %s cannot be entered by %s, the user "
                    "the command runs as; run it from a directory they may enter, or as one "
                    "who may (--user NAME)\n",
                    c[i].path, who);
        rc = -1;
    }
    for (i = 0; i < n; i++)
        if (c[i].fd >= 0)
            close(c[i].fd);
    return rc;
}
