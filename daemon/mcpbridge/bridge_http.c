/*
 * bridge_http.c - the bridge's Streamable HTTP transport: each JSON-RPC
 * message the bridge sends is a POST to the server's URL (libcurl), and the
 * answer to a request is read as it comes, a JSON object or an SSE stream
 * of messages ending with the response (progress on the way).
 *
 * The bridge runs inside the call's sandbox, whose only network is the
 * daemon's egress proxy: libcurl finds it in the environment the daemon
 * set (https_proxy and the like), the proxy lets through the hosts of the
 * definition's allow-list (the URL's host among them, mcpdef.c) and adds
 * the definition's credential headers itself, so no secret is ever here.
 * For a host with headers the proxy ends TLS with the daemon's CA, whose
 * bundle the daemon names in CURL_CA_BUNDLE/SSL_CERT_FILE.
 *
 * MCP 2025-11-25: the session the server makes at initialize (its
 * Mcp-Session-Id) is sent back on each request and ended with DELETE; the
 * negotiated version goes in MCP-Protocol-Version. 2026-07-28 (stateless):
 * each request's _meta names the version, mirrored with its method and tool
 * in the MCP-Protocol-Version, Mcp-Method and Mcp-Name headers. Cancelling
 * is closing the stream, which the call's end does (its process killed).
 * Nothing here waits on its own: a server that hangs is the call's timeout.
 *
 * libcurl is loaded (dlopen) only here, in url mode: linked, its thirty
 * libraries would be loaded by every call of a stdio server too (the
 * bridge's start four times as long, measured).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <nettle/base64.h>

#include "bridge_http.h"
#include "toolexec.h" /* te_json_dumps, te_json_loadb: numbers as written */
#include "bridge_sse.h"

#define MODERN "2026-07-28"
struct bridge_http {
    char *url;
    CURLM *multi;
    CURL *req; /* the request in flight (NULL: none) */
    struct curl_slist *hdrs;
    bool done;              /* its transfer has ended */
    json_t *id;             /* its id */
    char method[64];        /* its method */
    json_t *queue;          /* what the server sent, not handed out yet */
    bool decided;           /* its response's status and type known */
    bool sse;               /* ... an event stream */
    long status;            /* ... its HTTP status */
    struct bridge_sse body; /* ... its body so far */
    char fail[768];         /* why the answer will not come */
    char errbuf[CURL_ERROR_SIZE];
    char *session;    /* Mcp-Session-Id (2025-11-25) */
    char version[32]; /* the version initialize agreed on */
    char **params;    /* "NAME=POINTER" each: x-mcp-header parameters */
};

/* libcurl's functions, loaded by load_curl() */
static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_perform)(CURL *);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURLMcode (*multi_wait)(CURLM *, struct curl_waitfd *, unsigned, int, int *);
} K;

static int load_curl(char *err, size_t errlen)
{
    /* Debian's flavours, the one built against first */
    static const char *const libs[] = {"libcurl-gnutls.so.4", "libcurl.so.4"};
    void *lib = NULL;
    for (size_t i = 0; !lib && i < sizeof(libs) / sizeof(libs[0]); i++)
        lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "libcurl could not be loaded (installed? in the call's view?): %s",
                 dlerror());
        return -1;
    }
    static const char *const syms[] = {
        "curl_global_init",   "curl_easy_init",        "curl_easy_setopt",
        "curl_easy_getinfo",  "curl_easy_perform",     "curl_easy_cleanup",
        "curl_easy_strerror", "curl_slist_append",     "curl_slist_free_all",
        "curl_multi_init",    "curl_multi_add_handle", "curl_multi_remove_handle",
        "curl_multi_perform", "curl_multi_info_read",  "curl_multi_wait"};
    void **slot = (void **)&K;
    _Static_assert(sizeof(K) == sizeof(syms) / sizeof(syms[0]) * sizeof(void *),
                   "one symbol a member");
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
        if (!(slot[i] = dlsym(lib, syms[i]))) {
            snprintf(err, errlen, "libcurl has no %s", syms[i]);
            return -1;
        }
    return 0;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *data)
{
    struct bridge_http *h = data;
    size_t n = size * nmemb;
    if (!h->decided) {
        char *ct = NULL;
        K.easy_getinfo(h->req, CURLINFO_RESPONSE_CODE, &h->status);
        K.easy_getinfo(h->req, CURLINFO_CONTENT_TYPE, &ct);
        h->sse = h->status / 100 == 2 && ct && strncasecmp(ct, "text/event-stream", 17) == 0;
        h->decided = true;
    }
    char why[400];
    if (!bridge_sse_keep(&h->body, p, n)) {
        snprintf(h->fail, sizeof(h->fail), "the MCP server at %s sent a message over %u bytes",
                 h->url, BRIDGE_BODY_MAX);
        return 0; /* the transfer aborted */
    }
    if (h->sse && bridge_sse_feed(&h->body, h->queue, why, sizeof(why)) < 0) {
        snprintf(h->fail, sizeof(h->fail), "the MCP server at %s %s", h->url, why);
        return 0;
    }
    return n;
}

/* Mcp-Session-Id, where the server makes a session. */
static size_t on_header(char *p, size_t size, size_t nmemb, void *data)
{
    struct bridge_http *h = data;
    size_t n = size * nmemb;
    if (n > 15 && strncasecmp(p, "mcp-session-id:", 15) == 0) {
        size_t a = 15, b = n;
        while (a < b && (p[a] == ' ' || p[a] == '\t'))
            a++;
        while (b > a && (p[b - 1] == '\r' || p[b - 1] == '\n' || p[b - 1] == ' '))
            b--;
        free(h->session);
        h->session = strndup(p + a, b - a);
    }
    return n;
}

/* A value as a header may carry it: itself when plain visible ASCII, else
 * the spec's =?base64?...?= form. */
static struct curl_slist *add_value(struct curl_slist *l, const char *name, const char *v)
{
    size_t n = strlen(v);
    bool plain = n > 0 && v[0] != ' ' && v[n - 1] != ' ' &&
                 !(strncmp(v, "=?base64?", 9) == 0 && n >= 11 && strcmp(v + n - 2, "?=") == 0);
    for (size_t i = 0; plain && i < n; i++)
        plain = (unsigned char)v[i] >= 0x20 && (unsigned char)v[i] < 0x7f;
    char *line = malloc(strlen(name) + BASE64_ENCODE_RAW_LENGTH(n) + 16);
    if (!line)
        return l;
    if (plain) {
        sprintf(line, "%s: %s", name, v);
    } else {
        int k = sprintf(line, "%s: =?base64?", name);
        base64_encode_raw((char *)line + k, n, (const uint8_t *)v);
        strcpy(line + k + BASE64_ENCODE_RAW_LENGTH(n), "?=");
    }
    struct curl_slist *r = K.slist_append(l, line);
    free(line);
    return r ? r : l;
}

/* The value at pointer (RFC 6901, ~0 and ~1) in v: a borrowed reference. */
static json_t *at_pointer(json_t *v, const char *ptr)
{
    char key[512];
    while (v && *ptr == '/') {
        size_t k = 0;
        for (ptr++; *ptr && *ptr != '/' && k < sizeof(key) - 1; ptr++)
            key[k++] = *ptr == '~' && ptr[1] ? (*++ptr == '0' ? '~' : '/') : *ptr;
        key[k] = '\0';
        v = json_object_get(v, key);
    }
    return *ptr ? NULL : v;
}

/* Mcp-Param-NAME for each marked argument present (2026-07-28). */
static struct curl_slist *param_headers(struct bridge_http *h, struct curl_slist *l, json_t *args)
{
    for (char **p = h->params; p && *p; p++) {
        const char *eq = strchr(*p, '=');
        json_t *v = at_pointer(args, eq + 1);
        char name[160], num[32];
        const char *text = json_string_value(v);
        if (json_is_integer(v))
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v)), text = num;
        else if (json_is_boolean(v))
            text = json_is_true(v) ? "true" : "false";
        snprintf(name, sizeof(name), "Mcp-Param-%.*s", (int)(eq - *p), *p);
        if (text)
            l = add_value(l, name, text);
    }
    return l;
}

/* The headers of a POST of msg. */
static struct curl_slist *headers(struct bridge_http *h, json_t *msg)
{
    struct curl_slist *l = NULL;
    char line[256];
    l = K.slist_append(l, "Content-Type: application/json");
    l = K.slist_append(l, "Accept: application/json, text/event-stream");
    l = K.slist_append(l, "Expect:"); /* no 100-continue round trip */
    json_t *params = json_object_get(msg, "params");
    const char *modern = json_string_value(json_object_get(
        json_object_get(params, "_meta"), "io.modelcontextprotocol/protocolVersion"));
    const char *version = modern ? modern : h->version[0] ? h->version : NULL;
    if (version) {
        snprintf(line, sizeof(line), "MCP-Protocol-Version: %.64s", version);
        l = K.slist_append(l, line);
    }
    if (modern && json_is_string(json_object_get(msg, "method"))) {
        l = add_value(l, "Mcp-Method", json_string_value(json_object_get(msg, "method")));
        if (json_is_string(json_object_get(params, "name")))
            l = add_value(l, "Mcp-Name", json_string_value(json_object_get(params, "name")));
        if (strcmp(json_string_value(json_object_get(msg, "method")), "tools/call") == 0)
            l = param_headers(h, l, json_object_get(params, "arguments"));
    }
    if (h->session)
        l = add_value(l, "Mcp-Session-Id", h->session);
    return l;
}

/* A body that is not ours to read (never to stdout: the frames' channel). */
static size_t discard(char *p, size_t size, size_t nmemb, void *data)
{
    (void)p;
    (void)data;
    return size * nmemb;
}

static CURL *easy(struct bridge_http *h, struct curl_slist *hdrs)
{
    CURL *c = K.easy_init();
    if (!c)
        return NULL;
    K.easy_setopt(c, CURLOPT_URL, h->url);
    K.easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    K.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    K.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    K.easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    /* a redirect goes through the proxy too, so only to an allowed host */
    K.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    K.easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    /* the proxy speaks HTTP/1.1, one request a connection: a connection
     * kept for the next request would be answered 400 */
    K.easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    K.easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    K.easy_setopt(c, CURLOPT_USERAGENT, "toolexecd-mcp-bridge");
    K.easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
    K.easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    const char *ca = getenv("CURL_CA_BUNDLE");
    if (!ca || !*ca)
        ca = getenv("SSL_CERT_FILE");
    if (ca && *ca)
        K.easy_setopt(c, CURLOPT_CAINFO, ca);
    return c;
}

/* The request in flight dropped (its stream closed) and its answer's state. */
static void drop_request(struct bridge_http *h)
{
    if (h->req) {
        K.multi_remove_handle(h->multi, h->req);
        K.easy_cleanup(h->req);
        h->req = NULL;
    }
    K.slist_free_all(h->hdrs);
    h->hdrs = NULL;
    json_decref(h->id);
    h->id = NULL;
    h->done = h->decided = h->sse = false;
    h->status = 0;
    bridge_sse_reset(&h->body);
    h->fail[0] = h->errbuf[0] = '\0';
}

/* What a body says in a message: its start, on one line. */
static void quote(char *out, size_t outlen, const char *b, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < outlen && i < 300; i++)
        out[k++] = (unsigned char)b[i] < 0x20 ? ' ' : b[i];
    while (k && out[k - 1] == ' ')
        k--;
    out[k] = '\0';
}

struct bridge_http *bridge_http_open(const char *url, char **opts, char *err, size_t errlen)
{
    if (load_curl(err, errlen) < 0)
        return NULL;
    if (K.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "libcurl did not start");
        return NULL;
    }
    struct bridge_http *h = calloc(1, sizeof(*h));
    if (!h || !(h->url = strdup(url)) || !(h->queue = json_array()) ||
        !(h->multi = K.multi_init())) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->params = calloc(1, sizeof(char *));
    for (size_t n = 0; h->params && opts && *opts; opts += 2) {
        if (strcmp(opts[0], "--param-header") || !opts[1] || !strchr(opts[1], '=')) {
            snprintf(err, errlen, "%s: expected --param-header NAME=POINTER", opts[0]);
            return NULL;
        }
        char **more = realloc(h->params, (n + 2) * sizeof(char *));
        if (!more)
            break;
        h->params = more;
        h->params[n++] = opts[1];
        h->params[n] = NULL;
    }
    return h;
}

/* A notification or a response (2025-11-25: ours to a server's request):
 * POSTed whole, its answer 202. */
static int post_whole(struct bridge_http *h, const char *body, struct curl_slist *hdrs, char *err,
                      size_t errlen)
{
    CURL *c = easy(h, hdrs);
    long status = 0;
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    K.easy_setopt(c, CURLOPT_POSTFIELDS, body);
    CURLcode rc = K.easy_perform(c);
    K.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    K.easy_cleanup(c);
    if (rc != CURLE_OK || status / 100 != 2) {
        snprintf(err, errlen, "the MCP server at %s refused a notification: %s", h->url,
                 rc != CURLE_OK ? K.easy_strerror(rc) : "an HTTP error");
        return -1;
    }
    return 0;
}

int bridge_http_send(struct bridge_http *h, json_t *msg, char *err, size_t errlen)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_t *id = json_object_get(msg, "id");
    json_t *params = json_object_get(msg, "params");
    if (method && strcmp(method, "server/discover") == 0 && json_is_object(params)) {
        /* asked in the revision it is about, as the header says */
        json_t *meta = json_object_get(params, "_meta");
        if (!meta)
            json_object_set_new(params, "_meta", meta = json_object());
        json_object_set_new(meta, "io.modelcontextprotocol/protocolVersion", json_string(MODERN));
        json_object_set_new(meta, "io.modelcontextprotocol/clientCapabilities", json_object());
    }
    char *body = te_json_dumps(msg, JSON_ENCODE_ANY, NULL); /* numbers as given */
    struct curl_slist *hdrs = body ? headers(h, msg) : NULL;
    int rc = 0;
    if (!body || !hdrs) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    } else if (!method || !id) {
        rc = post_whole(h, body, hdrs, err, errlen);
        K.slist_free_all(hdrs);
    } else {
        /* a new request: the last one's stream, answered, closed */
        drop_request(h);
        h->hdrs = hdrs;
        h->id = json_incref(id);
        snprintf(h->method, sizeof(h->method), "%s", method);
        if (!(h->req = easy(h, hdrs))) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        } else {
            K.easy_setopt(h->req, CURLOPT_COPYPOSTFIELDS, body);
            K.easy_setopt(h->req, CURLOPT_WRITEFUNCTION, on_body);
            K.easy_setopt(h->req, CURLOPT_WRITEDATA, h);
            K.easy_setopt(h->req, CURLOPT_HEADERFUNCTION, on_header);
            K.easy_setopt(h->req, CURLOPT_HEADERDATA, h);
            K.multi_add_handle(h->multi, h->req);
        }
    }
    free(body);
    json_decref(msg);
    return rc;
}

/* A request's transfer ended: what it brought queued, or why not said. */
static void finish(struct bridge_http *h, CURLcode rc)
{
    h->done = true;
    if (rc != CURLE_OK) {
        long connect = 0;
        K.easy_getinfo(h->req, CURLINFO_HTTP_CONNECTCODE, &connect);
        if (h->fail[0])
            return;
        if (connect >= 300)
            snprintf(h->fail, sizeof(h->fail),
                     "the MCP server at %s: the egress proxy answered %ld (403: the host is not "
                     "allowed, 502/504: it could not be reached; the call's denied says which)",
                     h->url, connect);
        else
            snprintf(h->fail, sizeof(h->fail), "the MCP server at %s could not be reached: %s",
                     h->url, h->errbuf[0] ? h->errbuf : K.easy_strerror(rc));
        return;
    }
    K.easy_getinfo(h->req, CURLINFO_RESPONSE_CODE, &h->status);
    if (h->sse) {
        char why[400];
        if (bridge_sse_end(&h->body, h->queue, why, sizeof(why)) < 0)
            snprintf(h->fail, sizeof(h->fail), "the MCP server at %s %s", h->url, why);
        return;
    }
    json_error_t jerr;
    json_t *m =
        h->body.len ? te_json_loadb(h->body.buf, h->body.len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    size_t i;
    json_t *one;
    if (h->status / 100 == 2 && json_is_object(m)) {
        json_array_append(h->queue, m);
    } else if (h->status / 100 == 2 && json_is_array(m)) {
        json_array_foreach(m, i, one) if (json_is_object(one)) json_array_append(h->queue, one);
    } else if (json_is_object(m) && json_is_object(json_object_get(m, "error"))) {
        /* an HTTP error whose body is the JSON-RPC error: the server's answer */
        if (!json_object_get(m, "id") || json_is_null(json_object_get(m, "id")))
            json_object_set(m, "id", h->id);
        json_array_append(h->queue, m);
    } else if (strcmp(h->method, "initialize") == 0 &&
               (h->status == 400 || h->status == 404 || h->status == 405)) {
        /* a server of the stateless revision alone may refuse it so: the
         * bridge asks server/discover next */
        json_array_append_new(h->queue,
                              json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", h->id,
                                        "error", "code", -32600, "message", "initialize refused"));
    } else {
        char q[320];
        quote(q, sizeof(q), h->body.buf, h->body.len);
        snprintf(h->fail, sizeof(h->fail), "the MCP server at %s answered HTTP %ld%s%s%s", h->url,
                 h->status, q[0] ? " (" : "", q, q[0] ? ")" : "");
    }
    json_decref(m);
}

json_t *bridge_http_next(struct bridge_http *h, char *err, size_t errlen)
{
    for (;;) {
        if (json_array_size(h->queue)) {
            json_t *m = json_incref(json_array_get(h->queue, 0));
            json_array_remove(h->queue, 0);
            const char *v =
                json_string_value(json_object_get(json_object_get(m, "result"), "protocolVersion"));
            if (strcmp(h->method, "initialize") == 0 && v &&
                json_equal(json_object_get(m, "id"), h->id))
                snprintf(h->version, sizeof(h->version), "%s", v);
            return m;
        }
        if (!h->req || h->done) {
            snprintf(err, errlen, "%s",
                     h->fail[0] ? h->fail : "the MCP server's answer ended without a response");
            return NULL;
        }
        int running = 0, left;
        K.multi_perform(h->multi, &running);
        CURLMsg *cm;
        while ((cm = K.multi_info_read(h->multi, &left)))
            if (cm->msg == CURLMSG_DONE && cm->easy_handle == h->req)
                finish(h, cm->data.result);
        if (!h->done && !json_array_size(h->queue))
            K.multi_wait(h->multi, NULL, 0, 1000, NULL);
    }
}

void bridge_http_end(struct bridge_http *h)
{
    drop_request(h);
    if (!h->session)
        return;
    /* the session ended as the spec asks; a server that does not answer
     * soon keeps it (the call is over either way) */
    struct curl_slist *hdrs = add_value(NULL, "Mcp-Session-Id", h->session);
    if (h->version[0]) {
        char line[128];
        snprintf(line, sizeof(line), "MCP-Protocol-Version: %.64s", h->version);
        hdrs = K.slist_append(hdrs, line);
    }
    CURL *c = easy(h, hdrs);
    if (c) {
        K.easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
        K.easy_setopt(c, CURLOPT_TIMEOUT_MS, 1000L);
        K.easy_perform(c);
        K.easy_cleanup(c);
    }
    K.slist_free_all(hdrs);
}
