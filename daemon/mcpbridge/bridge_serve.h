/*
 * bridge_serve.h - the bridge's serve mode (bridge_serve.c): one server, a
 * call per request frame.
 */
#ifndef TD_BRIDGE_SERVE_H
#define TD_BRIDGE_SERVE_H

#include <jansson.h>

struct server;
/* One call of tool on s: the response frame's object (a new reference). */
typedef json_t *(*bridge_call_fn)(struct server *s, const char *tool, json_t *arguments);

/* Serves calls on s (initialized) until stdin's end: each request frame
 * {"name"?, "arguments"} one tools/call (name: tool when it says none),
 * one response frame. Returns at the end of stdin; a frame it cannot
 * read or a response it cannot write ends the bridge (status 1). */
void bridge_serve(struct server *s, const char *tool, bridge_call_fn call);

#endif
