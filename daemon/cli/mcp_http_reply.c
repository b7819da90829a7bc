/*
 * mcp_http_reply.c - the leaves every part of the MCP HTTP front answers
 * with (mcp_http_int.h): the clock, a JSON-RPC error, a queued response.
 * Below mcp_http.c, mcp_http_check.c and mcp_http_session.c, which all
 * answer clients, so that none of them calls back up into the listener.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "mcp_http_int.h"

/* A JSON-RPC error response (id NULL: none); data (stolen) may be NULL. */
json_t *mcp_http_rpc_error(const json_t *id, int code, const char *message, json_t *data)
{
    json_t *err = json_pack("{s:i,s:s}", "code", code, "message", message);
    if (err && data)
        json_object_set(err, "data", data);
    json_decref(data);
    json_t *msg = json_pack("{s:s,s:o}", "jsonrpc", "2.0", "error", err);
    if (msg && id)
        json_object_set(msg, "id", (json_t *)id);
    return msg;
}

/* Queue a response: body (stolen) as application/json, or none; one more
 * header, name: value, when value is not NULL. */
enum MHD_Result mcp_http_queue(struct MHD_Connection *conn, unsigned status, json_t *body,
                               const char *name, const char *value)
{
    char *text = body ? te_json_dumps(body, 0, NULL) : NULL;
    json_decref(body);
    struct MHD_Response *r =
        text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    if (text)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (value)
        MHD_add_response_header(r, name, value);
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

enum MHD_Result mcp_http_reply(struct MHD_Connection *conn, unsigned status, json_t *body,
                               const char *session_id)
{
    return mcp_http_queue(conn, status, body, "Mcp-Session-Id", session_id);
}
