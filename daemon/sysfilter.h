/*
 * sysfilter.h - the system-call filters a call's worker is started under,
 * built once at start (libseccomp), handed to sandbox.c as ready BPF.
 */
#ifndef TD_SYSFILTER_H
#define TD_SYSFILTER_H

#include <linux/filter.h>
#include <stdbool.h>

/* Builds the filters; logs and returns -1 when libseccomp cannot. */
int td_sysfilter_setup(void);
/* The filter for a call, NULL for none: "network": false also refuses
 * Unix sockets (socket(AF_UNIX) fails with EACCES), which a network
 * namespace leaves reachable by path. */
const struct sock_fprog *td_sysfilter_get(bool network);

#endif
