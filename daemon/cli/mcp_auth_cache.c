/*
 * mcp_auth_cache.c - tokens already verified, by their SHA-256, so a client
 * that sends the same access token on every request (what MCP clients do
 * for a session) pays its signature check once (mcp_auth.h). No I/O, no
 * lock: mcp_auth_keys.c holds its lock around each call.
 *
 * An entry keeps what the token said ("exp", the principal) and
 * the generation of the key set it was verified with: a hit needs the
 * token still within its time and the keys unchanged since, so a key the
 * issuer withdrew stops its tokens at the next refresh. Direct-mapped: a
 * newer token takes the slot of an older one; a miss only costs the
 * verification the cache would have saved.
 */
#include <stdlib.h>
#include <string.h>

#include <nettle/memops.h>

#include "mcp_auth.h"

#define SLOTS 512 /* clients of one front at a time; 512 x ~100 bytes */

struct slot {
    uint8_t digest[MCP_AUTH_DIGEST];
    bool used;
    unsigned gen;
    long long exp;
    struct mcp_auth_principal p;
};
struct mcp_auth_cache {
    struct slot s[SLOTS];
};

struct mcp_auth_cache *mcp_auth_cache_new(void)
{
    return calloc(1, sizeof(struct mcp_auth_cache));
}

void mcp_auth_cache_free(struct mcp_auth_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < SLOTS; i++)
        mcp_auth_principal_free(&c->s[i].p);
    free(c);
}

static struct slot *slot_of(struct mcp_auth_cache *c, const uint8_t digest[32])
{
    return &c->s[((size_t)digest[0] << 8 | digest[1]) % SLOTS];
}

static int principal_copy(struct mcp_auth_principal *to, const struct mcp_auth_principal *from)
{
    memset(to, 0, sizeof(*to));
    to->all_scopes = from->all_scopes;
    to->exp = from->exp;
    if (!(to->subject = strdup(from->subject)) ||
        (from->nscopes && !(to->scopes = calloc(from->nscopes, sizeof(*to->scopes)))))
        goto fail;
    for (; to->nscopes < from->nscopes; to->nscopes++)
        if (!(to->scopes[to->nscopes] = strdup(from->scopes[to->nscopes])))
            goto fail;
    return 0;
fail:
    mcp_auth_principal_free(to);
    return -1;
}

bool mcp_auth_cache_get(struct mcp_auth_cache *c, const uint8_t digest[32], unsigned gen,
                        const struct mcp_auth_expect *e, struct mcp_auth_principal *p)
{
    struct slot *s = slot_of(c, digest);
    if (!s->used || !memeql_sec(s->digest, digest, MCP_AUTH_DIGEST))
        return false;
    /* "nbf" was passed when it was verified, and time only moves on */
    if (s->gen != gen || s->exp + e->skew <= e->now) {
        s->used = false; /* it will not be valid again: free the slot */
        mcp_auth_principal_free(&s->p);
        return false;
    }
    return principal_copy(p, &s->p) == 0;
}

void mcp_auth_cache_put(struct mcp_auth_cache *c, const uint8_t digest[32], unsigned gen,
                        const struct mcp_auth_principal *p)
{
    struct slot *s = slot_of(c, digest);
    mcp_auth_principal_free(&s->p);
    s->used = principal_copy(&s->p, p) == 0;
    memcpy(s->digest, digest, MCP_AUTH_DIGEST);
    s->gen = gen;
    s->exp = p->exp;
}
