/*
 * mcp_auth_keys.c - the front's authorization state and its per-request
 * entry points (mcp_auth.h): the issuer's metadata and keys fetched and
 * kept, the static tokens read, a request's Authorization header judged.
 *
 * The keys in use are one immutable set, counted: a request takes a
 * reference under the lock and verifies outside it, so a refresh (which
 * swaps in a new set) never waits for verifications nor they for it. One
 * refresh runs at a time, and at most one starts per refresh_min_s: a
 * stream of tokens with made-up "kid"s costs the issuer one fetch per
 * interval, not one per request.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli_sys.h"
#include "credentials.h"
#include "mcp_auth.h"
#include "toolexec.h"

#define MAX_STATIC_TOKENS 1024

struct held {
    struct mcp_auth_keys *keys;
    unsigned refs;
};
struct static_token {
    char *subject, *token;
};

struct mcp_auth {
    char *resource, *issuer, *ca_file, *jwks_uri, *prm_json, *prm_url;
    char *scope_hint; /* scopes_supported, space separated, for 401s; NULL: none */
    long timeout_ms, refresh_min_s, max_age_s;
    size_t max_bytes;
    struct static_token *toks;
    size_t ntoks;
    pthread_mutex_t mu;
    struct held *cur; /* NULL: no issuer */
    unsigned gen;     /* cur's generation: the cache's entries name theirs */
    struct mcp_auth_cache *cache;
    long long fetched_at; /* monotonic seconds, the set in use */
    long long tried_at;   /* the last refresh started; < 0: none yet */
    bool refreshing;
    unsigned fetches, limited, hits;
};

static long long mono_s(void)
{
    return cli_now_ms() / 1000;
}

static void held_drop(struct mcp_auth *a, struct held *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&a->mu);
    bool last = --h->refs == 0;
    pthread_mutex_unlock(&a->mu);
    if (last) {
        mcp_auth_keys_free(h->keys);
        free(h);
    }
}

static struct held *held_take(struct mcp_auth *a, long long *age, unsigned *gen)
{
    pthread_mutex_lock(&a->mu);
    struct held *h = a->cur;
    if (h)
        h->refs++;
    *age = mono_s() - a->fetched_at;
    *gen = a->gen;
    pthread_mutex_unlock(&a->mu);
    return h;
}

static struct mcp_auth_keys *fetch_keys(const struct mcp_auth *a, char *err, size_t errlen)
{
    char *body, why[300];
    size_t len;
    if (mcp_auth_fetch(a->jwks_uri, a->ca_file, a->timeout_ms, a->max_bytes, &body, &len, why,
                       sizeof(why)) < 0) {
        snprintf(err, errlen, "the issuer's keys (%s): %s", a->jwks_uri, why);
        return NULL;
    }
    struct mcp_auth_keys *k = mcp_auth_keys_parse(body, len, why, sizeof(why));
    free(body);
    if (!k)
        snprintf(err, errlen, "the issuer's keys (%s): %s", a->jwks_uri, why);
    return k;
}

/* Fetch the JWKS again unless another refresh runs or one started less
 * than refresh_min_s ago. The set in use stays when the fetch fails. */
static void refresh(struct mcp_auth *a)
{
    long long now = mono_s();
    pthread_mutex_lock(&a->mu);
    bool go = !a->refreshing &&
              (a->tried_at < 0 || a->refresh_min_s < 0 || now - a->tried_at >= a->refresh_min_s);
    if (go) {
        a->refreshing = true;
        a->tried_at = now;
    } else
        a->limited++;
    pthread_mutex_unlock(&a->mu);
    if (!go)
        return;
    char why[512];
    struct mcp_auth_keys *k = fetch_keys(a, why, sizeof(why));
    struct held *h = k ? calloc(1, sizeof(*h)) : NULL, *old = NULL;
    if (h) {
        h->keys = k;
        h->refs = 1;
    } else if (k) {
        mcp_auth_keys_free(k);
    } else
        fprintf(stderr, "toolexec: mcp: %s (the keys in use stay)\n", why);
    pthread_mutex_lock(&a->mu);
    a->refreshing = false;
    a->fetches++;
    if (h) {
        old = a->cur;
        a->cur = h;
        a->gen++;
        a->fetched_at = now;
    }
    pthread_mutex_unlock(&a->mu);
    held_drop(a, old);
}

/* The issuer's metadata, at the well-known URLs in the order the MCP spec
 * gives (RFC 8414 first, then OpenID Connect Discovery; with a path, the
 * inserted forms before the appended one). The first found must name our
 * issuer (RFC 8414 section 3.3) and its JWKS. */
static int discover(struct mcp_auth *a, char *err, size_t errlen)
{
    char *urls[3] = {mcp_auth_well_known(a->issuer, "oauth-authorization-server"),
                     mcp_auth_well_known(a->issuer, "openid-configuration"), NULL};
    const char *path = strchr(strstr(a->issuer, "://") + 3, '/');
    if (path && strcmp(path, "/") != 0 &&
        asprintf(&urls[2], "%s%s.well-known/openid-configuration", a->issuer,
                 a->issuer[strlen(a->issuer) - 1] == '/' ? "" : "/") < 0)
        urls[2] = NULL;
    int rc = -1;
    snprintf(err, errlen, "--oauth-issuer %s: not an http(s) URL without query or fragment",
             a->issuer);
    for (int i = 0; i < 3 && rc < 0 && urls[0] && urls[1]; i++) {
        char *body, why[300];
        size_t len;
        if (!urls[i])
            continue;
        if (mcp_auth_fetch(urls[i], a->ca_file, a->timeout_ms, a->max_bytes, &body, &len, why,
                           sizeof(why)) < 0) {
            snprintf(err, errlen, "the issuer's metadata: %s: %s", urls[i], why);
            continue;
        }
        json_t *doc = json_loadb(body, len, 0, NULL);
        free(body);
        const char *iss = json_string_value(json_object_get(doc, "issuer"));
        const char *jwks = json_string_value(json_object_get(doc, "jwks_uri"));
        if (!iss || strcmp(iss, a->issuer) != 0)
            snprintf(err, errlen, "the issuer's metadata: %s: its \"issuer\" is not %s", urls[i],
                     a->issuer);
        else if (!jwks)
            snprintf(err, errlen, "the issuer's metadata: %s: no \"jwks_uri\"", urls[i]);
        else if ((a->jwks_uri = strdup(jwks)))
            rc = 0;
        json_decref(doc);
        break; /* the first document found is the issuer's word, good or bad */
    }
    for (int i = 0; i < 3; i++)
        free(urls[i]);
    return rc;
}

/* One token per file in dir: its name the subject, its line the token. */
static int read_tokens(struct mcp_auth *a, const char *dir, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "--bearer-tokens %s: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    a->toks = calloc(MAX_STATIC_TOKENS, sizeof(*a->toks));
    while (rc == 0 && a->toks && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue; /* ".", "..", and what an editor leaves */
        char why[400];
        struct static_token *t = &a->toks[a->ntoks];
        if (a->ntoks == MAX_STATIC_TOKENS) {
            snprintf(err, errlen, "--bearer-tokens %s: more than %d tokens", dir,
                     MAX_STATIC_TOKENS);
            rc = -1;
        } else if (!te_subject_valid(e->d_name, strlen(e->d_name))) {
            /* the file's name is its subject, which the daemon and the log take */
            snprintf(err, errlen,
                     "--bearer-tokens %s: %.100s: a token's file name is its subject: 1 to 255 "
                     "printable characters, no space",
                     dir, e->d_name);
            rc = -1;
        } else if (td_credential_read(dir, e->d_name, &t->token, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "--bearer-tokens: %s", why);
            rc = -1;
        } else if (!(t->subject = strdup(e->d_name))) {
            free(t->token);
            rc = -1;
        } else
            a->ntoks++;
    }
    closedir(d);
    if (rc == 0 && a->ntoks == 0)
        snprintf(err, errlen, "--bearer-tokens %s: no token in it", dir), rc = -1;
    return a->toks ? rc : -1;
}

struct mcp_auth *mcp_auth_open(const struct mcp_auth_cfg *cfg, char *err, size_t errlen)
{
    struct mcp_auth *a = calloc(1, sizeof(*a));
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&a->mu, NULL);
    a->tried_at = -1;
    a->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 5000;
    a->max_bytes = cfg->max_bytes ? cfg->max_bytes : 256 * 1024;
    a->refresh_min_s = cfg->refresh_min_s ? cfg->refresh_min_s : 30;
    a->max_age_s = cfg->max_age_s > 0 ? cfg->max_age_s : 3600;
    snprintf(err, errlen, "out of memory");
    if (!(a->cache = mcp_auth_cache_new()))
        goto fail;
    if (!cfg->resource || !(a->prm_url = mcp_auth_metadata_url(cfg->resource))) {
        snprintf(err, errlen, "--resource %s: not an http(s) URL without query or fragment",
                 cfg->resource ? cfg->resource : "(none)");
        goto fail;
    }
    if (!cfg->issuer && !cfg->tokens_dir) {
        snprintf(err, errlen, "--resource needs --oauth-issuer or --bearer-tokens (or both)");
        goto fail;
    }
    if (!(a->resource = strdup(cfg->resource)) ||
        (cfg->issuer && !(a->issuer = strdup(cfg->issuer))) ||
        (cfg->ca_file && !(a->ca_file = strdup(cfg->ca_file))))
        goto fail;
    if (!(a->prm_json = mcp_auth_prm_render(a->resource, a->issuer, cfg->scopes_supported,
                                            cfg->nscopes_supported)))
        goto fail;
    for (size_t i = 0; i < cfg->nscopes_supported; i++) {
        char *h;
        if (asprintf(&h, "%s%s%s", a->scope_hint ? a->scope_hint : "", i ? " " : "",
                     cfg->scopes_supported[i]) < 0)
            goto fail;
        free(a->scope_hint);
        a->scope_hint = h;
    }
    if (cfg->tokens_dir && read_tokens(a, cfg->tokens_dir, err, errlen) < 0)
        goto fail;
    if (a->issuer) {
        if (discover(a, err, errlen) < 0)
            goto fail;
        struct mcp_auth_keys *k = fetch_keys(a, err, errlen);
        if (!k)
            goto fail;
        if (!(a->cur = calloc(1, sizeof(*a->cur)))) {
            mcp_auth_keys_free(k);
            goto fail;
        }
        a->cur->keys = k;
        a->cur->refs = 1;
        a->fetched_at = mono_s();
    }
    return a;
fail:
    mcp_auth_close(a);
    return NULL;
}

void mcp_auth_close(struct mcp_auth *a)
{
    if (!a)
        return;
    held_drop(a, a->cur);
    mcp_auth_cache_free(a->cache);
    for (size_t i = 0; i < a->ntoks; i++) {
        explicit_bzero(a->toks[i].token, strlen(a->toks[i].token));
        free(a->toks[i].token);
        free(a->toks[i].subject);
    }
    free(a->toks);
    free(a->resource);
    free(a->issuer);
    free(a->ca_file);
    free(a->jwks_uri);
    free(a->prm_json);
    free(a->prm_url);
    free(a->scope_hint);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

const char *mcp_auth_prm_json(const struct mcp_auth *a)
{
    return a->prm_json;
}

const char *mcp_auth_prm_url(const struct mcp_auth *a)
{
    return a->prm_url;
}

const char *mcp_auth_prm_path(const struct mcp_auth *a)
{
    /* inserted right after the origin, whose host has no '/' */
    return strstr(strstr(a->prm_url, "://") + 3, "/.well-known/oauth-protected-resource");
}

void mcp_auth_counts(const struct mcp_auth *a, struct mcp_auth_counts *n)
{
    pthread_mutex_lock((pthread_mutex_t *)&a->mu);
    n->fetches = a->fetches;
    n->limited = a->limited;
    n->cache_hits = a->hits;
    pthread_mutex_unlock((pthread_mutex_t *)&a->mu);
}

void mcp_auth_result_free(struct mcp_auth_result *r)
{
    free(r->www_authenticate);
    mcp_auth_principal_free(&r->principal);
    memset(r, 0, sizeof(*r));
}

static void deny(const struct mcp_auth *a, struct mcp_auth_result *r, int status, const char *error,
                 const char *scope)
{
    if (status == 401 && !scope)
        scope = a->scope_hint; /* MCP: a 401 should say which scopes to ask for */
    mcp_auth_principal_free(&r->principal);
    r->http_status = status;
    free(r->www_authenticate);
    r->www_authenticate =
        mcp_auth_www_authenticate(a->resource, error, r->error_description, scope);
}

/* Every static token is compared, whatever matched: the time taken says
 * nothing of which one, nor of how near a guess came. */
static bool static_token(const struct mcp_auth *a, const char *tok, size_t len,
                         struct mcp_auth_principal *p)
{
    size_t hit = a->ntoks;
    for (size_t i = 0; i < a->ntoks; i++)
        if (mcp_auth_token_equal(tok, len, a->toks[i].token, strlen(a->toks[i].token)))
            hit = i;
    if (hit == a->ntoks)
        return false;
    p->subject = strdup(a->toks[hit].subject);
    p->all_scopes = true;
    return p->subject != NULL;
}

/* Would refresh() fetch now (or is one under way)? The caller holds mu. */
static bool refresh_due(const struct mcp_auth *a, long long now)
{
    return a->refreshing || a->tried_at < 0 || a->refresh_min_s < 0 ||
           now - a->tried_at >= a->refresh_min_s;
}

/* false: nowait, and the token needs the JWKS fetched (r untouched but
 * zeroed); the caller asks again with nowait false, from a thread that
 * may wait for the issuer. */
static bool authenticate(struct mcp_auth *a, const char *authorization, struct mcp_auth_result *r,
                         bool nowait)
{
    memset(r, 0, sizeof(*r));
    const char *tok;
    size_t len;
    if (!authorization || strncasecmp(authorization, "Bearer", 6) != 0) {
        snprintf(r->error_description, sizeof(r->error_description), "no bearer token");
        deny(a, r, 401, NULL, NULL);
        return true;
    }
    if (!mcp_auth_bearer(authorization, &tok, &len) || len > MCP_AUTH_MAX_TOKEN) {
        snprintf(r->error_description, sizeof(r->error_description), "a malformed bearer token");
        deny(a, r, 401, "invalid_token", NULL);
        return true;
    }
    if (static_token(a, tok, len, &r->principal))
        return true;
    snprintf(r->error_description, sizeof(r->error_description), "the token is not valid");
    if (!a->issuer) {
        deny(a, r, 401, "invalid_token", NULL);
        return true;
    }
    struct mcp_auth_expect e = {.issuer = a->issuer,
                                .resource = a->resource,
                                .now = (long long)time(NULL),
                                .skew = MCP_AUTH_SKEW_S};
    uint8_t digest[MCP_AUTH_DIGEST];
    mcp_auth_sha256(tok, len, digest);
    long long age;
    unsigned gen;
    struct held *h = held_take(a, &age, &gen);
    if (age >= a->max_age_s) {
        pthread_mutex_lock(&a->mu);
        bool due = refresh_due(a, mono_s());
        pthread_mutex_unlock(&a->mu);
        /* old keys are still the issuer's most likely: without waiting,
         * only a refresh that would run now (not a limited one) is waited
         * for */
        if (nowait && due) {
            held_drop(a, h);
            memset(r, 0, sizeof(*r));
            return false;
        }
        if (!nowait) {
            held_drop(a, h);
            refresh(a);
            h = held_take(a, &age, &gen);
        }
    }
    pthread_mutex_lock(&a->mu);
    bool hit = mcp_auth_cache_get(a->cache, digest, gen, &e, &r->principal);
    a->hits += hit;
    pthread_mutex_unlock(&a->mu);
    if (hit) {
        held_drop(a, h);
        return true;
    }
    char *why = r->error_description;
    size_t wl = sizeof(r->error_description);
    enum mcp_auth_verdict v = mcp_auth_verify_jwt(h->keys, tok, len, &e, &r->principal, why, wl);
    if (v == MCP_AUTH_UNKNOWN_KID) {
        held_drop(a, h);
        if (nowait) {
            pthread_mutex_lock(&a->mu);
            bool due = refresh_due(a, mono_s());
            if (!due)
                a->limited++; /* what refresh() would have counted */
            pthread_mutex_unlock(&a->mu);
            if (due) {
                memset(r, 0, sizeof(*r));
                return false;
            }
        } else
            refresh(a);
        h = held_take(a, &age, &gen);
        v = mcp_auth_verify_jwt(h->keys, tok, len, &e, &r->principal, why, wl);
    }
    held_drop(a, h);
    if (v != MCP_AUTH_VALID) {
        deny(a, r, 401, "invalid_token", NULL);
        return true;
    }
    pthread_mutex_lock(&a->mu);
    mcp_auth_cache_put(a->cache, digest, gen, &r->principal);
    pthread_mutex_unlock(&a->mu);
    return true;
}

void mcp_auth_authenticate(struct mcp_auth *a, const char *authorization, struct mcp_auth_result *r)
{
    authenticate(a, authorization, r, false);
}

bool mcp_auth_authenticate_nowait(struct mcp_auth *a, const char *authorization,
                                  struct mcp_auth_result *r)
{
    return authenticate(a, authorization, r, true);
}

void mcp_auth_authorize(const struct mcp_auth *a, const json_t *scopes, struct mcp_auth_result *r)
{
    if (r->http_status || mcp_auth_scope_ok(&r->principal, scopes))
        return;
    /* RFC 6750's scope: the scopes that would do, space separated */
    char need[256] = "";
    size_t i, n = 0;
    const json_t *v;
    json_array_foreach(scopes, i, v) if (json_is_string(v) && n < sizeof(need)) n +=
        (size_t)snprintf(need + n, sizeof(need) - n, "%s%s", n ? " " : "", json_string_value(v));
    snprintf(r->error_description, sizeof(r->error_description),
             "the token has none of the scopes this tool needs (%.200s)", need);
    deny(a, r, 403, "insufficient_scope", need);
}
