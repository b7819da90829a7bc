/*
 * server.h - client connections: JSON lines in, events out.
 */
#ifndef TD_SERVER_H
#define TD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

struct td_conn;

/* Close idle connections (shutting down). */
void td_server_stop(void);
/* cb (its owner's, upward) runs after a connection is freed. */
void td_server_on_conn_gone(void (*cb)(void));
/* No batch running and no worker left: subscribers may go. */
bool td_server_finished(void);
/* Cancel every batch of every client. */
void td_server_cancel_all(void);
/* After a reload: {"event": "tools_changed"} to the connections that asked
 * with {"op": "tools", "watch": true}. */
void td_server_tools_changed(void);
/* Close connections whose batches are done but whose client has not read
 * the events it is owed (shutting down, after a grace). */
void td_server_drop_unread(void);
unsigned td_server_batches(void);
/* A connection accepted on a listening socket. */
void td_conn_accept(int fd, bool events);
/* Write data (taken) to the client; cb (may be NULL) runs when it is written
 * or failed. -1 when the connection is gone (data freed). */
typedef void (*td_written_cb)(struct td_conn *c, void *arg, int status);
int td_conn_write(struct td_conn *c, char *data, size_t len, td_written_cb cb, void *arg);
unsigned td_server_conns(void);
/* The gauges stats and metrics report (metrics.c's text, main's /metrics). */
struct td_stats_gauges;
void td_server_gauges(struct td_stats_gauges *g);
void td_conn_send(struct td_conn *c, json_t *event /* stolen */);
void td_conn_error(struct td_conn *c, const char *batch, const char *type, const char *reason,
                   const char *message, json_t *metadata);
void td_batches_throttle(struct td_conn *c, bool pause);

#endif
