/*
 * spill.h - the full content of cut results, in WORK/results.
 */
#ifndef TD_SPILL_H
#define TD_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

/* The spill files of one client (kept on its connection): removed when it
 * goes away, since they were written for it alone. */
struct td_spilled;
struct td_spill_owner {
    LIST_HEAD(, td_spilled) files;
};

/* Write a new file NAME there for uid (threadpool-safe); 0 or -errno. */
int td_spill_write(const char *name, const char *text, size_t len, uid_t uid);
/* Remove PATH --spill-max-age seconds from now, or when owner (if not NULL)
 * is released, whichever comes first. */
void td_spill_track(const char *path, struct td_spill_owner *owner);
/* Write text (len bytes, taken) to a new spill file of batch_id's for uid,
 * owned by owner, in the threadpool; then done(data, path), path NULL when
 * it could not be written. -1 when nothing was queued: done will not run. */
int td_spill_start(const char *batch_id, const char *call_id, char *text, size_t len, uid_t uid,
                   struct td_spill_owner *owner, void (*done)(void *data, const char *path),
                   void *data);
/* The client is gone: remove its spill files now (in the threadpool). */
void td_spill_release(struct td_spill_owner *owner);
/* At exit: forget every file (each owner's list left empty). */
void td_spill_stop(void);

#endif
