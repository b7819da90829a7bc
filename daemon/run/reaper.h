/*
 * reaper.h - SIGCHLD as a loop event; statuses handed to their owners.
 */
#ifndef TD_REAPER_H
#define TD_REAPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/resource.h>

/* reaper.c: SIGCHLD as a loop event; statuses handed to their owners.
 * reaped (may be NULL) runs the moment pid is reaped, before anything can
 * fork again (the last chance to kill(-pid) safely; keep it cheap); cb runs
 * later from the loop, a few exits per iteration. */
typedef void (*td_reaped_cb)(void *data);
typedef void (*td_exit_cb)(void *data, int status, const struct rusage *ru);
int td_reaper_start(void);
void td_reaper_stop(void);
void td_reaper_watch(pid_t pid, td_reaped_cb reaped, td_exit_cb cb, void *data);

#endif
