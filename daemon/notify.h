/*
 * notify.h - sd_notify.
 */
#ifndef TD_NOTIFY_H
#define TD_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

void td_notify_ready(void);
void td_notify_reloading(void);
void td_notify_stopping(void);
void td_notify_close(void);
bool td_notify_built(void);

#endif
