/*
 * pidinfo.h - what the kernel says of a pidfd's process (its pid, its
 * parent's) by one ioctl, PIDFD_GET_INFO (Linux 6.13), where it used to
 * take reads of /proc; /proc still where the kernel lacks it.
 *
 * The ioctl's struct and number are the kernel's uapi, include/uapi/linux/
 * pidfd.h (struct pidfd_info, PIDFD_INFO_*, PIDFD_GET_INFO), which the
 * build host's headers (Debian 12: 6.1) may not have: declared here under
 * our own names, the first version's layout only (PIDFD_INFO_SIZE_VER0,
 * 64 bytes; a newer kernel copies out no more than the size we give).
 */
#ifndef TD_PIDINFO_H
#define TD_PIDINFO_H

#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>

struct td_pidfd_info {
    uint64_t mask; /* in: what is asked; out: what was filled */
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid; /* in the caller's PID namespace */
    uint32_t ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    uint32_t spare0[1];
};
#define TD_PIDFD_INFO_PID (1ULL << 0) /* pid, tgid, ppid: always filled */
#define TD_PIDFD_GET_INFO _IOWR(0xFF, 11, struct td_pidfd_info)

/* pidfd's process's pid and (ppid not NULL) its parent's, in our PID
 * namespace: 0, or -errno (-ESRCH: it has been reaped). */
int td_pidfd_ids(int pidfd, pid_t *pid, pid_t *ppid);

/* The same from the ioctl's outcome, given: rc and err (its errno) as it
 * returned, info as it filled it. ENOTTY or EINVAL (a kernel without it)
 * falls back to /proc: pidfd's fdinfo, then /proc/PID/stat for ppid. Apart
 * so that both ways are tested on any kernel (test_pidinfo). */
int td_pidfd_ids_from(int pidfd, int rc, int err, const struct td_pidfd_info *info, pid_t *pid,
                      pid_t *ppid);

#endif
