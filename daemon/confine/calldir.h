/*
 * calldir.h - each call's private directory, WORK/<32 hex digits>: made with
 * an unguessable name, mode 0700, owned by the call's user; removed without
 * ever following a link a tool planted. The work directory itself is checked
 * (owner, mode), locked against a second daemon, and cleared of an earlier
 * daemon's leftovers at start.
 */
#ifndef TD_CALLDIR_H
#define TD_CALLDIR_H

#include <stdbool.h>
#include <sys/types.h>

/* Opens (making it when missing) the work directory: path, or NULL for the
 * default one (see toolexecd(8)); sets td_cfg.work_dir. Logs and returns -1
 * on an unsafe or busy directory. */
int td_calldir_setup(const char *path);
/* At exit: a default work directory is removed; the descriptors closed. */
void td_calldir_shutdown(void);

/* A fresh directory for one call, owned by uid:gid ((uid_t)-1: the
 * daemon's). *path is malloc'd; on failure -errno and *what names the step. */
int td_calldir_make(uid_t uid, gid_t gid, char **path, const char **what);
/* Whether the umask in a /proc/PID/status text leaves 0700 whole (so that
 * a call's directory is made with its mode); false where it says none. */
bool td_calldir_umask_ok(const char *status);
/* Removes it off the loop (threadpool); path is taken. */
void td_calldir_remove_async(char *path);
/* The same for a directory inside the directory dirfd (warm calls' are in
 * their template's, template.c): the last component of path, taken. */
void td_calldir_remove_in_async(int dirfd, char *path);

/* Removes the tree name under the directory dirfd: relative to directory
 * descriptors, never following a link, never crossing a mount point, with
 * no recursion. 0, or -errno when something was left. */
int td_remove_tree_at(int dirfd, const char *name);

#endif
