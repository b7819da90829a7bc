/*
 * schema_uri.c - JSON Schema validator: URI references (RFC 3986) for $id and $ref.
 * See schema_int.h for the whole.
 */
#include "schema_int.h"

/* ------------------------------------------------------------------------ */
/* URI references (RFC 3986), as far as $id and $ref need them.             */

static void uri_split(const char *s, uri *u)
{
    memset(u, 0, sizeof(*u));
    const char *p = s;
    /* scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
        const char *q = p + 1;
        while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
               *q == '+' || *q == '-' || *q == '.')
            q++;
        if (*q == ':') {
            u->has_scheme = true;
            u->scheme = p;
            u->scheme_n = (size_t)(q - p);
            p = q + 1;
        }
    }
    if (p[0] == '/' && p[1] == '/') {
        u->has_auth = true;
        u->auth = p + 2;
        u->auth_n = strcspn(u->auth, "/?#");
        p = u->auth + u->auth_n;
    }
    u->path = p;
    u->path_n = strcspn(p, "?#");
    p += u->path_n;
    if (*p == '?') {
        u->has_query = true;
        u->query = p + 1;
        u->query_n = strcspn(u->query, "#");
        p = u->query + u->query_n;
    }
    if (*p == '#') {
        u->has_frag = true;
        u->frag = p + 1;
        u->frag_n = strlen(u->frag);
    }
}

/* Remove "." and ".." segments from a path (RFC 3986 section 5.2.4). */
static void remove_dots(sbuf *out, const char *path, size_t n)
{
    char *in = malloc(n + 1);
    if (!in) {
        out->oom = true;
        return;
    }
    memcpy(in, path, n);
    in[n] = '\0';
    size_t start = out->len; /* out may hold scheme and authority already */
    char *p = in;
    while (*p) {
        if (strncmp(p, "../", 3) == 0) {
            p += 3;
        } else if (strncmp(p, "./", 2) == 0 || strncmp(p, "/./", 3) == 0) {
            p += 2;
        } else if (strcmp(p, "/.") == 0) {
            p[1] = '/';
            p += 1;
        } else if (strncmp(p, "/../", 4) == 0 || strcmp(p, "/..") == 0) {
            if (p[3] == '\0')
                p[2] = '/', p += 2;
            else
                p += 3;
            size_t len = out->len;
            while (len > start && out->p[len - 1] != '/')
                len--;
            if (len > start)
                len--;
            sb_truncate(out, len);
        } else if (strcmp(p, ".") == 0 || strcmp(p, "..") == 0) {
            break;
        } else {
            size_t seg = (*p == '/') + strcspn(p + (*p == '/'), "/");
            sb_putn(out, p, seg);
            p += seg;
        }
    }
    free(in);
}

/* Resolve a reference against a base (RFC 3986 section 5.2.2). An empty
 * fragment is dropped: "x#" and "x" name the same resource. */
char *uri_resolve(const char *base, const char *ref)
{
    uri b, r;
    uri_split(base, &b);
    uri_split(ref, &r);
    sbuf t = {0};
    const uri *sa = r.has_scheme ? &r : &b; /* where scheme comes from */
    if (sa->has_scheme) {
        sb_putn(&t, sa->scheme, sa->scheme_n);
        sb_putc(&t, ':');
    }
    if (r.has_scheme || r.has_auth) {
        if (r.has_auth) {
            sb_puts(&t, "//");
            sb_putn(&t, r.auth, r.auth_n);
        }
        remove_dots(&t, r.path, r.path_n);
        if (r.has_query) {
            sb_putc(&t, '?');
            sb_putn(&t, r.query, r.query_n);
        }
    } else {
        if (b.has_auth) {
            sb_puts(&t, "//");
            sb_putn(&t, b.auth, b.auth_n);
        }
        if (r.path_n == 0) {
            sb_putn(&t, b.path, b.path_n);
            if (r.has_query || b.has_query) {
                sb_putc(&t, '?');
                sb_putn(&t, r.has_query ? r.query : b.query, r.has_query ? r.query_n : b.query_n);
            }
        } else {
            if (r.path[0] == '/') {
                remove_dots(&t, r.path, r.path_n);
            } else {
                sbuf merged = {0};
                if (b.has_auth && b.path_n == 0) {
                    sb_putc(&merged, '/');
                } else {
                    size_t dir = b.path_n;
                    while (dir > 0 && b.path[dir - 1] != '/')
                        dir--;
                    sb_putn(&merged, b.path, dir);
                }
                sb_putn(&merged, r.path, r.path_n);
                if (merged.oom)
                    t.oom = true;
                else
                    remove_dots(&t, merged.p, merged.len);
                free(merged.p);
            }
            if (r.has_query) {
                sb_putc(&t, '?');
                sb_putn(&t, r.query, r.query_n);
            }
        }
    }
    if (r.has_frag && r.frag_n > 0) {
        sb_putc(&t, '#');
        sb_putn(&t, r.frag, r.frag_n);
    }
    if (!t.oom && !t.p)
        sb_puts(&t, "");
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    return t.p;
}

/* The draft a "$schema" names, or 0 for one not supported. */
int draft_of_uri(const char *text)
{
    static const struct {
        const char *uri;
        int draft;
    } known[] = {
        {"http://json-schema.org/draft-07/schema", DRAFT_07},
        {"https://json-schema.org/draft-07/schema", DRAFT_07},
        {"https://json-schema.org/draft/2019-09/schema", DRAFT_2019},
        {"https://json-schema.org/draft/2020-12/schema", DRAFT_2020},
    };
    size_t n = strlen(text);
    if (n && text[n - 1] == '#')
        n--; /* an empty fragment names the same document */
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strlen(known[i].uri) == n && strncmp(known[i].uri, text, n) == 0)
            return known[i].draft;
    return 0;
}
