/*
 * mcp_auth.c - what the front says about authorization, with no I/O
 * (mcp_auth.h): the protected-resource metadata (RFC 9728) and where it
 * lives, the WWW-Authenticate values (RFC 6750, RFC 9728), the bearer
 * token of an Authorization header, and a tool's scopes against a
 * principal's.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nettle/memops.h>
#include <nettle/sha2.h>

#include "mcp_auth.h"

/* Where the origin of an absolute http(s) URL ends (its path begins);
 * 0 when it is not one, or has a query or fragment (RFC 9728 section 1.2
 * and RFC 8707 section 2 forbid a fragment; a query has no place in a
 * metadata URL made by insertion). */
static size_t origin_len(const char *url)
{
    size_t s;
    if (strncasecmp(url, "https://", 8) == 0)
        s = 8;
    else if (strncasecmp(url, "http://", 7) == 0)
        s = 7;
    else
        return 0;
    if (strpbrk(url, "?#") || strchr(url + s, '@'))
        return 0;
    size_t host = strcspn(url + s, "/");
    return host ? s + host : 0;
}

char *mcp_auth_well_known(const char *url, const char *name)
{
    size_t o = url ? origin_len(url) : 0;
    if (!o)
        return NULL;
    const char *path = url + o;
    if (strcmp(path, "/") == 0)
        path = ""; /* "https://h/" and "https://h" have one metadata URL */
    char *out;
    if (asprintf(&out, "%.*s/.well-known/%s%s", (int)o, url, name, path) < 0)
        return NULL;
    return out;
}

char *mcp_auth_metadata_url(const char *resource)
{
    return mcp_auth_well_known(resource, "oauth-protected-resource");
}

char *mcp_auth_prm_render(const char *resource, const char *issuer, const char *const *scopes,
                          size_t nscopes)
{
    json_t *d = json_pack("{s:s, s:[], s:[s]}", "resource", resource, "authorization_servers",
                          "bearer_methods_supported", "header");
    if (!d)
        return NULL;
    if (issuer)
        json_array_append_new(json_object_get(d, "authorization_servers"), json_string(issuer));
    if (nscopes) {
        json_t *a = json_array();
        for (size_t i = 0; i < nscopes; i++)
            json_array_append_new(a, json_string(scopes[i]));
        json_object_set_new(d, "scopes_supported", a);
    }
    char *out = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    return out;
}

/* value as a quoted-string of the characters RFC 6750 section 3 allows in
 * its attributes (%x20-21 / %x23-5B / %x5D-7E): others, which could break
 * the quoting or split the header, are left out. */
static void put_quoted(FILE *f, const char *value)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)value; *p; p++)
        if (*p >= 0x20 && *p <= 0x7e && *p != '"' && *p != '\\')
            fputc(*p, f);
    fputc('"', f);
}

char *mcp_auth_www_authenticate(const char *resource, const char *error, const char *description,
                                const char *scope)
{
    char *url = mcp_auth_metadata_url(resource), *out = NULL;
    size_t len;
    if (!url)
        return NULL;
    FILE *f = open_memstream(&out, &len);
    if (!f) {
        free(url);
        return NULL;
    }
    fputs("Bearer resource_metadata=", f);
    put_quoted(f, url);
    if (error) {
        fputs(", error=", f);
        put_quoted(f, error);
        if (description && *description) {
            fputs(", error_description=", f);
            put_quoted(f, description);
        }
    }
    if (scope) {
        fputs(", scope=", f);
        put_quoted(f, scope);
    }
    free(url);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* RFC 6750 section 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" /
 * "~" / "+" / "/" ) *"=" */
bool mcp_auth_bearer(const char *value, const char **tok, size_t *len)
{
    if (!value || strncasecmp(value, "Bearer ", 7) != 0)
        return false;
    const char *t = value + 7;
    t += strspn(t, " ");
    size_t n = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/");
    size_t pad = strspn(t + n, "=");
    if (n == 0 || t[n + pad + strspn(t + n + pad, " \t")] != '\0')
        return false;
    *tok = t;
    *len = n + pad;
    return true;
}

const json_t *mcp_auth_tool_scopes(const json_t *tool)
{
    const json_t *s = json_object_get(json_object_get(tool, "_meta"), MCP_AUTH_META_SCOPES);
    return json_is_array(s) ? s : NULL;
}

bool mcp_auth_scope_ok(const struct mcp_auth_principal *p, const json_t *scopes)
{
    if (json_array_size(scopes) == 0 || p->all_scopes)
        return true;
    size_t i;
    const json_t *v;
    json_array_foreach(scopes, i, v)
    {
        for (size_t j = 0; json_is_string(v) && j < p->nscopes; j++)
            if (strcmp(json_string_value(v), p->scopes[j]) == 0)
                return true;
    }
    return false;
}

void mcp_auth_sha256(const char *s, size_t len, uint8_t digest[MCP_AUTH_DIGEST])
{
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, len, (const uint8_t *)s);
    sha256_digest(&c, MCP_AUTH_DIGEST, digest);
}

bool mcp_auth_token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    uint8_t da[MCP_AUTH_DIGEST], db[MCP_AUTH_DIGEST];
    mcp_auth_sha256(a, alen, da);
    mcp_auth_sha256(b, blen, db);
    return memeql_sec(da, db, MCP_AUTH_DIGEST) != 0;
}
