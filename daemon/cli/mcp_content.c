/*
 * mcp_content.c - a tool's own MCP content (mcp_int.h): the tools whose
 * definition says "mcp": {"content": "blocks"} (the daemon's listing marks
 * them in _meta), and their ok value, {"content": [blocks],
 * "structuredContent": {...}}, checked strictly and passed through as the
 * tools/call result's content.
 *
 * The daemon keeps its contract: to it the value is data, like any tool's.
 * Only here does it become content, and only once every block is one MCP
 * defines, whole: a value that is not gets an isError result saying what
 * is wrong and where, never a malformed result. Other tools' values go out
 * as before (one text block, the object also as structuredContent).
 *
 * Which tools: mcp_toolinfo.c's listing.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nettle/base64.h>

#include "mcp_int.h"

/* ------------------------------------------------------------------------ */
/* The blocks checked */

struct check {
    char *why;
    size_t len;
};

static int bad(struct check *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct check *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->why, k->len, fmt, ap);
    va_end(ap);
    te_utf8_repair(k->why); /* a key or type cut mid-character goes into JSON */
    return -1;
}

/* Every key of o among the NULL-ended allowed; else says which is not. */
static int keys_only(struct check *k, const char *at, const json_t *o, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        const char *const *a = allowed;
        while (*a && strcmp(*a, key) != 0)
            a++;
        if (!*a) {
            char list[256] = "";
            for (a = allowed; *a; a++)
                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                         a == allowed ? "" : ", ", *a);
            return bad(k, "%s.%.64s: unknown key (%s)", at, key, list);
        }
    }
    return 0;
}

static int string_at(struct check *k, const char *at, const json_t *o, const char *key,
                     bool required, const char **out)
{
    json_t *v = json_object_get(o, key);
    *out = json_string_value(v);
    if (!v && !required)
        return 0;
    if (!v)
        return bad(k, "%s.%s: missing", at, key);
    if (!json_is_string(v))
        return bad(k, "%s.%s: expected a string", at, key);
    if (memchr(*out, '\0', json_string_length(v)))
        return bad(k, "%s.%s: holds a NUL character", at, key);
    return 0;
}

/* RFC 4648 base64, padded, nothing else (nettle's decoder would skip
 * white space); decoded to check it, a piece at a time. */
static int base64_at(struct check *k, const char *at, const json_t *o, const char *key)
{
    const char *s;
    if (string_at(k, at, o, key, true, &s) < 0)
        return -1;
    size_t n = json_string_length(json_object_get(o, key));
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
    /* padding: one or two '=' at the end only (nettle's decoder takes three) */
    const char *pad = memchr(s, '=', n);
    if (n == 0 || n % 4 || strspn(s, alphabet) != n ||
        (pad && (pad < s + n - 2 || strspn(pad, "=") != (size_t)(s + n - pad))))
        return bad(k, "%s.%s: not base64 (RFC 4648, padded, no white space)", at, key);
    struct base64_decode_ctx ctx;
    uint8_t buf[BASE64_DECODE_LENGTH(4096)];
    base64_decode_init(&ctx);
    for (size_t done = 0; done < n; done += 4096) {
        size_t piece = n - done < 4096 ? n - done : 4096, got = sizeof(buf);
        if (!base64_decode_update(&ctx, &got, buf, piece, s + done))
            return bad(k, "%s.%s: not base64 (a character out of place near byte %zu)", at, key,
                       done);
    }
    if (!base64_decode_final(&ctx))
        return bad(k, "%s.%s: not base64 (it ends mid-group)", at, key);
    return 0;
}

/* RFC 6838: type "/" subtype, then any "; parameter"; want: the type the
 * block's kind needs ("image"), NULL: any. */
static bool mime_ok(const char *s, const char *want)
{
    static const char name[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                               "!#$&^_.+-";
    size_t t = strspn(s, name);
    if (t == 0 || s[t] != '/' || (want && (strlen(want) != t || strncasecmp(s, want, t) != 0)))
        return false;
    size_t sub = strspn(s + t + 1, name);
    const char *p = s + t + 1 + sub;
    if (sub == 0 || (*p && *p != ';') || strlen(s) > 255)
        return false;
    for (; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            return false;
    return true;
}

static int mime_at(struct check *k, const char *at, const json_t *o, bool required,
                   const char *want)
{
    const char *s;
    if (string_at(k, at, o, "mimeType", required, &s) < 0)
        return -1;
    if (s && !mime_ok(s, want))
        return bad(k, "%s.mimeType: expected a media type%s%s (\"type/subtype\", RFC 6838)", at,
                   want ? " of " : "", want ? want : "");
    return 0;
}

/* RFC 3986: a scheme, then no control character or space. */
static int uri_at(struct check *k, const char *at, const json_t *o)
{
    const char *s;
    if (string_at(k, at, o, "uri", true, &s) < 0)
        return -1;
    size_t i = 0;
    bool ok = (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z');
    while (ok && s[++i] && s[i] != ':')
        ok = strchr("+-.", s[i]) || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
             (s[i] >= '0' && s[i] <= '9');
    ok = ok && s[i] == ':';
    for (const unsigned char *p = (const unsigned char *)s; ok && *p; p++)
        ok = *p > 0x20 && *p != 0x7f;
    return ok ? 0 : bad(k, "%s.uri: expected an absolute URI (a scheme, no space)", at);
}

static int meta_at(struct check *k, const char *at, const json_t *o)
{
    json_t *v = json_object_get(o, "_meta");
    return !v || json_is_object(v) ? 0 : bad(k, "%s._meta: expected an object", at);
}

/* MCP's Annotations: audience, priority, lastModified. */
static int annotations_at(struct check *k, const char *at, const json_t *o)
{
    static const char *const keys[] = {"audience", "priority", "lastModified", NULL};
    json_t *a = json_object_get(o, "annotations"), *v;
    if (!a)
        return 0;
    if (!json_is_object(a))
        return bad(k, "%s.annotations: expected an object", at);
    char here[128];
    snprintf(here, sizeof(here), "%s.annotations", at);
    if (keys_only(k, here, a, keys) < 0)
        return -1;
    json_t *aud = json_object_get(a, "audience");
    size_t i;
    if (aud && !json_is_array(aud))
        return bad(k, "%s.audience: expected an array of \"user\" or \"assistant\"", here);
    json_array_foreach(aud, i, v)
    {
        const char *r = json_string_value(v);
        if (!r || (strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0))
            return bad(k, "%s.audience[%zu]: expected \"user\" or \"assistant\"", here, i);
    }
    v = json_object_get(a, "priority");
    if (v && (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1))
        return bad(k, "%s.priority: expected a number from 0 to 1", here);
    const char *s;
    return string_at(k, here, a, "lastModified", false, &s);
}

static int resource_at(struct check *k, const char *at, const json_t *b)
{
    static const char *const keys[] = {"uri", "mimeType", "text", "blob", "_meta", NULL};
    json_t *r = json_object_get(b, "resource");
    char here[96];
    snprintf(here, sizeof(here), "%s.resource", at);
    if (!json_is_object(r))
        return bad(k, "%s: %s", here, r ? "expected an object" : "missing");
    if (keys_only(k, here, r, keys) < 0 || uri_at(k, here, r) < 0 ||
        mime_at(k, here, r, true, NULL) < 0 || meta_at(k, here, r) < 0)
        return -1;
    bool text = json_object_get(r, "text"), blob = json_object_get(r, "blob");
    const char *s;
    if (text == blob)
        return bad(k, "%s: expected either \"text\" or \"blob\"", here);
    return text ? string_at(k, here, r, "text", true, &s) : base64_at(k, here, r, "blob");
}

static int link_at(struct check *k, const char *at, const json_t *b)
{
    const char *s;
    if (uri_at(k, at, b) < 0 || string_at(k, at, b, "name", true, &s) < 0 ||
        string_at(k, at, b, "title", false, &s) < 0 ||
        string_at(k, at, b, "description", false, &s) < 0 || mime_at(k, at, b, false, NULL) < 0)
        return -1;
    json_t *size = json_object_get(b, "size");
    if (size && (!json_is_integer(size) || json_integer_value(size) < 0))
        return bad(k, "%s.size: expected a non-negative integer", at);
    return 0;
}

/* One block, by its type: its keys, each checked. */
static int block_at(struct check *k, size_t i, const json_t *b)
{
    static const char *const text_keys[] = {"type", "text", "annotations", "_meta", NULL};
    static const char *const media_keys[] = {"type",        "data",  "mimeType",
                                             "annotations", "_meta", NULL};
    static const char *const link_keys[] = {"type",        "uri",      "name", "title",
                                            "description", "mimeType", "size", "annotations",
                                            "_meta",       NULL};
    static const char *const res_keys[] = {"type", "resource", "annotations", "_meta", NULL};
    char at[48];
    snprintf(at, sizeof(at), "content[%zu]", i);
    if (!json_is_object(b))
        return bad(k, "%s: expected an object (a content block)", at);
    const char *type = json_string_value(json_object_get(b, "type")), *s;
    if (!type)
        return bad(k,
                   "%s.type: expected \"text\", \"image\", \"audio\", \"resource_link\" or "
                   "\"resource\"",
                   at);
    if (annotations_at(k, at, b) < 0 || meta_at(k, at, b) < 0)
        return -1;
    if (strcmp(type, "text") == 0)
        return keys_only(k, at, b, text_keys) < 0 ? -1 : string_at(k, at, b, "text", true, &s);
    if (strcmp(type, "image") == 0 || strcmp(type, "audio") == 0)
        return keys_only(k, at, b, media_keys) < 0 || base64_at(k, at, b, "data") < 0
                   ? -1
                   : mime_at(k, at, b, true, type);
    if (strcmp(type, "resource_link") == 0)
        return keys_only(k, at, b, link_keys) < 0 ? -1 : link_at(k, at, b);
    if (strcmp(type, "resource") == 0)
        return keys_only(k, at, b, res_keys) < 0 ? -1 : resource_at(k, at, b);
    return bad(k,
               "%s.type: \"%.32s\" is not a content block's type (text, image, audio, "
               "resource_link, resource)",
               at, type);
}

int mcp_content_check(const json_t *ok, char *why, size_t whylen)
{
    static const char *const keys[] = {"content", "structuredContent", NULL};
    struct check k = {why, whylen};
    if (!json_is_object(ok))
        return bad(&k, "the value is not an object ({\"content\": [...]})");
    /* the bound first: nothing of a value over it is decoded */
    size_t size = json_dumpb(ok, NULL, 0, JSON_COMPACT);
    if (size > MCP_CONTENT_MAX_BYTES)
        return bad(&k, "the value is %zu bytes of JSON, over the %u that content may be", size,
                   MCP_CONTENT_MAX_BYTES);
    if (keys_only(&k, "the value", ok, keys) < 0)
        return -1;
    json_t *content = json_object_get(ok, "content"),
           *sc = json_object_get(ok, "structuredContent");
    if (!json_is_array(content))
        return bad(&k, "content: %s", content ? "expected an array of blocks" : "missing");
    if (json_array_size(content) > MCP_CONTENT_MAX_BLOCKS)
        return bad(&k, "content: %zu blocks, over the %u a result may have",
                   json_array_size(content), MCP_CONTENT_MAX_BLOCKS);
    if (sc && !json_is_object(sc))
        return bad(&k, "structuredContent: expected an object");
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) if (block_at(&k, i, b) < 0) return -1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The result */

void mcp_put_blocks_result(struct mcp *m, const struct mcp_reqctx *req, const json_t *ok,
                           const json_t *denied)
{
    char why[512];
    if (mcp_content_check(ok, why, sizeof(why)) < 0) {
        char text[700];
        snprintf(text, sizeof(text),
                 "[toolexec] The tool's result is not MCP content, which its definition "
                 "(\"mcp\": {\"content\": \"blocks\"}) says it returns: %s.",
                 why);
        mcp_put_call_result_denied(m, req, text, true, NULL, denied);
        return;
    }
    json_t *content = json_deep_copy(json_object_get(ok, "content"));
    json_t *r = json_pack("{s:o,s:b}", "content", content, "isError", 0);
    char *said = json_array_size(denied) ? mcp_denials_text("", denied) : NULL;
    if (r && said)
        json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", said));
    free(said);
    if (r && json_object_get(ok, "structuredContent"))
        json_object_set(r, "structuredContent", json_object_get(ok, "structuredContent"));
    if (r && json_array_size(denied))
        json_object_set_new(r, "_meta", json_pack("{s:O}", MCP_META_DENIED, (json_t *)denied));
    if (!r) {
        mcp_put_error(m, req, RPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    mcp_put_result(m, req, r);
}
