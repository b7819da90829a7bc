/*
 * jwt_verify.c - the cost of one access-token validation with a cached key
 * (daemon/cli/mcp_auth_jwt.c): mcp_auth_verify_jwt over the same token,
 * its key in the JWKS already imported, as the MCP HTTP front does per
 * request once the issuer's keys are held.
 *
 *   jwt_verify [ITERATIONS]
 *
 * Prints microseconds per validation for RS256 (2048-bit key), PS256 and
 * ES256 (P-256), each with 8 keys in the set; then per look-up of a token
 * verified already (mcp_auth_cache.c: its SHA-256, the look-up, the
 * principal copied), what mcp_auth_authenticate does for a token it has
 * seen. Run by hand, never as a test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jwt_forge.h"
#include "mcp_auth.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void cached(const struct mcp_auth_keys *k, const char *tok, const struct mcp_auth_expect *e,
                   long n)
{
    struct mcp_auth_cache *c = mcp_auth_cache_new();
    struct mcp_auth_principal p;
    char err[256];
    uint8_t d[MCP_AUTH_DIGEST];
    if (!c || mcp_auth_verify_jwt(k, tok, strlen(tok), e, &p, err, sizeof(err)) != MCP_AUTH_VALID)
        abort();
    mcp_auth_sha256(tok, strlen(tok), d);
    mcp_auth_cache_put(c, d, 0, &p);
    mcp_auth_principal_free(&p);
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        mcp_auth_sha256(tok, strlen(tok), d);
        if (!mcp_auth_cache_get(c, d, 0, e, &p))
            abort();
        mcp_auth_principal_free(&p);
    }
    printf("RS256 seen before: %.2f us per look-up (%ld iterations)\n",
           (now_s() - t0) * 1e6 / (double)n, n);
    mcp_auth_cache_free(c);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    static const char *const kids[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"};
    cjose_jwk_t *keys[8];
    for (int i = 0; i < 8; i++) /* the last is the EC key, the others RSA */
        keys[i] = forge_key(i == 7 ? 0 : 2048, kids[i]);
    char *jwks = forge_jwks(keys, 8), err[256];
    struct mcp_auth_keys *k = mcp_auth_keys_parse(jwks, strlen(jwks), err, sizeof(err));
    if (!k) {
        fprintf(stderr, "jwt_verify: %s\n", err);
        return 1;
    }
    long long t = time(NULL);
    char *claims = forge_claims("https://auth.example.com", "https://mcp.example.com/mcp", t,
                                t + 3600, "files:read tools:call");
    struct mcp_auth_expect e = {.issuer = "https://auth.example.com",
                                .resource = "https://mcp.example.com/mcp",
                                .now = t,
                                .skew = MCP_AUTH_SKEW_S};
    static const struct {
        const char *alg;
        int key;
    } runs[] = {{"RS256", 3}, {"PS256", 3}, {"ES256", 7}};
    for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        char *tok = forge_token(keys[runs[r].key], runs[r].alg, kids[runs[r].key], claims);
        size_t len = strlen(tok);
        double t0 = now_s();
        for (long i = 0; i < n; i++) {
            struct mcp_auth_principal p;
            if (mcp_auth_verify_jwt(k, tok, len, &e, &p, err, sizeof(err)) != MCP_AUTH_VALID) {
                fprintf(stderr, "jwt_verify: %s: %s\n", runs[r].alg, err);
                return 1;
            }
            mcp_auth_principal_free(&p);
        }
        double us = (now_s() - t0) * 1e6 / (double)n;
        printf("%s: %.1f us per validation (%ld iterations, %zu-byte token)\n", runs[r].alg, us, n,
               len);
        if (r == 0)
            cached(k, tok, &e, n * 10);
        free(tok);
    }
    free(claims);
    free(jwks);
    mcp_auth_keys_free(k);
    for (int i = 0; i < 8; i++)
        cjose_jwk_release(keys[i]);
    return 0;
}
