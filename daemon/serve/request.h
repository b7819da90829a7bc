/*
 * request.h - one request line to its op: the line parsed (a JSON object, no
 * duplicate keys), its "op" looked up in the caller's table and the op's
 * handler called. The request's JSON is freed in one place, here, however
 * the handler returns; the errors of the line itself (invalid_json,
 * not_an_object, unknown_op, shutting_down) go to the caller's callback.
 */
#ifndef TD_REQUEST_H
#define TD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct td_conn;

/* One row per op. */
struct td_op {
    const char *name;
    /* req: a JSON object, borrowed (freed after the handler returns) */
    void (*handler)(struct td_conn *c, json_t *req);
    bool new_work; /* refused once the daemon is shutting down */
};

/* A request_error of the line: batch is the request's "batch" string, or
 * NULL. */
typedef void (*td_request_error_fn)(struct td_conn *c, const char *batch, const char *reason,
                                    const char *message);

/* Handle the request line of c (blank lines are ignored). */
void td_request_handle(const struct td_op *ops, size_t nops, struct td_conn *c, const char *line,
                       size_t len, td_request_error_fn error);

/* A request's string member, or NULL: a number, even one too large for a
 * double (te_json_loadb() keeps it as a marked string), is none. */
const char *td_req_text(const json_t *req, const char *key);

#endif
