/*
 * listener.h - the listening sockets.
 */
#ifndef TD_LISTENER_H
#define TD_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int td_listeners_start(void);
void td_listeners_stop(void);
/* "PATH and PATH (events)", for the start-up log line. */
const char *td_listeners_describe(char *buf, size_t len);

#endif
