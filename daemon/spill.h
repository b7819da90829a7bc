/*
 * spill.h - the full content of cut results, in WORK/results.
 */
#ifndef TD_SPILL_H
#define TD_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write a new file NAME there for uid (threadpool-safe); 0 or -errno. */
int td_spill_write(const char *name, const char *text, size_t len, uid_t uid);
/* Remove PATH --spill-max-age seconds from now. */
void td_spill_track(const char *path);
/* Write text (len bytes, taken) to a new spill file of batch_id's for uid,
 * in the threadpool; then done(data, path), path NULL when it could not be
 * written. -1 when nothing was queued: done will not run. */
int td_spill_start(const char *batch_id, const char *call_id, char *text, size_t len, uid_t uid,
                   void (*done)(void *data, const char *path), void *data);
void td_spill_stop(void);

#endif
