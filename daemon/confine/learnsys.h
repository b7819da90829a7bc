/*
 * learnsys.h - learn mode's side in the kernel's and the daemon's terms:
 * a call's seccomp notification recorded (the paths its system calls name,
 * the denied calls it made), and the proposal against the daemon's own
 * default view and filter (learn.h holds the record and the builder).
 */
#ifndef TD_LEARNSYS_H
#define TD_LEARNSYS_H

#include <stdbool.h>

#include <jansson.h>

struct td_learn;
struct seccomp_notif;

/* Record req (a notification of the learn filter, sysfilter.h) in l: the
 * paths its call names, read from the process's memory and resolved
 * against its directory or descriptor, or the denied call's name. The
 * caller then lets the call go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
 * listener: to check the notification still waits (its pid its own). */
void td_learn_notified(struct td_learn *l, int listener, const struct seccomp_notif *req);
/* The proposal for a tool (learn.h's td_learn_build) against the daemon's
 * default view (minimal: "root": "minimal") and filter; NULL: no memory. */
json_t *td_learn_propose(const struct td_learn *l, bool minimal);

#endif
