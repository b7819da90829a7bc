/*
 * bridge_http.h - the bridge's Streamable HTTP transport (bridge_http.c):
 * an MCP server at a URL, reached through the call's egress proxy.
 */
#ifndef BRIDGE_HTTP_H
#define BRIDGE_HTTP_H

#include <stddef.h>

#include <jansson.h>

struct bridge_http;

/* The server at url (http or https), nothing sent yet; opts (NULL-ended):
 * "--param-header" "NAME=POINTER" pairs, a tools/call argument (its JSON
 * pointer) sent as Mcp-Param-NAME too (2026-07-28's x-mcp-header). NULL
 * with err said. */
struct bridge_http *bridge_http_open(const char *url, char **opts, char *err, size_t errlen);
/* msg (its reference taken) POSTed. A request's answer, and what the server
 * sends before it, come from bridge_http_next(); a notification or a
 * response is sent whole here. 0, or -1 with err said. */
int bridge_http_send(struct bridge_http *h, json_t *msg, char *err, size_t errlen);
/* The server's next message about the request in flight (a new reference);
 * NULL with err said when there is none to come. */
json_t *bridge_http_next(struct bridge_http *h, char *err, size_t errlen);
/* The call is over: its session (if the server made one) ended. */
void bridge_http_end(struct bridge_http *h);

#endif
