/*
 * notify.h - sd_notify (no-ops without libsystemd or outside systemd). A
 * leaf: the STATUS= summary comes from the caller's function.
 */
#ifndef TD_NOTIFY_H
#define TD_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Writes the live summary for STATUS= (without the "STATUS=") into buf. */
typedef void (*td_notify_status_fn)(char *buf, size_t len);
/* READY=1, and STATUS= from status now and every second while it changes. */
void td_notify_ready(td_notify_status_fn status);
void td_notify_reloading(void);
void td_notify_stopping(void);
void td_notify_close(void);
bool td_notify_built(void);

#endif
