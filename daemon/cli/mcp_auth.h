/*
 * mcp_auth.h - the MCP HTTP front as an OAuth 2.1 resource server: who may
 * call (bearer tokens: JWTs from one issuer, or static tokens), and what
 * the front answers when someone may not.
 *
 * The MCP authorization spec (2025-11-25 and 2026-07-28) asks the server to
 * publish RFC 9728 protected-resource metadata (PRM), to accept only tokens
 * issued for it (RFC 8707: "aud" names this resource), to answer 401 with
 * WWW-Authenticate: Bearer resource_metadata="..." when the token is
 * missing or invalid, and 403 error="insufficient_scope" when the token
 * lacks a scope the request needs.
 *
 *   mcp_auth_jwt.c    pure (no I/O): a JWKS imported, a JWT verified
 *                     against it (signature by cjose, alg allow-list, key
 *                     type, "iss", "aud", "exp", "nbf", "sub"), its scopes
 *   mcp_auth.c        pure: the PRM document, the metadata URL, the
 *                     WWW-Authenticate values, the Authorization header,
 *                     a tool's scopes checked against a principal's
 *   mcp_auth_cache.c  pure: tokens verified already, so a client's token
 *                     is checked once, not at each request
 *   mcp_auth_fetch.c  I/O: one bounded HTTP(S) GET (gnutls, http-parser)
 *   mcp_auth_keys.c   I/O: the issuer's metadata and JWKS fetched, cached,
 *                     refreshed on an unknown "kid" (rate-limited) and when
 *                     old; the static tokens read; the one entry point
 *                     the front calls per request, mcp_auth_authenticate()
 *
 * How the front uses it:
 *
 *   struct mcp_auth_cfg cfg = {.resource = "https://mcp.example.com/mcp",
 *                              .issuer = "https://auth.example.com",
 *                              .tokens_dir = NULL};
 *   struct mcp_auth *a = mcp_auth_open(&cfg, err, sizeof(err)); // blocks: start-up fetch
 *   GET mcp_auth_prm_path(a)  -> 200, mcp_auth_prm_json(a)
 *   any MCP request:
 *     struct mcp_auth_result r;
 *     mcp_auth_authenticate(a, authorization_header_or_NULL, &r);
 *     if (r.http_status) -> answer r.http_status with
 *                          "WWW-Authenticate: " r.www_authenticate
 *   tools/call of tool T (its declaration from tools/list):
 *     mcp_auth_authorize(a, &r, mcp_auth_tool_scopes(T_declaration), &r);
 *     if (r.http_status) -> 403 and r.www_authenticate
 *   mcp_auth_result_free(&r); ... mcp_auth_close(a);
 *
 * mcp_auth_authenticate() is thread-safe. A token seen before (and not
 * expired, its keys unchanged) costs a SHA-256 and a look-up; a new one a
 * signature check against keys held in memory; only a token whose "kid" is not among
 * them, or keys older than cfg.max_age_s, make it fetch the JWKS, in the
 * calling thread, bounded by cfg.timeout_ms, at most once per
 * cfg.refresh_min_s (other threads meanwhile use the keys they have).
 * Call it from a request handler's thread, not from a loop that must not
 * stall; a loop calls mcp_auth_authenticate_nowait() and hands a token it
 * cannot judge yet to a thread.
 */
#ifndef MCP_AUTH_H
#define MCP_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* ------------------------------------------------------------------------ */
/* Pure parts: mcp_auth_jwt.c */

/* A JSON Web Key Set imported for verification: immutable once made. */
struct mcp_auth_keys;

#define MCP_AUTH_MAX_KEYS 64     /* keys kept from one JWKS */
#define MCP_AUTH_MAX_TOKEN 16384 /* bytes in a token */
#define MCP_AUTH_MAX_SCOPES 64   /* scopes kept from one token */
#define MCP_AUTH_SKEW_S 60       /* leeway on "exp" and "nbf" */

/* The JWKS document (its JSON text) imported: the signing keys it has
 * (RSA of 2048 bits or more, EC P-256/384/521) whose "use" is "sig" or
 * absent. Others (symmetric, encryption, unknown types) are skipped. NULL
 * with why in err when it is not a JWKS or has no usable key. */
struct mcp_auth_keys *mcp_auth_keys_parse(const char *json, size_t len, char *err, size_t errlen);
void mcp_auth_keys_free(struct mcp_auth_keys *k);
size_t mcp_auth_keys_count(const struct mcp_auth_keys *k);

/* What a valid token says. */
struct mcp_auth_principal {
    char *subject; /* "sub"; a static token's file name */
    char **scopes; /* from "scope" (space separated) or "scp" (array or string) */
    size_t nscopes;
    bool all_scopes; /* a static token: every scope */
    long long exp;   /* "exp"; 0: a static token */
};
void mcp_auth_principal_free(struct mcp_auth_principal *p);

enum mcp_auth_verdict {
    MCP_AUTH_VALID = 0,
    MCP_AUTH_INVALID = 1,     /* not a token this server accepts */
    MCP_AUTH_UNKNOWN_KID = 2, /* its "kid" is none of the keys': refresh them, try again */
};

/* What a token must be: signed by one of the keys with an algorithm of
 * the allow-list (RS256/384/512, PS256/384/512, ES256/384/512; never
 * "none", never HMAC), "iss" equal to issuer, "aud" equal to resource (or
 * an array holding it), "exp" after now - skew, "nbf" (if any) before
 * now + skew, "sub" a non-empty string. */
struct mcp_auth_expect {
    const char *issuer, *resource;
    long long now;  /* seconds since the epoch */
    long long skew; /* seconds; 0: none */
};

/* Verify token (len bytes, not NUL-terminated) against keys. VALID fills
 * *p (free it with mcp_auth_principal_free); else why in err, for the log
 * and the error_description (never the token itself). */
enum mcp_auth_verdict mcp_auth_verify_jwt(const struct mcp_auth_keys *keys, const char *token,
                                          size_t len, const struct mcp_auth_expect *e,
                                          struct mcp_auth_principal *p, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* Pure parts: mcp_auth.c */

/* resource's RFC 9728 metadata URL: "/.well-known/oauth-protected-resource"
 * between its origin and its path ("https://h/mcp" ->
 * "https://h/.well-known/oauth-protected-resource/mcp"). NULL when resource
 * is not an absolute http(s) URL without query or fragment. The path the
 * front serves it on is what follows the origin. malloc'd. */
char *mcp_auth_metadata_url(const char *resource);
/* The same for any well-known name (RFC 8615, inserted as RFC 8414
 * section 3.1 and RFC 9728 section 3.1 do): "oauth-authorization-server",
 * "openid-configuration". */
char *mcp_auth_well_known(const char *url, const char *name);

/* The PRM document (RFC 9728 section 2): resource, authorization_servers
 * (the issuer; none for static tokens only), scopes_supported (when
 * nscopes), bearer_methods_supported ["header"]. malloc'd JSON text. */
char *mcp_auth_prm_render(const char *resource, const char *issuer, const char *const *scopes,
                          size_t nscopes);

/* A WWW-Authenticate value (RFC 6750 section 3, RFC 9728 section 5.1):
 * Bearer resource_metadata="<metadata URL>", then error="<error>" and
 * error_description when error is not NULL, then scope="<scope>" when not
 * NULL. Characters RFC 6750 does not allow in them (quotes, backslashes,
 * controls, non-ASCII) are left out. malloc'd; NULL on a bad resource. */
char *mcp_auth_www_authenticate(const char *resource, const char *error, const char *description,
                                const char *scope);

/* The token of an Authorization header value ("Bearer <token>", scheme in
 * any case, RFC 6750 section 2.1): *tok points into value. false when it
 * is not a bearer token of b64token characters. */
bool mcp_auth_bearer(const char *value, const char **tok, size_t *len);

/* A tool declaration's scopes, as tools/list (format "mcp") gives them:
 * its "_meta" {"toolexecd/scopes": [...]}; NULL: the tool names none. */
const json_t *mcp_auth_tool_scopes(const json_t *tool);
#define MCP_AUTH_META_SCOPES "toolexecd/scopes"

/* May p call a tool whose definition names scopes (NULL or empty: any
 * valid token may)? It needs one of them. */
bool mcp_auth_scope_ok(const struct mcp_auth_principal *p, const json_t *scopes);

/* Constant-time: do two strings hold the same bytes? Both are hashed
 * first, so neither length nor content shows in the time it takes. */
bool mcp_auth_token_equal(const char *a, size_t alen, const char *b, size_t blen);
#define MCP_AUTH_DIGEST 32 /* SHA-256 */
void mcp_auth_sha256(const char *s, size_t len, uint8_t digest[MCP_AUTH_DIGEST]);

/* ------------------------------------------------------------------------ */
/* Pure parts: mcp_auth_cache.c, tokens verified already, by their SHA-256
 * (not thread-safe: its caller locks). gen: the key set's generation. */
struct mcp_auth_cache;
struct mcp_auth_cache *mcp_auth_cache_new(void);
void mcp_auth_cache_free(struct mcp_auth_cache *c);
/* A copy of the principal of a token verified with keys of generation gen
 * and, by e's time, not expired yet. */
bool mcp_auth_cache_get(struct mcp_auth_cache *c, const uint8_t digest[MCP_AUTH_DIGEST],
                        unsigned gen, const struct mcp_auth_expect *e,
                        struct mcp_auth_principal *p);
void mcp_auth_cache_put(struct mcp_auth_cache *c, const uint8_t digest[MCP_AUTH_DIGEST],
                        unsigned gen, const struct mcp_auth_principal *p);

/* ------------------------------------------------------------------------ */
/* I/O: mcp_auth_fetch.c */

/* GET url: https (system trust, or ca_file when not NULL; certificate and
 * host name checked) or http to a loopback address only. Status 200 and at
 * most max bytes of body, all within timeout_ms, redirects not followed.
 * 0 with *body (malloc'd, NUL-terminated) and *len, or -1 with why. */
int mcp_auth_fetch(const char *url, const char *ca_file, long timeout_ms, size_t max, char **body,
                   size_t *len, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* I/O: mcp_auth_keys.c, the front's entry points */

struct mcp_auth_cfg {
    const char *resource;                /* --resource: canonical URI of this server (required) */
    const char *issuer;                  /* --oauth-issuer; NULL: static tokens only */
    const char *tokens_dir;              /* --bearer-tokens; NULL: none */
    const char *ca_file;                 /* trust for the issuer's HTTPS; NULL: the system's */
    const char *const *scopes_supported; /* for the PRM; may be NULL */
    size_t nscopes_supported;
    long timeout_ms;    /* one fetch; 0: 5000 */
    size_t max_bytes;   /* one document; 0: 256 KiB */
    long refresh_min_s; /* at most one JWKS fetch per this many s; 0: 30 (< 0: no limit) */
    long max_age_s;     /* keys this old are fetched again; 0: 3600 */
};
struct mcp_auth;

/* Check cfg, read the static tokens (one file per token in tokens_dir:
 * the file's name is the subject, its one line the token; each file the
 * daemon's credentials' rules, see credentials.c), and with an issuer
 * fetch its metadata (RFC 8414 / OpenID discovery, "issuer" must match)
 * and the JWKS it names. Blocks for the fetches. NULL with why in err. */
struct mcp_auth *mcp_auth_open(const struct mcp_auth_cfg *cfg, char *err, size_t errlen);
void mcp_auth_close(struct mcp_auth *a);

/* The PRM document, the URL it is served at and that URL's path, which
 * the front answers GET on with 200, Content-Type: application/json
 * (owned by a). */
const char *mcp_auth_prm_json(const struct mcp_auth *a);
const char *mcp_auth_prm_url(const struct mcp_auth *a);
const char *mcp_auth_prm_path(const struct mcp_auth *a);

/* An outcome for the HTTP layer. http_status 0: go on (principal filled
 * in); else answer it (401 or 403) with header WWW-Authenticate:
 * www_authenticate. error_description is for the body or the log. */
struct mcp_auth_result {
    int http_status;
    char *www_authenticate;
    char error_description[256];
    struct mcp_auth_principal principal;
};
void mcp_auth_result_free(struct mcp_auth_result *r);

/* authorization: the Authorization header's value, NULL when absent. No
 * token: 401 without error=; a token that is not valid: 401
 * error="invalid_token"; both with scope="<cfg.scopes_supported>" when
 * there are some. A static token is tried first, then a JWT. */
void mcp_auth_authenticate(struct mcp_auth *a, const char *authorization,
                           struct mcp_auth_result *r);
/* The same without waiting for the issuer: false when the token needs
 * the JWKS fetched first (its "kid" is unknown, or the keys are old, and
 * a refresh is due or under way); r is then empty, and the caller asks
 * mcp_auth_authenticate() from a thread that may wait. A token whose
 * refresh the rate limit refuses is judged at once, on the keys in hand.
 * What a poll loop calls. */
bool mcp_auth_authenticate_nowait(struct mcp_auth *a, const char *authorization,
                                  struct mcp_auth_result *r);
/* After a successful authenticate: may its principal call a tool with
 * these scopes (mcp_auth_tool_scopes)? No: r becomes 403
 * error="insufficient_scope" scope="<the tool's scopes>". */
void mcp_auth_authorize(const struct mcp_auth *a, const json_t *scopes, struct mcp_auth_result *r);

/* Counts, for tests and stats. */
struct mcp_auth_counts {
    unsigned fetches;    /* JWKS fetches after the first */
    unsigned limited;    /* refreshes the rate limit refused */
    unsigned cache_hits; /* tokens found verified already */
};
void mcp_auth_counts(const struct mcp_auth *a, struct mcp_auth_counts *n);

#endif
