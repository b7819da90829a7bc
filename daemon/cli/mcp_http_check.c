/*
 * mcp_http_check.c - a POST's JSON-RPC message against its headers
 * (mcp_http_int.h), as Streamable HTTP asks (2026-07-28's "Server
 * Validation"): a gateway may route on the headers while we act on the
 * body, so the two must say the same.
 *
 *   MCP-Protocol-Version  a revision we speak (else 400 and
 *                         UnsupportedProtocolVersion, -32022); equal to
 *                         params._meta's io.modelcontextprotocol/
 *                         protocolVersion when the body has one
 *   Mcp-Method            the body's method
 *   Mcp-Name              params.name of tools/call and prompts/get,
 *                         params.uri of resources/read; "=?base64?...?="
 *                         decoded first
 *
 * A header that differs from the body, or has characters a header may not,
 * is refused with 400 and HeaderMismatch (-32020), whatever the revision.
 * From 2026-07-28 on (the header's or the body's revision) the three are
 * also required on a request; before, they did not exist and may be absent.
 * Whitespace around a value is not part of it (RFC 9110 5.5). A request
 * under a 2026-07-28 header whose _meta lacks the revision or the client's
 * capabilities is refused with 400 and InvalidParams (-32602).
 */
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_http_int.h"

static const char *const legacy_versions[] = {"2024-11-05", "2025-03-26", "2025-06-18",
                                              "2025-11-25", NULL};
static const char *const modern_versions[] = {"2026-07-28", NULL};

static bool in(const char *v, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(v, *set) == 0)
            return true;
    return false;
}

/* RFC 9110's field value: visible ASCII, space and tab. */
static bool header_safe(const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if ((*p < 0x20 && *p != '\t') || *p > 0x7e)
            return false;
    return true;
}

/* RFC 9110 5.5: a field value is taken without the whitespace around it
 * (libmicrohttpd drops only the leading), so h is b with that around it. */
static bool field_is(const char *h, const char *b)
{
    h += strspn(h, " \t");
    size_t n = strlen(b);
    return strncmp(h, b, n) == 0 && h[n + strspn(h + n, " \t")] == '\0';
}

/* h without the whitespace around it: a string to free (NULL: no memory). */
static char *field_trimmed(const char *h)
{
    h += strspn(h, " \t");
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    return strndup(h, n);
}

/* Mcp-Name's value as the body would have it: "=?base64?B64?=" decoded.
 * Returns a string to free, or NULL when the encoding is broken. */
static char *decode_name(const char *v)
{
    size_t n = strlen(v);
    if (n < 11 || strncmp(v, "=?base64?", 9) != 0 || strcmp(v + n - 2, "?=") != 0)
        return strdup(v);
    size_t in_len = n - 11;
    char *out = malloc(BASE64_DECODE_LENGTH(in_len) + 1);
    struct base64_decode_ctx ctx;
    size_t out_len = BASE64_DECODE_LENGTH(in_len);
    base64_decode_init(&ctx);
    if (!out || !base64_decode_update(&ctx, &out_len, (uint8_t *)out, in_len, v + 9) ||
        !base64_decode_final(&ctx) || memchr(out, '\0', out_len)) {
        free(out);
        return NULL;
    }
    out[out_len] = '\0';
    return out;
}

static json_t *mismatch(const json_t *id, unsigned *status, const char *fmt, const char *a,
                        const char *b)
{
    char msg[384];
    snprintf(msg, sizeof(msg), fmt, a, b);
    *status = 400;
    return mcp_http_rpc_error(id, MCP_HTTP_HEADER_MISMATCH, msg, NULL);
}

static json_t *unsupported(const json_t *id, unsigned *status, const char *v)
{
    json_t *supported = json_array();
    for (const char *const *p = legacy_versions; *p; p++)
        json_array_append_new(supported, json_string(*p));
    for (const char *const *p = modern_versions; *p; p++)
        json_array_append_new(supported, json_string(*p));
    json_t *data = json_pack("{s:o,s:s}", "supported", supported, "requested", v);
    *status = 400;
    return mcp_http_rpc_error(id, MCP_HTTP_UNSUPPORTED_VERSION, "Unsupported protocol version",
                              data);
}

/* Where Mcp-Name comes from in the body of method; NULL: it has none. */
static const char *name_field(const char *method)
{
    if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
        return "name";
    if (strcmp(method, "resources/read") == 0)
        return "uri";
    /* the tasks extension's methods; no other "tasks/" method (tasks/result,
     * removed, is answered -32601 like any unknown one, not as a mismatch) */
    if (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/update") == 0 ||
        strcmp(method, "tasks/cancel") == 0)
        return "taskId";
    return NULL;
}

static json_t *check_name(struct MHD_Connection *conn, const json_t *msg, const char *method,
                          bool required, unsigned *status)
{
    const json_t *id = json_object_get(msg, "id");
    const char *hn = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Name");
    const char *field = name_field(method);
    const char *bn =
        field ? json_string_value(json_object_get(json_object_get(msg, "params"), field)) : NULL;
    if (!hn)
        return required && bn
                   ? mismatch(id, status, "Header mismatch: Mcp-Name is missing%s%s", "", "")
                   : NULL;
    if (!header_safe(hn))
        return mismatch(id, status, "Header mismatch: Mcp-Name has characters a header may not%s%s",
                        "", "");
    char *trimmed = field_trimmed(hn);
    char *name = trimmed ? decode_name(trimmed) : NULL;
    free(trimmed);
    if (!name)
        return mismatch(id, status, "Header mismatch: Mcp-Name '%.100s' is not valid base64%s", hn,
                        "");
    json_t *bad = NULL;
    if (!bn || strcmp(name, bn) != 0)
        bad = mismatch(id, status,
                       "Header mismatch: Mcp-Name header value '%.100s' does not match body value "
                       "'%.100s'",
                       name, bn ? bn : "(none)");
    free(name);
    return bad;
}

/* *version: the header's revision, one of ours (NULL: no header). */
static const char *known(const char *v)
{
    for (const char *const *p = legacy_versions; *p; p++)
        if (field_is(v, *p))
            return *p;
    for (const char *const *p = modern_versions; *p; p++)
        if (field_is(v, *p))
            return *p;
    return NULL;
}

json_t *mcp_http_check(struct MHD_Connection *conn, const json_t *msg, const char **version,
                       bool *modern, unsigned *status)
{
    const json_t *id = json_object_get(msg, "id");
    const char *hv = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "MCP-Protocol-Version");
    const char *bv =
        json_string_value(json_object_get(json_object_get(json_object_get(msg, "params"), "_meta"),
                                          "io.modelcontextprotocol/protocolVersion"));
    const char *hm = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Method");
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (bv && !hv)
        return mismatch(id, status,
                        "Header mismatch: MCP-Protocol-Version is missing; the body says "
                        "'%.40s'%s",
                        bv, "");
    if (hv && !header_safe(hv))
        return mismatch(id, status,
                        "Header mismatch: MCP-Protocol-Version has characters a header may "
                        "not%s%s",
                        "", "");
    if (bv && !field_is(hv, bv))
        return mismatch(id, status,
                        "Header mismatch: MCP-Protocol-Version header value '%.40s' does not "
                        "match body value '%.40s'",
                        hv, bv);
    *version = hv ? known(hv) : NULL;
    if (hv && !*version)
        return unsupported(id, status, hv);
    *modern = *version && in(*version, modern_versions);
    bool request = method && id;
    if (hm && !header_safe(hm))
        return mismatch(id, status,
                        "Header mismatch: Mcp-Method has characters a header may not%s%s", "", "");
    if (hm && (!method || !field_is(hm, method)))
        return mismatch(id, status,
                        "Header mismatch: Mcp-Method header value '%.100s' does not match body "
                        "value '%.100s'",
                        hm, method ? method : "(none)");
    if (*modern && request && !hm)
        return mismatch(id, status, "Header mismatch: Mcp-Method is missing%s%s", "", "");
    /* a 2026-07-28 request carries its revision and the client's
     * capabilities; one that does not is refused here, with 400 as that
     * revision wants (server/discover too: a probe sends no header) */
    const json_t *caps = json_object_get(json_object_get(json_object_get(msg, "params"), "_meta"),
                                         "io.modelcontextprotocol/clientCapabilities");
    if (*modern && request && (!bv || !json_is_object(caps))) {
        *status = 400;
        return mcp_http_rpc_error(id, MCP_HTTP_INVALID_PARAMS,
                                  !bv ? "Invalid params: _meta.io.modelcontextprotocol/"
                                        "protocolVersion is required"
                                      : "Invalid params: _meta.io.modelcontextprotocol/"
                                        "clientCapabilities is required (an object)",
                                  NULL);
    }
    return method ? check_name(conn, msg, method, *modern && request, status) : NULL;
}
