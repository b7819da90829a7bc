/* Unit tests of the MCP HTTP front's authorization (daemon/cli/mcp_auth*.c):
 * JWTs signed with keys made here, judged against the JWKS; the issuer's
 * metadata and keys served by a small HTTP server on the loopback (a thread
 * of this test), rotated to exercise the refresh on an unknown "kid" and
 * its rate limit; static tokens read from a directory; the PRM document and
 * the WWW-Authenticate values. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "jwt_forge.h"
#include "loopback_server.h"
#include "mcp_auth.h"

#define AUD "https://mcp.example.com/mcp"
#define ISS "https://auth.example.com"

static cjose_jwk_t *rsa_a, *rsa_b, *ec_c;

static int setup_keys(void **state)
{
    (void)state;
    rsa_a = forge_key(2048, "a");
    rsa_b = forge_key(2048, "b");
    ec_c = forge_key(0, "c");
    return 0;
}

static int teardown_keys(void **state)
{
    (void)state;
    cjose_jwk_release(rsa_a);
    cjose_jwk_release(rsa_b);
    cjose_jwk_release(ec_c);
    return 0;
}

static struct mcp_auth_keys *jwks_of(cjose_jwk_t *const *keys, size_t n)
{
    char *text = forge_jwks(keys, n), err[256];
    struct mcp_auth_keys *k = mcp_auth_keys_parse(text, strlen(text), err, sizeof(err));
    free(text);
    assert_non_null(k);
    return k;
}

/* The verdict on a token signed by key (alg, kid) for these claims. */
static enum mcp_auth_verdict judge(const struct mcp_auth_keys *k, const cjose_jwk_t *key,
                                   const char *alg, const char *kid, const char *claims, char *err,
                                   size_t errlen, struct mcp_auth_principal *p)
{
    char *tok = forge_token(key, alg, kid, claims);
    struct mcp_auth_expect e = {
        .issuer = ISS, .resource = AUD, .now = time(NULL), .skew = MCP_AUTH_SKEW_S};
    enum mcp_auth_verdict v = mcp_auth_verify_jwt(k, tok, strlen(tok), &e, p, err, errlen);
    free(tok);
    return v;
}

static enum mcp_auth_verdict judge_claims(const struct mcp_auth_keys *k, const char *iss,
                                          const char *aud, long long nbf, long long exp, char *err,
                                          size_t errlen)
{
    char *c = forge_claims(iss, aud, nbf, exp, "files:read");
    struct mcp_auth_principal p;
    enum mcp_auth_verdict v = judge(k, rsa_a, "RS256", "a", c, err, errlen, &p);
    mcp_auth_principal_free(&p);
    free(c);
    return v;
}

static void test_valid_tokens(void **state)
{
    (void)state;
    cjose_jwk_t *keys[] = {rsa_a, ec_c};
    struct mcp_auth_keys *k = jwks_of(keys, 2);
    assert_int_equal(mcp_auth_keys_count(k), 2);
    long long now = time(NULL);
    char *c = forge_claims(ISS, AUD, now - 10, now + 600, "files:read  tools:call");
    char err[256];
    struct mcp_auth_principal p;
    assert_int_equal(judge(k, rsa_a, "RS256", "a", c, err, sizeof(err), &p), MCP_AUTH_VALID);
    assert_string_equal(p.subject, "alice");
    assert_int_equal(p.nscopes, 2);
    assert_string_equal(p.scopes[0], "files:read");
    assert_string_equal(p.scopes[1], "tools:call");
    assert_int_equal(p.exp, now + 600);
    mcp_auth_principal_free(&p);
    assert_int_equal(judge(k, rsa_a, "PS256", "a", c, err, sizeof(err), &p), MCP_AUTH_VALID);
    mcp_auth_principal_free(&p);
    assert_int_equal(judge(k, ec_c, "ES256", "c", c, err, sizeof(err), &p), MCP_AUTH_VALID);
    mcp_auth_principal_free(&p);
    /* no kid: every key of the algorithm's type is tried */
    assert_int_equal(judge(k, ec_c, "ES256", NULL, c, err, sizeof(err), &p), MCP_AUTH_VALID);
    mcp_auth_principal_free(&p);
    free(c);
    /* "aud" an array that holds the resource; "scp" an array */
    c = "{\"iss\":\"" ISS "\",\"aud\":[\"other\",\"" AUD "\"],\"sub\":\"bob\",\"exp\":9999999999,"
        "\"scp\":[\"x\",\"y\"]}";
    assert_int_equal(judge(k, rsa_a, "RS256", "a", c, err, sizeof(err), &p), MCP_AUTH_VALID);
    assert_int_equal(p.nscopes, 2);
    assert_string_equal(p.scopes[1], "y");
    mcp_auth_principal_free(&p);
    mcp_auth_keys_free(k);
}

static void test_time_claims(void **state)
{
    (void)state;
    cjose_jwk_t *keys[] = {rsa_a};
    struct mcp_auth_keys *k = jwks_of(keys, 1);
    long long now = time(NULL);
    char err[256];
    assert_int_equal(judge_claims(k, ISS, AUD, now - 3600, now - 120, err, sizeof(err)),
                     MCP_AUTH_INVALID);
    assert_string_equal(err, "the token has expired");
    /* within the skew: still valid */
    assert_int_equal(judge_claims(k, ISS, AUD, now - 3600, now - 30, err, sizeof(err)),
                     MCP_AUTH_VALID);
    assert_int_equal(judge_claims(k, ISS, AUD, now + 120, now + 3600, err, sizeof(err)),
                     MCP_AUTH_INVALID);
    assert_string_equal(err, "the token is not valid yet (\"nbf\")");
    assert_int_equal(judge_claims(k, ISS, AUD, now + 30, now + 3600, err, sizeof(err)),
                     MCP_AUTH_VALID);
    /* no "exp" at all */
    struct mcp_auth_principal p;
    assert_int_equal(judge(k, rsa_a, "RS256", "a",
                           "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"sub\":\"x\"}", err,
                           sizeof(err), &p),
                     MCP_AUTH_INVALID);
    assert_string_equal(err, "the token has no expiry (\"exp\")");
    mcp_auth_keys_free(k);
}

static void test_wrong_audience_and_issuer(void **state)
{
    (void)state;
    cjose_jwk_t *keys[] = {rsa_a};
    struct mcp_auth_keys *k = jwks_of(keys, 1);
    long long now = time(NULL);
    char err[256];
    assert_int_equal(
        judge_claims(k, ISS, "https://mcp.example.com/other", now, now + 600, err, sizeof(err)),
        MCP_AUTH_INVALID);
    assert_non_null(strstr(err, "not for this resource"));
    /* a prefix of the resource is not the resource */
    assert_int_equal(
        judge_claims(k, ISS, "https://mcp.example.com", now, now + 600, err, sizeof(err)),
        MCP_AUTH_INVALID);
    assert_int_equal(
        judge_claims(k, "https://evil.example.com", AUD, now, now + 600, err, sizeof(err)),
        MCP_AUTH_INVALID);
    assert_non_null(strstr(err, "not issued by"));
    mcp_auth_keys_free(k);
}

static char *b64url(const char *s)
{
    char *out;
    size_t n;
    cjose_err ce;
    assert_true(cjose_base64url_encode((const uint8_t *)s, strlen(s), &out, &n, &ce));
    return out;
}

/* A token of alg "none" (empty or made-up signature), and HS256 keyed with
 * the RSA public key's JWK text: the two classic forgeries. */
static void test_forged_algorithms(void **state)
{
    (void)state;
    cjose_jwk_t *keys[] = {rsa_a};
    struct mcp_auth_keys *k = jwks_of(keys, 1);
    long long now = time(NULL);
    char *c = forge_claims(ISS, AUD, now, now + 600, NULL), err[256], tok[4096];
    char *h = b64url("{\"alg\":\"none\",\"kid\":\"a\"}"), *b = b64url(c);
    struct mcp_auth_expect e = {.issuer = ISS, .resource = AUD, .now = now, .skew = 60};
    struct mcp_auth_principal p;
    snprintf(tok, sizeof(tok), "%s.%s.", h, b);
    assert_int_equal(mcp_auth_verify_jwt(k, tok, strlen(tok), &e, &p, err, sizeof(err)),
                     MCP_AUTH_INVALID);
    snprintf(tok, sizeof(tok), "%s.%s.AAAA", h, b);
    assert_int_equal(mcp_auth_verify_jwt(k, tok, strlen(tok), &e, &p, err, sizeof(err)),
                     MCP_AUTH_INVALID);
    assert_string_equal(err, "the algorithm \"none\" is not accepted");
    free(h);

    cjose_err ce;
    char *pub = cjose_jwk_to_json(rsa_a, false, &ce);
    cjose_jwk_t *hmac = cjose_jwk_create_oct_spec((const uint8_t *)pub, strlen(pub), &ce);
    assert_non_null(hmac);
    assert_int_equal(judge(k, hmac, "HS256", "a", c, err, sizeof(err), &p), MCP_AUTH_INVALID);
    assert_string_equal(err, "the algorithm \"HS256\" is not accepted");
    cjose_jwk_release(hmac);
    free(pub);

    /* the right algorithm family, the wrong key: an ES256 token naming the
     * RSA key's kid finds no key of its type, so no verification happens */
    assert_int_equal(judge(k, ec_c, "ES256", "a", c, err, sizeof(err), &p), MCP_AUTH_UNKNOWN_KID);
    /* a token signed by another RSA key under kid "a" */
    assert_int_equal(judge(k, rsa_b, "RS256", "a", c, err, sizeof(err), &p), MCP_AUTH_INVALID);
    assert_string_equal(err, "the token's signature does not verify");
    /* the payload changed after signing */
    char *good = forge_token(rsa_a, "RS256", "a", c);
    char *other = forge_claims(ISS, AUD, now, now + 99999, NULL), *ob = b64url(other);
    char *dot1 = strchr(good, '.'), *dot2 = strchr(dot1 + 1, '.');
    snprintf(tok, sizeof(tok), "%.*s.%s%s", (int)(dot1 - good), good, ob, dot2);
    assert_int_equal(mcp_auth_verify_jwt(k, tok, strlen(tok), &e, &p, err, sizeof(err)),
                     MCP_AUTH_INVALID);
    assert_string_equal(err, "the token's signature does not verify");
    free(good);
    free(other);
    free(ob);
    free(b);
    free(c);
    mcp_auth_keys_free(k);
}

static void test_unknown_kid(void **state)
{
    (void)state;
    cjose_jwk_t *keys[] = {rsa_a};
    struct mcp_auth_keys *k = jwks_of(keys, 1);
    long long now = time(NULL);
    char *c = forge_claims(ISS, AUD, now, now + 600, NULL), err[256];
    struct mcp_auth_principal p;
    assert_int_equal(judge(k, rsa_b, "RS256", "b", c, err, sizeof(err), &p), MCP_AUTH_UNKNOWN_KID);
    free(c);
    mcp_auth_keys_free(k);
}

/* A verified token is found again only while it is within its time and
 * the keys it was verified with are the ones in use. */
static void test_cache(void **state)
{
    (void)state;
    struct mcp_auth_cache *c = mcp_auth_cache_new();
    long long now = time(NULL);
    char *scopes[] = {"x"};
    struct mcp_auth_principal p = {.subject = "alice",
                                   .scopes = scopes,
                                   .nscopes = 1,
                                   .exp = now + 100},
                              got;
    struct mcp_auth_expect e = {.issuer = ISS, .resource = AUD, .now = now, .skew = 60};
    uint8_t d[MCP_AUTH_DIGEST], other[MCP_AUTH_DIGEST];
    mcp_auth_sha256("tok", 3, d);
    mcp_auth_sha256("tol", 3, other);
    mcp_auth_cache_put(c, d, 7, &p);
    assert_false(mcp_auth_cache_get(c, other, 7, &e, &got));
    assert_true(mcp_auth_cache_get(c, d, 7, &e, &got));
    assert_string_equal(got.subject, "alice");
    assert_string_equal(got.scopes[0], "x");
    mcp_auth_principal_free(&got);
    assert_false(mcp_auth_cache_get(c, d, 8, &e, &got)); /* the keys changed */
    mcp_auth_cache_put(c, d, 7, &p);
    e.now = now + 100 + 60; /* expired, skew and all */
    assert_false(mcp_auth_cache_get(c, d, 7, &e, &got));
    e.now = now;
    assert_false(mcp_auth_cache_get(c, d, 7, &e, &got)); /* and dropped */
    mcp_auth_cache_free(c);
}

static void test_jwks_parse(void **state)
{
    (void)state;
    char err[256];
    assert_null(mcp_auth_keys_parse("[]", 2, err, sizeof(err)));
    assert_null(mcp_auth_keys_parse("{\"keys\":[]}", 11, err, sizeof(err)));
    /* symmetric and encryption keys are never taken */
    const char *j = "{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"},"
                    "{\"kty\":\"EC\",\"use\":\"enc\",\"crv\":\"P-256\",\"x\":\"a\",\"y\":\"b\"}]}";
    assert_null(mcp_auth_keys_parse(j, strlen(j), err, sizeof(err)));
    assert_non_null(strstr(err, "no signing key"));
    /* a '=' inside a member: Debian's cjose 0.6.2.1 aborts on an assertion
     * when it decodes this, so it must never get it */
    j = "{\"keys\":[{\"kty\":\"RSA\",\"e\":\"AQAB\",\"n\":\"r2pWf=4W8RkA\"}]}";
    assert_null(mcp_auth_keys_parse(j, strlen(j), err, sizeof(err)));
    assert_non_null(strstr(err, "without \"n\" in base64url"));
    /* a 1024-bit RSA key is too weak to trust */
    cjose_jwk_t *weak = forge_key(1024, "w");
    char *text = forge_jwks(&weak, 1);
    assert_null(mcp_auth_keys_parse(text, strlen(text), err, sizeof(err)));
    assert_non_null(strstr(err, "fewer than 2048 bits"));
    free(text);
    cjose_jwk_release(weak);
}

static void test_render(void **state)
{
    (void)state;
    char *u = mcp_auth_metadata_url("https://mcp.example.com/public/mcp");
    assert_string_equal(u,
                        "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp");
    free(u);
    u = mcp_auth_metadata_url("https://mcp.example.com/");
    assert_string_equal(u, "https://mcp.example.com/.well-known/oauth-protected-resource");
    free(u);
    assert_null(mcp_auth_metadata_url("https://mcp.example.com/mcp#x"));
    assert_null(mcp_auth_metadata_url("ftp://mcp.example.com/"));

    const char *scopes[] = {"files:read", "files:write"};
    char *prm = mcp_auth_prm_render(AUD, ISS, scopes, 2);
    json_t *d = json_loads(prm, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(d, "resource")), AUD);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(d, "authorization_servers"), 0)), ISS);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(d, "scopes_supported"), 1)),
        "files:write");
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(d, "bearer_methods_supported"), 0)),
        "header");
    json_decref(d);
    free(prm);

    char *w = mcp_auth_www_authenticate(AUD, NULL, "ignored without an error", NULL);
    assert_string_equal(w, "Bearer resource_metadata=\"https://mcp.example.com/.well-known/"
                           "oauth-protected-resource/mcp\"");
    free(w);
    /* what could end the quoting or split the header is left out */
    w = mcp_auth_www_authenticate("https://h", "insufficient_scope", "say \"hi\\\"\r\n\xc3\xa9",
                                  "a b");
    assert_string_equal(w, "Bearer resource_metadata=\"https://h/.well-known/oauth-protected-"
                           "resource\", error=\"insufficient_scope\", error_description=\"say "
                           "hi\", scope=\"a b\"");
    free(w);

    const char *tok;
    size_t len;
    assert_true(mcp_auth_bearer("bearer  abc.DEF-_~+/==", &tok, &len));
    assert_int_equal(len, strlen("abc.DEF-_~+/=="));
    assert_false(mcp_auth_bearer("Basic abc", &tok, &len));
    assert_false(mcp_auth_bearer("Bearer ", &tok, &len));
    assert_false(mcp_auth_bearer("Bearer a b", &tok, &len));
    assert_false(mcp_auth_bearer("Bearer a=b", &tok, &len));
}

/* ------------------------------------------------------------------------ */
/* The issuer: a loopback HTTP server in a thread, its JWKS replaceable. */

static struct {
    struct lo_server lo;
    int port;
    pthread_mutex_t mu;
    char *jwks;
    unsigned jwks_hits;
} srv = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void srv_set_jwks(cjose_jwk_t *const *keys, size_t n)
{
    char *j = forge_jwks(keys, n);
    pthread_mutex_lock(&srv.mu);
    free(srv.jwks);
    srv.jwks = j;
    pthread_mutex_unlock(&srv.mu);
}

/* One request: the metadata (at the root, or OpenID's appended form for
 * the issuer "/tenant"), or the JWKS. */
static void srv_serve(int c)
{
    char req[4096] = "", body[8192];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(req) - 1 && !strstr(req, "\r\n\r\n") &&
           (r = read(c, req + n, sizeof(req) - 1 - n)) > 0)
        req[n += (size_t)r] = '\0';
    int status = 200;
    pthread_mutex_lock(&srv.mu);
    if (strncmp(req, "GET /.well-known/oauth-authorization-server ", 44) == 0)
        snprintf(body, sizeof(body),
                 "{\"issuer\":\"http://127.0.0.1:%d\",\"jwks_uri\":\"http://127.0.0.1:%d/jwks\"}",
                 srv.port, srv.port);
    else if (strncmp(req, "GET /tenant/.well-known/openid-configuration ", 45) == 0)
        snprintf(body, sizeof(body),
                 "{\"issuer\":\"http://127.0.0.1:%d/tenant\","
                 "\"jwks_uri\":\"http://127.0.0.1:%d/jwks\"}",
                 srv.port, srv.port);
    else if (strncmp(req, "GET /jwks ", 10) == 0) {
        snprintf(body, sizeof(body), "%s", srv.jwks);
        srv.jwks_hits++;
    } else {
        status = 404;
        snprintf(body, sizeof(body), "{}");
    }
    pthread_mutex_unlock(&srv.mu);
    char head[256];
    int hn = snprintf(head, sizeof(head),
                      "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      status, strlen(body));
    if (write(c, head, (size_t)hn) < 0 || write(c, body, strlen(body)) < 0)
        perror("srv write");
}

static void srv_start(void)
{
    srv.jwks_hits = 0;
    lo_start(&srv.lo, srv_serve);
    srv.port = srv.lo.port;
}

static void srv_stop(void)
{
    lo_stop(&srv.lo);
    free(srv.jwks);
    srv.jwks = NULL;
}

/* "Bearer <token>" for a token of key (alg, kid) from the server's issuer. */
static char *bearer(const cjose_jwk_t *key, const char *alg, const char *kid, const char *scope)
{
    char iss[64], *out;
    long long now = time(NULL);
    snprintf(iss, sizeof(iss), "http://127.0.0.1:%d", srv.port);
    char *c = forge_claims(iss, AUD, now, now + 600, scope), *t = forge_token(key, alg, kid, c);
    assert_true(asprintf(&out, "Bearer %s", t) > 0);
    free(c);
    free(t);
    return out;
}

/* The server started with these keys, and an mcp_auth of its issuer (one
 * refresh an hour at most). */
static struct mcp_auth *open_with(cjose_jwk_t **keys, size_t n)
{
    srv_set_jwks(keys, n);
    srv_start();
    char iss[64], err[512];
    snprintf(iss, sizeof(iss), "http://127.0.0.1:%d", srv.port);
    struct mcp_auth_cfg cfg = {
        .resource = AUD, .issuer = iss, .timeout_ms = 5000, .refresh_min_s = 3600};
    struct mcp_auth *a = mcp_auth_open(&cfg, err, sizeof(err));
    if (!a)
        fail_msg("mcp_auth_open: %s", err);
    return a;
}

static void test_rotation_and_rate_limit(void **state)
{
    (void)state;
    cjose_jwk_t *first[] = {rsa_a}, *rotated[] = {rsa_b};
    struct mcp_auth *a = open_with(first, 1);
    assert_int_equal(srv.jwks_hits, 1);
    struct mcp_auth_result r;
    char *h = bearer(rsa_a, "RS256", "a", "files:read");
    mcp_auth_authenticate(a, h, &r);
    assert_int_equal(r.http_status, 0);
    assert_string_equal(r.principal.subject, "alice");
    /* a tool that needs files:write: 403 naming it; one that needs nothing */
    json_t *need = json_pack("[s]", "files:write");
    mcp_auth_authorize(a, need, &r);
    assert_int_equal(r.http_status, 403);
    assert_non_null(strstr(r.www_authenticate, "error=\"insufficient_scope\""));
    assert_non_null(strstr(r.www_authenticate, "scope=\"files:write\""));
    mcp_auth_result_free(&r);
    struct mcp_auth_counts n;
    mcp_auth_counts(a, &n);
    assert_int_equal(n.cache_hits, 0);
    mcp_auth_authenticate(a, h, &r); /* the same token again: verified already */
    mcp_auth_counts(a, &n);
    assert_int_equal(n.cache_hits, 1);
    assert_string_equal(r.principal.subject, "alice");
    assert_int_equal(r.principal.nscopes, 1);
    mcp_auth_authorize(a, NULL, &r);
    assert_int_equal(r.http_status, 0);
    json_array_append_new(need, json_string("files:read"));
    mcp_auth_authorize(a, need, &r);
    assert_int_equal(r.http_status, 0);
    json_decref(need);
    mcp_auth_result_free(&r);

    /* the issuer rotates: key b replaces a; a token of b makes one fetch */
    srv_set_jwks(rotated, 1);
    char *hb = bearer(rsa_b, "RS256", "b", NULL);
    mcp_auth_authenticate(a, hb, &r);
    assert_int_equal(r.http_status, 0);
    mcp_auth_result_free(&r);
    free(hb);
    mcp_auth_counts(a, &n);
    assert_int_equal(n.fetches, 1);
    assert_int_equal(srv.jwks_hits, 2);
    /* a's token, verified before, is not taken from the cache: a is gone */
    mcp_auth_authenticate(a, h, &r);
    assert_int_equal(r.http_status, 401);
    mcp_auth_result_free(&r);
    free(h);
    /* an unknown kid within refresh_min_s: no fetch, 401 invalid_token */
    h = bearer(ec_c, "ES256", "c", NULL);
    mcp_auth_authenticate(a, h, &r);
    assert_int_equal(r.http_status, 401);
    assert_non_null(strstr(r.www_authenticate, "error=\"invalid_token\""));
    assert_non_null(strstr(r.www_authenticate, "resource_metadata=\"https://mcp.example.com/"
                                               ".well-known/oauth-protected-resource/mcp\""));
    mcp_auth_result_free(&r);
    mcp_auth_counts(a, &n);
    assert_int_equal(n.fetches, 1);
    assert_int_equal(n.limited, 2); /* a's kid, then c's */
    assert_int_equal(n.cache_hits, 1);
    assert_int_equal(srv.jwks_hits, 2);
    free(h);
    /* no Authorization: 401 without an error */
    mcp_auth_authenticate(a, NULL, &r);
    assert_int_equal(r.http_status, 401);
    assert_null(strstr(r.www_authenticate, "error="));
    mcp_auth_result_free(&r);
    mcp_auth_close(a);
    srv_stop();
}

/* What a poll loop calls: it never fetches. A new kid with a refresh due
 * is handed back (false); the blocking call then fetches; a new kid the
 * rate limit refuses is judged at once, 401. */
static void test_nowait(void **state)
{
    (void)state;
    cjose_jwk_t *first[] = {rsa_a}, *rotated[] = {rsa_a, rsa_b};
    struct mcp_auth *a = open_with(first, 1);
    struct mcp_auth_result r;
    char *ha = bearer(rsa_a, "RS256", "a", NULL), *hb = bearer(rsa_b, "RS256", "b", NULL);
    assert_true(mcp_auth_authenticate_nowait(a, ha, &r)); /* a known kid */
    assert_int_equal(r.http_status, 0);
    mcp_auth_result_free(&r);
    assert_true(mcp_auth_authenticate_nowait(a, NULL, &r)); /* no token */
    assert_int_equal(r.http_status, 401);
    mcp_auth_result_free(&r);
    srv_set_jwks(rotated, 2);
    assert_false(mcp_auth_authenticate_nowait(a, hb, &r)); /* b: a fetch is due */
    assert_int_equal(r.http_status, 0);
    assert_null(r.www_authenticate);
    assert_int_equal(srv.jwks_hits, 1); /* nothing fetched */
    mcp_auth_authenticate(a, hb, &r);
    assert_int_equal(r.http_status, 0);
    mcp_auth_result_free(&r);
    assert_int_equal(srv.jwks_hits, 2);
    char *hc = bearer(ec_c, "ES256", "c", NULL);
    assert_true(mcp_auth_authenticate_nowait(a, hc, &r)); /* limited: judged now */
    assert_int_equal(r.http_status, 401);
    mcp_auth_result_free(&r);
    struct mcp_auth_counts n;
    mcp_auth_counts(a, &n);
    assert_int_equal(n.fetches, 1);
    assert_int_equal(n.limited, 1);
    free(ha);
    free(hb);
    free(hc);
    mcp_auth_close(a);
    srv_stop();
}

static void test_issuer_mismatch(void **state)
{
    (void)state;
    cjose_jwk_t *first[] = {rsa_a};
    srv_set_jwks(first, 1);
    srv_start();
    char iss[64], err[512];
    /* localhost, not 127.0.0.1: the metadata names another issuer */
    snprintf(iss, sizeof(iss), "http://localhost:%d", srv.port);
    struct mcp_auth_cfg cfg = {.resource = AUD, .issuer = iss, .timeout_ms = 5000};
    assert_null(mcp_auth_open(&cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "is not http://localhost"));
    /* an issuer with a path: the two inserted forms are not found (404),
     * OpenID's appended one is */
    snprintf(iss, sizeof(iss), "http://127.0.0.1:%d/tenant", srv.port);
    struct mcp_auth *a = mcp_auth_open(&cfg, err, sizeof(err));
    if (!a)
        fail_msg("mcp_auth_open: %s", err);
    mcp_auth_close(a);
    srv_stop();
    /* plain http off the loopback is refused before any connection */
    cfg.issuer = "http://192.0.2.1";
    assert_null(mcp_auth_open(&cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "loopback"));
}

static void test_static_tokens(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_mcp_auth.XXXXXX", path[128], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/robot", dir);
    FILE *f = fopen(path, "w");
    fputs("s3cret-token\n", f);
    fclose(f);
    assert_int_equal(chmod(path, 0644), 0);
    const char *supported[] = {"files:read", "admin"};
    struct mcp_auth_cfg cfg = {
        .resource = AUD, .tokens_dir = dir, .scopes_supported = supported, .nscopes_supported = 2};
    assert_null(mcp_auth_open(&cfg, err, sizeof(err))); /* readable by others */
    assert_non_null(strstr(err, "mode 0644"));
    assert_int_equal(chmod(path, 0600), 0);
    struct mcp_auth *a = mcp_auth_open(&cfg, err, sizeof(err));
    if (!a)
        fail_msg("mcp_auth_open: %s", err);
    struct mcp_auth_result r;
    mcp_auth_authenticate(a, "Bearer s3cret-token", &r);
    assert_int_equal(r.http_status, 0);
    assert_string_equal(r.principal.subject, "robot");
    json_t *need = json_pack("[s]", "admin");
    mcp_auth_authorize(a, need, &r); /* a static token has every scope */
    assert_int_equal(r.http_status, 0);
    json_decref(need);
    mcp_auth_result_free(&r);
    mcp_auth_authenticate(a, "Bearer s3cret-tokem", &r);
    assert_int_equal(r.http_status, 401);
    assert_non_null(strstr(r.www_authenticate, "invalid_token"));
    assert_non_null(strstr(r.www_authenticate, ", scope=\"files:read admin\""));
    mcp_auth_result_free(&r);
    assert_non_null(strstr(mcp_auth_prm_json(a), "\"authorization_servers\":[]"));
    assert_string_equal(mcp_auth_prm_path(a), "/.well-known/oauth-protected-resource/mcp");
    mcp_auth_close(a);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_tokens),
        cmocka_unit_test(test_time_claims),
        cmocka_unit_test(test_wrong_audience_and_issuer),
        cmocka_unit_test(test_forged_algorithms),
        cmocka_unit_test(test_unknown_kid),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_jwks_parse),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_rotation_and_rate_limit),
        cmocka_unit_test(test_nowait),
        cmocka_unit_test(test_issuer_mismatch),
        cmocka_unit_test(test_static_tokens),
    };
    return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}
