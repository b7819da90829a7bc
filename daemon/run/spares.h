/*
 * spares.h - sandboxes prepared ahead for cold calls: for a tool
 * called lately, a few processes that have done every step of a call's
 * set-up that does not depend on the call (namespaces, id maps, mounts and
 * view, /proc, limits, user, and where the filter allows, the seccomp
 * filter, Landlock and the exec of the call's init) wait in the spawner for
 * their call, which then only hands over its pipes and environment (and
 * the init forks the tool). Each spare is made
 * for one call: its own uid, directory and cgroup, handed to the call that
 * takes it, never to another.
 */
#ifndef TD_SPARES_H
#define TD_SPARES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "config.h"

struct td_tool;
struct td_cgroup;

/* What a call takes with a spare: all of it the call's from then on. */
struct td_spare_grant {
    uint64_t handle;  /* for td_spawner_call() */
    uid_t uid, taken; /* taken: from the --call-uids pool, else (uid_t)-1 */
    gid_t gid;
    char *dir;            /* the call's directory (malloc'd) */
    struct td_cgroup *cg; /* NULL: none */
    struct td_limits limits;
};

/* A ready spare of t for a call, if one is there: lent to the call until
 * td_spares_taken() (the spawner was asked to start the call with it: all
 * of it the call's) or td_spares_untake() (it was not: the spare is
 * dropped, and keeps what g names until the spawner says it is gone; the
 * call gives none of it back). One of the two follows every take. */
bool td_spares_take(struct td_tool *t, struct td_spare_grant *g);
void td_spares_taken(const struct td_spare_grant *g);
void td_spares_untake(const struct td_spare_grant *g);
/* After a call of t: spares of t made up to what is kept (--spares). */
void td_spares_refill(struct td_tool *t);
/* Every spare dropped (a reload: definitions may have changed). */
void td_spares_drop_all(void);
/* At shutdown, before the spawner stops: forgotten (they die with it). */
void td_spares_stop(void);
/* Spares kept per tool (0: none; set from --spares before the first call). */
extern unsigned td_spares_per_tool;
/* For stats: {"tool": n ready} and the total held. */
unsigned td_spares_count(void);
json_t *td_spares_stats(void);

#endif
