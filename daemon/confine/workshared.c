/*
 * workshared.c - a shared work directory.
 *
 * Kubernetes' emptyDir with medium: Memory and Docker's or Nomad's tmpfs
 * mount are 1777, as /tmp is: another user may add entries but, the
 * sticky bit set, not remove or rename anyone else's. So the daemon does
 * not refuse one: it makes toolexecd-UID in it, its own, 0711, and uses
 * that; a name taken by someone else first (a directory of theirs, a
 * link) is refused by the usual check, never followed. A directory
 * others may write to without the sticky bit stays refused: one's entries
 * could be renamed away and replaced.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "workshared.h"

bool td_workshared_is(const struct stat *st)
{
    return S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && (st->st_mode & 022) &&
           (st->st_uid == 0 || st->st_uid == geteuid());
}

int td_workshared_open(int fd, const char *path, char **sub)
{
    char name[32];
    snprintf(name, sizeof(name), "toolexecd-%u", (unsigned)geteuid());
    if (asprintf(sub, "%s/%s", path, name) < 0) {
        *sub = NULL;
        return -1;
    }
    if (mkdirat(fd, name, 0711) < 0 && errno != EEXIST) {
        td_log(TD_LOG_ERR, "--work-dir %s: %s", *sub, strerror(errno));
        return -1;
    }
    int own = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (own < 0) {
        /* O_NOFOLLOW with O_DIRECTORY: a link is ENOTDIR (or ELOOP) */
        if (errno == ENOTDIR || errno == ELOOP)
            td_log(TD_LOG_ERR,
                   "--work-dir %s: a link or not a directory, not the daemon's own: "
                   "refused",
                   *sub);
        else
            td_log(TD_LOG_ERR, "--work-dir %s: %s", *sub, strerror(errno));
        return -1;
    }
    td_log(TD_LOG_INFO,
           "--work-dir %s is shared (sticky, writable by others): working in %s, the daemon's own",
           path, *sub);
    return own;
}
