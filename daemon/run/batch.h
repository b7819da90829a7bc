/*
 * batch.h - the runner of a {"op": "run"} batch.
 */
#ifndef TD_BATCH_H
#define TD_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>

#include <jansson.h>

/* Content handed back to the model is cut beyond this (head and tail kept):
 * about 25k tokens, what a model can take without crowding out the rest. */
#define TD_CONTENT_BYTES_DEFAULT 100000

#include "batch_owner.h" /* struct td_batch_owner, td_batch_ops */

struct td_batch;
/* Handle a {"op": "run"} request of owner. */
void td_batch_run(const struct td_batch_owner *owner, json_t *req);
/* May the client cred call t (its allow_uids, allow_gids)? */
struct td_tool;
struct ucred;
bool td_batch_tool_allowed(const struct td_tool *t, const struct ucred *cred);
void td_batch_free(struct td_batch *b);
/* Calls waiting for a worker slot. */
unsigned td_batch_queued(void);
/* {"op": "decide"}: the client's decision on a call's error (on_tool_error
 * "ask"). -ENOENT with err set when no decision is pending for that call. */
int td_batch_decide(struct td_batch *b, const char *call_id, json_t *decision, char *err,
                    size_t errlen);
/* Calls running in a worker (holding a --max-workers slot). */
unsigned td_batch_running(void);
/* fn for each call of every batch that holds a slot (running) or waits
 * for one (not running), with its tool's name: the two counts above, per
 * tool (capacity.c). */
void td_batch_each_call(void (*fn)(void *data, const char *tool, bool running), void *data);
/* Pause or resume reading the output of the batch's workers; workers started
 * while paused start paused. */
void td_batch_throttle(struct td_batch *b, bool pause);
/* Kill its running workers, start none of its queued calls, complete it
 * with halt {"halted_reason": "cancelled"}. */
void td_batch_cancel(struct td_batch *b);
/* Hold (true) or release (false) handing out worker slots freed meanwhile:
 * around cancelling many batches at once. */
void td_batch_hold(bool hold);

#endif
