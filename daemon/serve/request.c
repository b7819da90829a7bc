/*
 * request.c - a request line to its op (see request.h). The ops themselves
 * and their table are server.c's; this file holds what every line goes
 * through before an op sees it, and the one place its JSON is freed.
 */
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "config.h"
#include "request.h"
#include "toolexec.h"

const char *td_req_text(const json_t *req, const char *key)
{
    return te_json_text_value(json_object_get(req, key));
}

/* "run, cancel, ... or metrics": the table's ops, for unknown_op */
static void op_names(const struct td_op *ops, size_t nops, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < nops && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s",
                                i == 0         ? ""
                                : i + 1 < nops ? ", "
                                               : " or ",
                                ops[i].name);
}

void td_request_handle(const struct td_op *ops, size_t nops, struct td_conn *c, const char *line,
                       size_t len, td_request_error_fn error)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        i++;
    if (i == len)
        return; /* blank lines are harmless; socat users type them */
    json_error_t jerr;
    /* freed on every return below, and nowhere else */
    te_autojson json_t *req =
        te_json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    char msg[256], names[128];
    if (!req) {
        snprintf(msg, sizeof(msg), "request is not valid JSON (column %d): %s", jerr.column,
                 jerr.text);
        error(c, NULL, "invalid_json", msg);
        return;
    }
    if (!json_is_object(req)) {
        error(c, NULL, "not_an_object", "request is not a JSON object");
        return;
    }
    const char *name = td_req_text(req, "op");
    const struct td_op *op = NULL;
    for (size_t k = 0; name && !op && k < nops; k++)
        if (strcmp(name, ops[k].name) == 0)
            op = &ops[k];
    if (!op) {
        op_names(ops, nops, names, sizeof(names));
        if (name)
            snprintf(msg, sizeof(msg), "op: unknown op \"%.64s\" (expected %s)", name, names);
        else
            snprintf(msg, sizeof(msg), "op: missing or not a string (expected %s)", names);
        error(c, NULL, "unknown_op", msg);
        return;
    }
    if (op->new_work && td_shutting_down) {
        error(c, td_req_text(req, "batch"), "shutting_down",
              "toolexecd is shutting down; no new batches");
        return;
    }
    op->handler(c, req);
}
