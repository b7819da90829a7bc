/*
 * spawnproc.h - the spawner process's own code (spawnproc.c); the daemon's
 * side is spawner.c.
 */
#ifndef TD_SPAWNPROC_H
#define TD_SPAWNPROC_H

#include <sys/types.h>

/* The spawner is toolexecd exec'd afresh (spawner.c), never a fork of the
 * daemon: "toolexecd --spawner-process PID", PID the daemon's (its
 * parent), its socket to the daemon on fd 3, an empty environment. */
#define TD_SPAWNPROC_ARG "--spawner-process"
#define TD_SPAWNPROC_FD 3

/* main()'s when argv[1] is TD_SPAWNPROC_ARG: serve requests on fd 3 until
 * the daemon closes its end. Never returns. */
__attribute__((noreturn)) void td_spawnproc_main(int argc, char **argv);

#endif
