/*
 * warmid.h - a uid of its own for each warm call: a root
 * daemon writes the id maps of each call's PID 1 (lib/warmp1.c, made by
 * the tool's template in a user namespace of its own), mapping a uid taken
 * from the --call-uids pool beside the template's, and gives the uid back
 * once that PID 1, and so every process of its call, is gone.
 */
#ifndef TD_WARMID_H
#define TD_WARMID_H

#include <stdbool.h>
#include <sys/types.h>

/* The template (tpid, the daemon's view; running as tuid, tgid) asked for
 * the maps of the process behind pidfd (taken), which must be its child in
 * a user namespace it made; the call's uid and gid (the uid's number, or
 * tgid where own_gid is false: a tool that names its group) are written as
 * two unsigned ints on answer (taken; closed either way: P1 reads EOF on a
 * refusal and fails its call). 0 (the uid lent in *lent); -EPERM when the process is not such a
 * child (the template is lying); another -errno when no uid could be given. */
int td_warmid_map(int pidfd, int answer, pid_t tpid, uid_t tuid, gid_t tgid, bool own_gid,
                  uid_t *lent);
/* At shutdown: stop watching (the pool goes with the daemon). */
void td_warmid_close(void);

#endif
