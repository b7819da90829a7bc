/*
 * defsafe.c - who may change a definition.
 *
 * A definition is a command the daemon runs as another user: a file or a
 * directory of them that a third user can write is refused. A mode with
 * group or other write is forgiven on one condition: the file system it is
 * reached through is mounted read-only (statvfs ST_RDONLY), where nobody,
 * root included, writes through that mount. That is what Kubernetes gives:
 * a configMap volume's directory is 0777 (the kubelet makes it so) with
 * the files as symlinks into a root-owned ..data directory, mounted
 * readOnly into the container. The same files could still be written
 * through another, writable mount of the same directory: the kubelet's is
 * under /var/lib/kubelet (root only); an administrator who bind-mounts a
 * directory others can write read-only has made that choice (toolexecd(8)
 * says so). The owner is checked either way.
 */
#include <stdio.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "defsafe.h"

const char *td_defs_unsafe(const struct stat *st, int fd, char *why, size_t len)
{
    struct statvfs vfs;
    if (st->st_uid != 0 && st->st_uid != geteuid())
        snprintf(why, len, "owned by uid %u, not root or the daemon's uid %u", (unsigned)st->st_uid,
                 (unsigned)geteuid());
    else if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
        return NULL;
    else if (fd >= 0 && fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY))
        return NULL; /* nobody writes through a read-only mount */
    else
        snprintf(why, len, "writable by %s (mode %04o); chmod go-w",
                 st->st_mode & S_IWOTH ? "others" : "its group", (unsigned)(st->st_mode & 07777));
    return why;
}
