/*
 * tail.h - event subscribers ({"op": "tail"}, the events socket).
 */
#ifndef TD_TAIL_H
#define TD_TAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>

#include <jansson.h>

struct td_conn;

struct td_tail;
/* How a subscriber's lines reach its connection: the owner's (server.c)
 * write, given to td_tail_new (upward, as a callback). */
typedef void (*td_tail_written_cb)(struct td_conn *c, void *arg, int status);
typedef int (*td_tail_write_fn)(struct td_conn *c, char *data, size_t len, td_tail_written_cb cb,
                                void *arg);
/* Resolve --tail-group (at start: may block on NSS) and subscribe to the
 * event bus; -1 if the group is unknown. */
int td_tail_setup(const char *group);
/* A subscriber on c with no filters; what it may see is decided now, from
 * its credentials and the groups of the peer on fd (SO_PEERGROUPS). */
struct td_tail *td_tail_new(td_tail_write_fn write, struct td_conn *c, const struct ucred *cred,
                            int fd);
/* The tools and batches filters of a tail request (arrays of strings or
 * NULL) as sets; -1 with err naming the field and the limit it breaks. */
int td_tail_filters(const json_t *tools, const json_t *batches, json_t **tools_set,
                    json_t **batches_set, char *err, size_t errlen);
/* Replace the filters in place (sets taken, NULL for none); lines queued
 * under the old ones are dropped. */
void td_tail_set_filters(struct td_tail *t, json_t *tools, json_t *batches);
/* Unsubscribe; the memory goes once no write of it is in flight. */
void td_tail_free(struct td_tail *t);
unsigned td_tail_count(void);

#endif
