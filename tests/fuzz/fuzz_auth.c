/*
 * fuzz_auth - the MCP HTTP front's token and key parsing (daemon/cli/
 * mcp_auth_jwt.c, mcp_auth.c): what a client sends (an Authorization
 * header, a JWT) and what an issuer serves (a JWKS) are both untrusted.
 *
 * Input layout:
 *   [0]   mode, low 2 bits:
 *         0  the rest is a JWKS: parsed; when it imports, a fixed token is
 *            verified against it
 *         1  the rest is a JWT, verified against the fixed JWKS below
 *            (an RSA and an EC P-256 key; the seeds hold tokens they sign)
 *         2  the rest is an Authorization header value: its bearer token,
 *            then a WWW-Authenticate value with the rest as the
 *            description and scope, and the rest as a resource URL
 *         3  the rest is a JWT, its SHA-256 looked up in and put into a
 *            token cache
 *   rest  the bytes
 *
 * Invariants: a valid token yields a subject and at most
 * MCP_AUTH_MAX_SCOPES scopes, none empty; a token longer than
 * MCP_AUTH_MAX_TOKEN is never valid; an error text is NUL-terminated and
 * valid UTF-8; a bearer token lies inside the input; a WWW-Authenticate
 * value holds no control character (it cannot split the header).
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "mcp_auth.h"

static const char jwks[] =
    "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r1\",\"e\":\"AQAB\",\"n\":\"r2pWf4W8RkAKm0Djm5HLwd"
    "WNiPBBtnjvF-P9-k3SFTDyBH4hFwVpLOV6GEz-82TzPWpDNapEI8vnaKKYfh0rfnQwpQUxh1XvlBq1HQMcPRiumG"
    "SKvPLJVa6r6wT_Pg2edpy85x_28Ts4fWgnGqLWVpxWka0s6TzqykKF2guftlRf1bQlqZbALCPnyTeKInRhaZnrkC"
    "5lUr9jFesx2hKQM5ZVmH4-bpbJQafpuOp4_dL9zlrXOT1YOM2YW6_uLUK5swCBCb-YyL3JCjIwKM_-Ps97F4_rdf"
    "CXaXsR1izln2KHZYBplXz_6-W1QwDU2Flb_lLCXzwRHAIh4Wok58Ni5w\"},{\"kty\":\"EC\",\"kid\":\"e1"
    "\",\"crv\":\"P-256\",\"x\":\"SPSUoxLaLHBqZd03gPV76104F-RjiEfwS4f3Tf3-yOQ\",\"y\":\"QkoOP"
    "14yUOtEF7x0qHyiIaP8CtI5OwK3ScwXF_XMW8U\"}]}";

static const char resource[] = "https://mcp.example.com/mcp";
static struct mcp_auth_keys *keys;

static void check_principal(enum mcp_auth_verdict v, const struct mcp_auth_principal *p,
                            const char *err, size_t len)
{
    if (v != MCP_AUTH_VALID) {
        CHECK(memchr(err, 0, 256) != NULL, "error text not terminated");
        CHECK(te_fuzz_valid_utf8(err), "error text not UTF-8: %s", err);
        return;
    }
    CHECK(len <= MCP_AUTH_MAX_TOKEN, "a token of %zu bytes was valid", len);
    CHECK(p->subject && *p->subject, "a valid token without a subject");
    CHECK(p->nscopes <= MCP_AUTH_MAX_SCOPES, "%zu scopes", p->nscopes);
    for (size_t i = 0; i < p->nscopes; i++)
        CHECK(p->scopes[i] && *p->scopes[i], "scope %zu empty", i);
}

static void verify(const struct mcp_auth_keys *k, const char *tok, size_t len)
{
    struct mcp_auth_expect e = {.issuer = "https://auth.example.com",
                                .resource = resource,
                                .now = 1800000000,
                                .skew = MCP_AUTH_SKEW_S};
    struct mcp_auth_principal p;
    char err[256];
    memset(err, 0x55, sizeof(err));
    enum mcp_auth_verdict v = mcp_auth_verify_jwt(k, tok, len, &e, &p, err, sizeof(err));
    check_principal(v, &p, err, len);
    mcp_auth_principal_free(&p);
}

static void headers(const char *s, size_t len)
{
    const char *tok;
    size_t n;
    if (mcp_auth_bearer(s, &tok, &n))
        CHECK(tok >= s && tok + n <= s + len && n > 0, "bearer token outside the input");
    char *w = mcp_auth_www_authenticate(resource, "invalid_token", s, s);
    CHECK(w != NULL, "no WWW-Authenticate value");
    for (const unsigned char *c = (const unsigned char *)w; *c; c++)
        CHECK(*c >= 0x20 && *c != 0x7f, "a control character in the header value");
    free(w);
    char *u = mcp_auth_metadata_url(s);
    if (u)
        CHECK(strstr(u, "/.well-known/oauth-protected-resource") != NULL, "metadata URL %s", u);
    free(u);
}

static void cache(const char *tok, size_t len)
{
    static struct mcp_auth_cache *c;
    if (!c)
        c = mcp_auth_cache_new();
    uint8_t d[MCP_AUTH_DIGEST];
    mcp_auth_sha256(tok, len, d);
    struct mcp_auth_expect e = {.now = 1800000000, .skew = 60};
    struct mcp_auth_principal p = {.subject = (char *)"s", .exp = len % 2 ? 1900000000 : 1};
    struct mcp_auth_principal got;
    if (mcp_auth_cache_get(c, d, 0, &e, &got)) {
        CHECK(strcmp(got.subject, "s") == 0, "the cache gave another subject");
        mcp_auth_principal_free(&got);
    }
    mcp_auth_cache_put(c, d, 0, &p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!keys) {
        char err[256];
        keys = mcp_auth_keys_parse(jwks, strlen(jwks), err, sizeof(err));
        CHECK(keys && mcp_auth_keys_count(keys) == 2, "the fixed JWKS: %s", err);
    }
    if (size < 1)
        return 0;
    char *s = malloc(size); /* NUL-terminated copy of the rest */
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    size_t len = size - 1;
    switch (data[0] & 3) {
    case 0: {
        char err[256];
        struct mcp_auth_keys *k = mcp_auth_keys_parse(s, len, err, sizeof(err));
        if (k) {
            CHECK(mcp_auth_keys_count(k) > 0 && mcp_auth_keys_count(k) <= MCP_AUTH_MAX_KEYS,
                  "%zu keys", mcp_auth_keys_count(k));
            static const char tok[] = "eyJhbGciOiJSUzI1NiIsImtpZCI6InIxIn0.e30.AAAA";
            verify(k, tok, strlen(tok));
        } else
            CHECK(te_fuzz_valid_utf8(err), "error text not UTF-8: %s", err);
        mcp_auth_keys_free(k);
        break;
    }
    case 1:
        verify(keys, s, len);
        break;
    case 2:
        headers(s, strlen(s));
        break;
    case 3:
        cache(s, len);
        break;
    }
    free(s);
    return 0;
}
