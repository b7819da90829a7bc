/*
 * jwt_forge.h - keys and tokens made at test time with cjose, for
 * test_mcp_auth.c and bench/jwt_verify.c: an issuer of our own, honest
 * and not.
 */
#ifndef JWT_FORGE_H
#define JWT_FORGE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjose/cjose.h>
#include <jansson.h>

/* An RSA (bits) or EC P-256 (bits 0) key with this kid; abort on failure. */
static inline cjose_jwk_t *forge_key(size_t bits, const char *kid)
{
    static const uint8_t e[] = {1, 0, 1};
    cjose_err ce;
    cjose_jwk_t *k = bits ? cjose_jwk_create_RSA_random(bits, e, sizeof(e), &ce)
                          : cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &ce);
    if (!k || !cjose_jwk_set_kid(k, kid, strlen(kid), &ce)) {
        fprintf(stderr, "forge_key: %s\n", ce.message);
        abort();
    }
    return k;
}

/* {"keys": [each key's public JWK]}, malloc'd text. */
static inline char *forge_jwks(cjose_jwk_t *const *keys, size_t n)
{
    json_t *arr = json_array();
    cjose_err ce;
    for (size_t i = 0; i < n; i++) {
        char *pub = cjose_jwk_to_json(keys[i], false, &ce);
        json_array_append_new(arr, json_loads(pub, 0, NULL));
        free(pub);
    }
    json_t *doc = json_pack("{s:o}", "keys", arr);
    char *out = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return out;
}

/* A compact JWS of claims (JSON text) signed by key with alg, its header
 * naming kid (NULL: none). malloc'd. */
static inline char *forge_token(const cjose_jwk_t *key, const char *alg, const char *kid,
                                const char *claims)
{
    cjose_err ce;
    cjose_header_t *h = cjose_header_new(&ce);
    cjose_header_set(h, "alg", alg, &ce);
    if (kid)
        cjose_header_set(h, "kid", kid, &ce);
    cjose_jws_t *jws = cjose_jws_sign(key, h, (const uint8_t *)claims, strlen(claims), &ce);
    const char *ser = NULL;
    if (!jws || !cjose_jws_export(jws, &ser, &ce)) {
        fprintf(stderr, "forge_token: %s\n", ce.message);
        abort();
    }
    char *out = strdup(ser);
    cjose_jws_release(jws);
    cjose_header_release(h);
    return out;
}

/* The claims of a token for resource from issuer, valid from nbf to exp,
 * with this "scope" (NULL: none). malloc'd. */
static inline char *forge_claims(const char *iss, const char *aud, long long nbf, long long exp,
                                 const char *scope)
{
    json_t *c = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "iss", iss, "aud", aud, "sub", "alice",
                          "nbf", (json_int_t)nbf, "exp", (json_int_t)exp, "iat", (json_int_t)nbf);
    if (scope)
        json_object_set_new(c, "scope", json_string(scope));
    char *out = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    return out;
}

#endif
