/*
 * bridge_serve.c - toolexec-mcp-bridge's serve mode: the worker of an MCP
 * server's instance ("instance": "session", run/instance.c). Entered by a
 * first request frame {"serve": true} in call mode; the server, started
 * and initialized once, then answers one tools/call per request frame read
 * from stdin, which stays open between calls. The daemon sends the next
 * frame only once the previous call's response is read (one call in
 * flight), so no request needs an id of ours and a progress frame is the
 * call in flight's. The end of stdin ends the server and the bridge.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bridge_serve.h"
#include "toolexec.h"

void bridge_serve(struct server *s, const char *tool, bridge_call_fn call)
{
    for (;;) {
        json_t *req = NULL;
        int rc = te_worker_read_request(0, &req);
        /* stdin's end is the instance's (its batch is over) */
        if (rc == -ENODATA)
            return;
        if (rc < 0) {
            fprintf(stderr, "toolexec-mcp-bridge: reading a request frame: %s\n", strerror(-rc));
            _exit(1);
        }
        const char *name = json_string_value(json_object_get(req, "name"));
        json_t *out = call(s, name ? name : tool, json_object_get(req, "arguments"));
        json_decref(req);
        if (!out || te_worker_write_response(1, out) < 0) {
            fprintf(stderr, "toolexec-mcp-bridge: writing the response: %s\n",
                    out ? strerror(errno) : "out of memory");
            _exit(1);
        }
        json_decref(out);
    }
}
