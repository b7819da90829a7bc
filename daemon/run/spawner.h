/*
 * spawner.h - calls started off the event loop, by a small process of
 * their own.
 *
 * The loop packs a call's spawn description (spawnmsg.h), sends it with
 * the child's ends of the call's pipes to the spawner over a socket and goes
 * on; the spawner runs sandbox.c's steps (td_sandbox_start), is the call's
 * parent, reaps it, and reports both back. The loop is never suspended by a
 * clone, and a start copies the spawner's few descriptors, not the
 * daemon's (which grow with the calls in flight).
 */
#ifndef TD_SPAWNER_H
#define TD_SPAWNER_H

#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "sandbox.h"

/* One call, seen by its worker (upward by these callbacks, from the loop,
 * never from within td_spawner_call()). */
struct td_spawner_ops {
    /* Started: its pid (as the daemon sees it) and a pidfd (taken), and
     * what it handed up before exec (taken; -1: nothing). Or it never
     * started: pid 0, err the errno and what the step; exited() does not
     * follow. */
    void (*started)(void *data, pid_t pid, int pidfd, const int handed[TD_HAND_COUNT], int err,
                    const char *what);
    /* Its end: the wait status and resource use wait4() gave the spawner;
     * or why non-NULL (status a SIGKILL, ru NULL) when the spawner died and
     * took the call with it. The last callback. */
    void (*exited)(void *data, int status, const struct rusage *ru, const char *why);
};

/* A spare (spares.c), seen by its owner. */
struct td_spare_ops {
    /* made (err 0: it gets ready on its own), or not (err, what: the
     * step); gone() does not follow a failure */
    void (*prepared)(void *data, int err, const char *what);
    /* it died unused (dropped, failed, or the spawner died): the last
     * callback */
    void (*gone)(void *data);
};

/* Start the spawner (once at start, after the signals are set up). 0 or
 * -errno. */
int td_spawner_start(void);
/* Once no call is left: the spawner exits. */
void td_spawner_stop(void);
/* Whether calls go through it (false: td_spawner_start() was not called or
 * failed; the caller spawns itself). */
bool td_spawner_active(void);
/* Ask for s to be started with theirs (the child's ends, td_sandbox_pipes:
 * taken in every case); s's descriptors (cgroup) are sent as copies. 0, or
 * -errno (*what: the step) and no callback will run. */
int td_spawner_call(const struct td_spawn *s, int theirs[TD_SANDBOX_ENDS],
                    const struct td_spawner_ops *ops, void *data, uint64_t spare,
                    const char **what);
/* A spare made for s (its descriptors sent as copies; s->envp empty): a
 * handle (never 0) for td_spawner_call() to take it with, or to drop it by;
 * 0 with *what when it cannot be asked for. Once taken, no callback of its
 * ops runs again. init_waits: its init exec'd ahead (td_sandbox_prepare). */
#define TD_NO_SPARE 0
uint64_t td_spawner_prepare(const struct td_spawn *s, bool init_waits,
                            const struct td_spare_ops *ops, void *data, const char **what);
void td_spawner_drop(uint64_t spare);
/* For stats and tests: the spawner's pid (0: none), its restarts, and the
 * calls it holds (sent, not yet ended). */
pid_t td_spawner_pid(void);
unsigned td_spawner_restarts(void);
unsigned td_spawner_in_flight(void);

#endif
