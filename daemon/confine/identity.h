/*
 * identity.h - a uid and gid of its own for each call of a root daemon.
 */
#ifndef TD_IDENTITY_H
#define TD_IDENTITY_H

#include <stdbool.h>
#include <sys/types.h>

/* The default range: above systemd-nspawn's container ranges (524288 to
 * 1879048191) and the subordinate ids of /etc/subuid (from 100000), below
 * systemd's foreign range (2147352576) and 2^31. */
#define TD_CALL_UIDS_DEFAULT "1879048192-1879113727"

/* --call-uids FIRST-LAST or "no": 0, or -1 with err set. */
int td_identity_parse(const char *spec, char *err, size_t errlen);
/* At start (root only): take the range, refusing one that holds a user or
 * group of the system. 0, or -1 logged. */
int td_identity_setup(void);
bool td_identity_active(void);
/* uid is in the range (held by a call now or not). */
bool td_identity_in_range(uid_t uid);
/* A uid (the gid is the same number) no running call holds; -EAGAIN when
 * every one is held. */
int td_identity_take(uid_t *uid);
/* Back to the pool: only once no process of the call can remain. */
void td_identity_give(uid_t uid);
void td_identity_close(void);

#endif
