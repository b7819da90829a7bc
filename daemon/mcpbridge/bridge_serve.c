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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge_serve.h"
#include "toolexec.h"

/* stdin's frames, read as they come: all of stdin is the daemon's frames
 * here, so a read takes what is there (one read a call, where call mode's
 * te_worker_read_request reads the header and the body apart so as never
 * to read past its one frame). */
struct frames {
    te_frame_decoder d;
    char buf[16 * 1024];
    size_t start, len;
};

/* The next request frame's object; -ENODATA at stdin's end between frames. */
static int next_request(struct frames *f, json_t **req)
{
    for (;;) {
        size_t used = 0;
        int rc = f->len > f->start
                     ? te_frame_feed(&f->d, f->buf + f->start, f->len - f->start, &used)
                     : TE_FRAME_NEED;
        f->start += used;
        if (rc == TE_FRAME_DONE) {
            size_t len;
            char *body = te_frame_take(&f->d, &len);
            *req = body ? te_json_loadb(body, len, JSON_ALLOW_NUL, NULL) : NULL;
            free(body);
            if (json_is_object(*req))
                return 0;
            json_decref(*req);
            *req = NULL;
            return body ? -EBADMSG : -ENOMEM;
        }
        if (rc < 0)
            return rc;
        ssize_t n = read(0, f->buf, sizeof(f->buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0) /* (inside a frame too, as te_worker_read_request has it) */
            return -ENODATA;
        f->start = 0;
        f->len = (size_t)n;
    }
}

void bridge_serve(struct server *s, const char *tool, bridge_call_fn call)
{
    static struct frames f;
    te_frame_decoder_init(&f.d, TE_FRAME_MAX_DEFAULT);
    for (;;) {
        json_t *req = NULL;
        int rc = next_request(&f, &req);
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
