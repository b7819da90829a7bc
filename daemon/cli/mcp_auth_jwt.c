/*
 * mcp_auth_jwt.c - a JWKS imported and a JWT verified against it, with no
 * I/O (mcp_auth.h).
 *
 * The JOSE work is cjose's (Debian libcjose-dev, OpenIDC's, what
 * mod_auth_openidc verifies with): a key is imported once into an OpenSSL
 * key and kept, so a validation with a cached key costs one signature
 * check; it checks the key's type against the algorithm's family, and it
 * will not verify "none". libjwt 1.10 has no JWKS and verifies with
 * whatever algorithm the token names; libjose turns the JWK into an
 * OpenSSL key again at every verification. cjose has no EdDSA, so the
 * allow-list is RSA (PKCS#1 v1.5 and PSS) and ECDSA.
 *
 * What is checked here and not left to cjose: the algorithm against the
 * allow-list before anything else (so "none" and HS256 never reach a
 * key), the key's type, curve and size against the algorithm, the key's
 * own "alg" and "use" when it has them, and "crit" (no extension is
 * understood, so a token that needs one is refused).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjose/cjose.h>

#include "mcp_auth.h"
#include "toolexec.h"

struct mcp_auth_key {
    cjose_jwk_t *jwk;
    char *kid;              /* NULL: none */
    char *alg;              /* the key's own "alg"; NULL: any of its family */
    cjose_jwk_kty_t kty;    /* RSA or EC */
    cjose_jwk_ec_curve crv; /* EC only */
};
struct mcp_auth_keys {
    struct mcp_auth_key *k;
    size_t n;
};

/* The allow-list: each algorithm with the key it needs. */
static const struct {
    const char *alg;
    cjose_jwk_kty_t kty;
    cjose_jwk_ec_curve crv; /* EC only */
} algs[] = {
    {"RS256", CJOSE_JWK_KTY_RSA, 0},
    {"RS384", CJOSE_JWK_KTY_RSA, 0},
    {"RS512", CJOSE_JWK_KTY_RSA, 0},
    {"PS256", CJOSE_JWK_KTY_RSA, 0},
    {"PS384", CJOSE_JWK_KTY_RSA, 0},
    {"PS512", CJOSE_JWK_KTY_RSA, 0},
    {"ES256", CJOSE_JWK_KTY_EC, CJOSE_JWK_EC_P_256},
    {"ES384", CJOSE_JWK_KTY_EC, CJOSE_JWK_EC_P_384},
    {"ES512", CJOSE_JWK_KTY_EC, CJOSE_JWK_EC_P_521},
};
#define NALGS (sizeof(algs) / sizeof(algs[0]))

/* Below this an RSA signature proves little (NIST SP 800-131A). */
#define MIN_RSA_BITS 2048

static int alg_index(const char *alg)
{
    for (size_t i = 0; alg && i < NALGS; i++)
        if (strcmp(alg, algs[i].alg) == 0)
            return (int)i;
    return -1;
}

static void key_free(struct mcp_auth_key *k)
{
    cjose_jwk_release(k->jwk);
    free(k->kid);
    free(k->alg);
}

void mcp_auth_keys_free(struct mcp_auth_keys *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->n; i++)
        key_free(&k->k[i]);
    free(k->k);
    free(k);
}

size_t mcp_auth_keys_count(const struct mcp_auth_keys *k)
{
    return k ? k->n : 0;
}

/* n bytes of unpadded base64url (RFC 7515 section 2), of a length that
 * decodes (not 1 mod 4). Checked before cjose sees them: Debian's cjose
 * 0.6.2.1 aborts on an assertion for some malformed input (a '=' inside a
 * value), where a newer one returns an error. */
static bool b64url_ok(const char *s, size_t n)
{
    if (n == 0 || n % 4 == 1)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* Three parts of base64url: anything else is no JWS of ours (an empty
 * signature is "none"'s). */
static bool compact_ok(const char *t, size_t len)
{
    const char *d1 = len <= MCP_AUTH_MAX_TOKEN ? memchr(t, '.', len) : NULL;
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - t)) : NULL;
    return d2 && b64url_ok(t, (size_t)(d1 - t)) && b64url_ok(d1 + 1, (size_t)(d2 - d1 - 1)) &&
           b64url_ok(d2 + 1, len - (size_t)(d2 + 1 - t));
}

/* s for an error text, if it is short printable ASCII: what a token or a
 * JWKS says goes into logs and WWW-Authenticate's error_description. */
static const char *shown(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (n == 64 || s[n] < 0x20 || s[n] > 0x7e || s[n] == '"' || s[n] == '\\')
            return "(not shown)";
    return s ? s : "";
}

static const char *str_member(const json_t *o, const char *name)
{
    return json_string_value(json_object_get(o, name));
}

/* One JWK of the set imported, its public members only (a private part
 * a careless JWKS carries is never kept). 1: imported; 0: skipped, why in
 * err; -1: out of memory. */
static int import_key(const json_t *jv, struct mcp_auth_key *k, char *err, size_t errlen)
{
    const char *kty = str_member(jv, "kty"), *use = str_member(jv, "use");
    const char *alg = str_member(jv, "alg"), *kid = str_member(jv, "kid");
    const char *crv = str_member(jv, "crv");
    /* the members in base64url, each required */
    static const char *const rsa[] = {"n", "e", NULL}, *const ec[] = {"x", "y", NULL};
    const char *const *members;
    if (!json_is_object(jv) || !kty)
        return snprintf(err, errlen, "a key without \"kty\""), 0;
    if (use && strcmp(use, "sig") != 0)
        return snprintf(err, errlen, "a key for \"use\": \"%s\"", shown(use)), 0;
    if (strcmp(kty, "RSA") == 0)
        members = rsa;
    else if (strcmp(kty, "EC") == 0 && crv)
        members = ec;
    else
        return snprintf(err, errlen, "a key of \"kty\" \"%s\"%s", shown(kty),
                        strcmp(kty, "EC") == 0 ? " without \"crv\"" : ""),
               0;
    int ai = alg ? alg_index(alg) : -1;
    if (alg && (ai < 0 || strcmp(kty, algs[ai].kty == CJOSE_JWK_KTY_RSA ? "RSA" : "EC") != 0))
        return snprintf(err, errlen, "a %s key for \"alg\" \"%s\"", kty, shown(alg)), 0;
    json_t *pub = json_pack("{s:s}", "kty", kty);
    if (!pub || (crv && members == ec && json_object_set_new(pub, "crv", json_string(crv)) < 0))
        return json_decref(pub), -1;
    for (size_t i = 0; members[i]; i++) {
        json_t *m = json_object_get(jv, members[i]);
        if (!json_is_string(m) || !b64url_ok(json_string_value(m), json_string_length(m))) {
            json_decref(pub);
            return snprintf(err, errlen, "a %s key without \"%s\" in base64url", kty, members[i]),
                   0;
        }
        json_object_set(pub, members[i], m);
    }
    char *text = json_dumps(pub, JSON_COMPACT);
    json_decref(pub);
    if (!text)
        return -1;
    cjose_err ce;
    k->jwk = cjose_jwk_import(text, strlen(text), &ce);
    free(text);
    if (!k->jwk)
        return snprintf(err, errlen, "a %s key cjose refused: %s", kty, ce.message), 0;
    k->kty = cjose_jwk_get_kty(k->jwk, &ce);
    if (k->kty == CJOSE_JWK_KTY_EC)
        k->crv = cjose_jwk_EC_get_curve(k->jwk, &ce);
    else if (cjose_jwk_get_keysize(k->jwk, &ce) < MIN_RSA_BITS) {
        cjose_jwk_release(k->jwk);
        return snprintf(err, errlen, "an RSA key of fewer than %d bits", MIN_RSA_BITS), 0;
    }
    k->kid = kid ? strdup(kid) : NULL;
    k->alg = alg ? strdup(alg) : NULL;
    if ((kid && !k->kid) || (alg && !k->alg)) {
        key_free(k);
        return -1;
    }
    return 1;
}

struct mcp_auth_keys *mcp_auth_keys_parse(const char *json, size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = te_json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    json_t *arr = json_object_get(doc, "keys");
    struct mcp_auth_keys *k = NULL;
    if (!json_is_array(arr)) {
        snprintf(err, errlen, "not a JWKS (an object with a \"keys\" array)%s%s", doc ? "" : ": ",
                 doc ? "" : je.text);
        goto out;
    }
    size_t want =
        json_array_size(arr) < MCP_AUTH_MAX_KEYS ? json_array_size(arr) : MCP_AUTH_MAX_KEYS;
    if (!(k = calloc(1, sizeof(*k))) || !(k->k = calloc(want + 1, sizeof(*k->k)))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    char why[200] = "no keys";
    size_t i;
    json_t *jv;
    json_array_foreach(arr, i, jv)
    {
        if (k->n == want)
            break;
        int rc = import_key(jv, &k->k[k->n], why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        k->n += (size_t)rc;
    }
    if (k->n == 0) {
        snprintf(err, errlen, "the JWKS has no signing key this server can use (%s)", why);
        goto fail;
    }
    goto out;
fail:
    mcp_auth_keys_free(k);
    k = NULL;
out:
    json_decref(doc);
    return k;
}

void mcp_auth_principal_free(struct mcp_auth_principal *p)
{
    if (!p)
        return;
    free(p->subject);
    for (size_t i = 0; i < p->nscopes; i++)
        free(p->scopes[i]);
    free(p->scopes);
    memset(p, 0, sizeof(*p));
}

static bool key_fits(const struct mcp_auth_key *k, int ai)
{
    if (k->kty != algs[ai].kty || (k->alg && strcmp(k->alg, algs[ai].alg) != 0))
        return false;
    return k->kty != CJOSE_JWK_KTY_EC || k->crv == algs[ai].crv;
}

static int add_scope(struct mcp_auth_principal *p, const char *s, size_t n)
{
    if (n == 0 || p->nscopes == MCP_AUTH_MAX_SCOPES)
        return 0; /* more than the limit: the rest are not granted, never more */
    if (!p->scopes && !(p->scopes = calloc(MCP_AUTH_MAX_SCOPES, sizeof(*p->scopes))))
        return -1;
    if (!(p->scopes[p->nscopes] = strndup(s, n)))
        return -1;
    p->nscopes++;
    return 0;
}

static int add_scopes_text(struct mcp_auth_principal *p, const char *s)
{
    while (*s) {
        size_t n = strcspn(s, " ");
        if (add_scope(p, s, n) < 0)
            return -1;
        s += n;
        s += strspn(s, " ");
    }
    return 0;
}

/* "scope" (RFC 9068, RFC 8693: one space-separated string), else "scp"
 * (an array, as Azure and Okta write it, or a string). */
static int read_scopes(const json_t *claims, struct mcp_auth_principal *p)
{
    const json_t *s = json_object_get(claims, "scope");
    if (!s)
        s = json_object_get(claims, "scp");
    if (json_is_string(s))
        return add_scopes_text(p, json_string_value(s));
    size_t i;
    const json_t *v;
    json_array_foreach(s, i, v) if (json_is_string(v) &&
                                    add_scope(p, json_string_value(v), json_string_length(v)) <
                                        0) return -1;
    return 0;
}

static bool aud_has(const json_t *aud, const char *resource)
{
    if (json_is_string(aud))
        return strcmp(json_string_value(aud), resource) == 0;
    size_t i;
    const json_t *v;
    json_array_foreach(aud, i, v) if (json_is_string(v) &&
                                      strcmp(json_string_value(v), resource) == 0) return true;
    return false;
}

#define INVALID(...)                                                                               \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        goto out;                                                                                  \
    } while (0)

static enum mcp_auth_verdict check_claims(const json_t *c, const struct mcp_auth_expect *e,
                                          struct mcp_auth_principal *p, char *err, size_t errlen)
{
    const json_t *exp = json_object_get(c, "exp"), *nbf = json_object_get(c, "nbf");
    const char *iss = str_member(c, "iss"), *sub = str_member(c, "sub");
    if (!json_is_object(c))
        INVALID("the token's payload is not a JSON object");
    if (!iss || strcmp(iss, e->issuer) != 0)
        INVALID("the token was not issued by %s", e->issuer);
    if (!aud_has(json_object_get(c, "aud"), e->resource))
        INVALID("the token is not for this resource (its \"aud\" does not name %s)", e->resource);
    if (!json_is_number(exp))
        INVALID("the token has no expiry (\"exp\")");
    if (json_number_value(exp) + (double)e->skew <= (double)e->now)
        INVALID("the token has expired");
    if (nbf && (!json_is_number(nbf) || json_number_value(nbf) - (double)e->skew > (double)e->now))
        INVALID("the token is not valid yet (\"nbf\")");
    /* the subject goes to the daemon and into log lines: what the daemon
     * takes (printable, no space: no forged line) */
    if (!sub || !te_subject_valid(sub, strlen(sub)))
        INVALID("the token names no subject (\"sub\") of 1 to 255 printable characters");
    if (!(p->subject = strdup(sub)) || read_scopes(c, p) < 0) {
        mcp_auth_principal_free(p);
        INVALID("out of memory");
    }
    p->exp = (long long)json_number_value(exp);
    return MCP_AUTH_VALID;
out:
    return MCP_AUTH_INVALID;
}

enum mcp_auth_verdict mcp_auth_verify_jwt(const struct mcp_auth_keys *keys, const char *token,
                                          size_t len, const struct mcp_auth_expect *e,
                                          struct mcp_auth_principal *p, char *err, size_t errlen)
{
    enum mcp_auth_verdict v = MCP_AUTH_INVALID;
    cjose_jws_t *jws = NULL;
    json_t *claims = NULL;
    cjose_err ce;
    memset(p, 0, sizeof(*p));
    if (!compact_ok(token, len))
        INVALID("not a signed JWT (three base64url parts)");
    if (!(jws = cjose_jws_import(token, len, &ce)))
        INVALID("not a signed JWT: %s", ce.message);
    json_t *hdr = (json_t *)cjose_jws_get_protected(jws); /* cjose's header is jansson's */
    const char *alg = str_member(hdr, "alg");
    const json_t *kid = json_object_get(hdr, "kid");
    int ai = alg_index(alg);
    if (ai < 0)
        INVALID("the algorithm \"%s\" is not accepted", shown(alg));
    if (json_object_get(hdr, "crit"))
        INVALID("the token names critical extensions (\"crit\") this server does not know");
    if (kid && !json_is_string(kid))
        INVALID("the token's \"kid\" is not a string");
    bool tried = false, verified = false;
    for (size_t i = 0; keys && i < keys->n && !verified; i++) {
        const struct mcp_auth_key *k = &keys->k[i];
        if (kid && (!k->kid || strcmp(k->kid, json_string_value(kid)) != 0))
            continue;
        if (!key_fits(k, ai))
            continue;
        tried = true;
        verified = cjose_jws_verify(jws, k->jwk, &ce);
    }
    if (!tried && kid) {
        v = MCP_AUTH_UNKNOWN_KID;
        INVALID("no %s key \"%s\" among the issuer's keys", alg, shown(json_string_value(kid)));
    }
    if (!verified)
        INVALID("the token's signature does not verify");
    uint8_t *pt;
    size_t ptlen;
    if (!cjose_jws_get_plaintext(jws, &pt, &ptlen, &ce))
        INVALID("the token has no payload");
    if (!(claims = json_loadb((const char *)pt, ptlen, JSON_REJECT_DUPLICATES, NULL)))
        INVALID("the token's payload is not JSON");
    v = check_claims(claims, e, p, err, errlen);
out:
    json_decref(claims);
    cjose_jws_release(jws);
    return v;
}
