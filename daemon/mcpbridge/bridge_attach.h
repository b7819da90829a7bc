/*
 * bridge_attach.h - the bridge's attach mode (bridge_attach.c).
 */
#ifndef TE_BRIDGE_ATTACH_H
#define TE_BRIDGE_ATTACH_H

#include <sys/types.h>

/* argv[1..4] "attach PID IN OUT": a server started for the bridge (by
 * toolexec.mcpwarm, a warm call), its child, with IN the write end of the
 * server's stdin and OUT the read end of its stdout. The words used (4),
 * with *pidfd watching the server (-1 where there is none); 0 when argv
 * is not attach. A bad one ends the bridge (status 2). */
int bridge_attach(int argc, char **argv, pid_t *pid, int *in, int *out, int *pidfd);

#endif
