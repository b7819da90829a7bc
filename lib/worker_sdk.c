/*
 * worker_sdk.c - the C worker SDK. A worker reads exactly one request frame from
 * stdin, runs its handler and writes exactly one response frame to stdout.
 * Blocking I/O is right here: a worker is a short-lived single-call process.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "toolexec.h"

json_t *te_ok(json_t *value)
{
    return json_pack("{s:o}", "ok", value ? value : json_null());
}

json_t *te_error(json_t *reason)
{
    return json_pack("{s:o}", "error", reason ? reason : json_null());
}

json_t *te_ask_user(const char *question, json_t *opts)
{
    return json_pack("{s:s,s:o}", "ask_user", question, "opts", opts ? opts : json_object());
}

json_t *te_halt(const char *reason, json_t *result)
{
    return json_pack("{s:s,s:o}", "halt", reason, "result", result ? result : json_null());
}

json_t *te_raised(const char *type, const char *message, const char *stacktrace)
{
    return json_pack("{s:{s:s,s:s,s:s}}", "raised", "type", type, "message", message ? message : "",
                     "stacktrace", stacktrace ? stacktrace : "");
}

static int read_full(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -ENODATA;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int te_worker_read_request(int fd, json_t **request)
{
    *request = NULL;
    te_frame_decoder d;
    te_frame_decoder_init(&d, TE_FRAME_MAX_DEFAULT);
    char buf[16 * 1024];
    int rc = TE_FRAME_NEED;
    while (rc == TE_FRAME_NEED) {
        /* never past the frame's end: what follows on stdin is not ours */
        size_t want =
            d.hdr_have < TE_FRAME_HEADER_LEN ? TE_FRAME_HEADER_LEN - d.hdr_have : d.len - d.have;
        if (want > sizeof(buf))
            want = sizeof(buf);
        size_t used;
        rc = read_full(fd, buf, want);
        if (rc == 0)
            rc = te_frame_feed(&d, buf, want, &used);
    }
    if (rc == TE_FRAME_DONE) {
        size_t len;
        char *body = te_frame_take(&d, &len);
        json_error_t jerr;
        *request = te_json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
        rc = 0;
        if (!json_is_object(*request)) {
            json_decref(*request);
            *request = NULL;
            rc = -EBADMSG;
        }
        free(body);
    }
    te_frame_decoder_free(&d);
    return rc;
}

int te_worker_write_response(int fd, const json_t *response)
{
    char *body = te_json_dumps(response, JSON_ENCODE_ANY, NULL);
    if (!body)
        return -ENOMEM;
    size_t len = strlen(body);
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    te_frame_header((uint32_t)len, hdr);
    /* header and body in one write where the pipe takes it: the daemon
     * wakes once per frame, not once for its first four bytes (a serving
     * worker answers a call per frame, bench/mcp_shared.py) */
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {body, len}};
    int rc = 0;
    ssize_t n;
    while ((n = writev(fd, iov, 2)) < 0 && errno == EINTR)
        ;
    if (n < 0)
        rc = -errno;
    else if ((size_t)n < sizeof(hdr) &&
             (rc = write_full(fd, hdr + n, sizeof(hdr) - (size_t)n)) == 0)
        rc = write_full(fd, body, len);
    else if ((size_t)n >= sizeof(hdr))
        rc = write_full(fd, body + ((size_t)n - sizeof(hdr)), len - ((size_t)n - sizeof(hdr)));
    free(body);
    return rc;
}

int te_worker_progress(int fd, double progress, double total, const char *message)
{
    json_t *p = json_pack("{s:f}", "progress", progress);
    if (p && total >= 0)
        json_object_set_new(p, "total", json_real(total));
    if (p && message)
        json_object_set_new(p, "message", json_string(message));
    json_t *frame = p ? json_pack("{s:o}", "progress", p) : NULL;
    if (!frame)
        return -ENOMEM;
    int rc = te_worker_write_response(fd, frame);
    json_decref(frame);
    return rc;
}

json_t *te_progress_frame(const char *body, size_t len)
{
    /* Every response frame passes here: parse only what starts as a
     * progress frame, not a 16 MiB result a second time. */
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    if (i < len && body[i] == '{')
        i++;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    if (len - i < 10 || memcmp(body + i, "\"progress\"", 10) != 0)
        return NULL;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *p = json_object_get(v, "progress");
    const char *key;
    json_t *x;
    bool good = json_is_object(v) && json_object_size(v) == 1 && json_is_object(p) &&
                json_is_number(json_object_get(p, "progress"));
    json_object_foreach(good ? p : NULL, key, x)
    {
        if (strcmp(key, "progress") == 0)
            continue;
        if (!(strcmp(key, "total") == 0 && json_is_number(x)) &&
            !(strcmp(key, "message") == 0 && json_is_string(x)))
            good = false;
    }
    json_t *out = good ? json_incref(p) : NULL;
    json_decref(v);
    return out;
}

int te_worker_tools_changed(int fd)
{
    json_t *frame = json_pack("{s:b}", "tools_changed", 1);
    if (!frame)
        return -ENOMEM;
    int rc = te_worker_write_response(fd, frame);
    json_decref(frame);
    return rc;
}

int te_worker_main(te_handler handler, void *userdata)
{
    json_t *req = NULL;
    int rc = te_worker_read_request(0, &req);
    if (rc == 0 && te_template_requested(req)) {
        /* warm start: returns in each call's process, set up (warm.c) */
        json_decref(req);
        req = NULL;
        int code;
        if (!te_template_run(&code))
            return code;
        rc = te_worker_read_request(0, &req);
    }
    json_t *resp;
    if (rc) {
        resp = te_raised("BadRequest", strerror(-rc), NULL);
    } else {
        te_call call = {
            .tool = json_string_value(json_object_get(req, "tool")),
            .arguments = json_object_get(req, "arguments"),
            .opts = json_object_get(req, "opts"),
        };
        if (!call.tool)
            call.tool = "";
        if (!json_is_object(call.arguments))
            call.arguments = json_object_set_new(req, "arguments", json_object()) == 0
                                 ? json_object_get(req, "arguments")
                                 : NULL;
        resp = handler(&call, userdata);
        if (!resp)
            resp = te_raised("HandlerReturnedNull", "the handler returned no result", NULL);
    }
    rc = resp ? te_worker_write_response(1, resp) : -ENOMEM;
    json_decref(resp);
    json_decref(req);
    return rc ? 1 : 0;
}
