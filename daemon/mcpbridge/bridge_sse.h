/*
 * bridge_sse.h - a Streamable HTTP answer's body read (bridge_sse.c): kept
 * whole (a JSON answer), or parsed as it comes (an SSE stream), each
 * event's data one JSON-RPC message. No I/O: bridge_http.c feeds it what
 * libcurl reads, tests/fuzz/fuzz_mcp_sse.c what it makes up.
 */
#ifndef BRIDGE_SSE_H
#define BRIDGE_SSE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* One body or event: more is a flood, as on stdio. */
#define BRIDGE_BODY_MAX (16u << 20)

struct bridge_sse {
    char *buf;         /* the body, or the stream not parsed yet */
    size_t len, cap;   /* ... */
    char *data;        /* the event being read: its data lines */
    size_t dlen, dcap; /* ... */
};

/* n more bytes of the body kept; false past BRIDGE_BODY_MAX (or no memory). */
bool bridge_sse_keep(struct bridge_sse *s, const char *p, size_t n);
/* The complete lines kept parsed, each event's message appended to queue;
 * -1 with why said (an event not a JSON object, one too big). */
int bridge_sse_feed(struct bridge_sse *s, json_t *queue, char *why, size_t whylen);
/* The stream ended: an event it cut short (no empty line) taken as ended. */
int bridge_sse_end(struct bridge_sse *s, json_t *queue, char *why, size_t whylen);
/* Emptied for the next answer (its memory kept). */
void bridge_sse_reset(struct bridge_sse *s);
void bridge_sse_free(struct bridge_sse *s);

#endif
