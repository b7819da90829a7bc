/*
 * spawnproc.h - the spawner process's own code (spawnproc.c); the daemon's
 * side is spawner.c.
 */
#ifndef TD_SPAWNPROC_H
#define TD_SPAWNPROC_H

#include <sys/types.h>

/* In the freshly forked spawner: serve requests on sock until the daemon
 * (pid daemon, our parent) closes its end. Never returns. */
__attribute__((noreturn)) void td_spawnproc_main(int sock, pid_t daemon);

#endif
