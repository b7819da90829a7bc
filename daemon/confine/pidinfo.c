/*
 * pidinfo.c - a pidfd's process's pid and parent (pidinfo.h): one ioctl
 * on a kernel that has PIDFD_GET_INFO, else what /proc says.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pidinfo.h"

_Static_assert(sizeof(struct td_pidfd_info) == 64, "PIDFD_INFO_SIZE_VER0");

/* A small procfs file whole into buf (a stack buffer: no stdio, no
 * malloc): its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return -1;
    ssize_t n = read(f, buf, size - 1);
    close(f);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

/* "Pid:" of the pidfd's fdinfo (its fourth line): -1 once reaped. */
static pid_t fdinfo_pid(int pidfd)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
    if (read_small(path, buf, sizeof(buf)) <= 0)
        return 0;
    const char *p = strstr(buf, "\nPid:\t");
    return p ? (pid_t)strtol(p + 6, NULL, 10) : 0;
}

/* /proc/PID/stat's fourth field (after the name's ')'), or -1 */
static pid_t stat_ppid(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (read_small(path, buf, sizeof(buf)) <= 0)
        return -1;
    char *p = strrchr(buf, ')');
    int ppid;
    return p && sscanf(p + 1, " %*c %d", &ppid) == 1 ? (pid_t)ppid : -1;
}

int td_pidfd_ids_from(int pidfd, int rc, int err, const struct td_pidfd_info *info, pid_t *pid,
                      pid_t *ppid)
{
    if (rc == 0) {
        if (!(info->mask & TD_PIDFD_INFO_PID) || !info->pid)
            return -ESRCH;
        *pid = (pid_t)info->pid;
        if (ppid)
            *ppid = (pid_t)info->ppid;
        return 0;
    }
    if (err != ENOTTY && err != EINVAL)
        return -err; /* ESRCH: reaped (or not in our PID namespace) */
    /* a kernel before 6.13: the fdinfo's pid, then (a read of its own,
     * so a caller that must know both are one process's checks the
     * pidfd alive after) its stat */
    pid_t p = fdinfo_pid(pidfd);
    if (p <= 0)
        return -ESRCH;
    *pid = p;
    if (ppid && (*ppid = stat_ppid(p)) < 0)
        return -ESRCH;
    return 0;
}

int td_pidfd_ids(int pidfd, pid_t *pid, pid_t *ppid)
{
    struct td_pidfd_info info = {.mask = TD_PIDFD_INFO_PID};
    int rc = ioctl(pidfd, TD_PIDFD_GET_INFO, &info);
    return td_pidfd_ids_from(pidfd, rc < 0 ? -1 : 0, rc < 0 ? errno : 0, &info, pid, ppid);
}
