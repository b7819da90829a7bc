/*
 * schema_ref.c - JSON Schema validator: $ref resolution: fragments, JSON pointers, $id lookup.
 * See schema_int.h for the whole.
 */
#include "schema_int.h"

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A URI fragment percent-decodes to the JSON pointer ("#/a%25b" is
 * "/a%b"); a "%" not followed by two hex digits is kept as it is. */
static char *percent_decode(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0) {
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

/* The value a JSON pointer (RFC 6901) names inside root, or NULL. */
static const json_t *pointer_get(const json_t *root, const char *ptr, bool *oom)
{
    const json_t *cur = root;
    const char *p = ptr;
    sbuf tok = {0};
    if (*p && *p != '/')
        return NULL;
    while (cur && *p == '/') {
        p++;
        sb_truncate(&tok, 0);
        sb_puts(&tok, ""); /* tok.p is a string even for an empty token */
        while (*p && *p != '/') {
            char c = *p++;
            if (c == '~') {
                if (*p != '0' && *p != '1') {
                    cur = NULL;
                    break;
                }
                c = *p++ == '0' ? '~' : '/';
            }
            sb_putc(&tok, c);
        }
        if (tok.oom) {
            *oom = true;
            cur = NULL;
        } else if (!cur) {
            break;
        } else if (json_is_object(cur)) {
            cur = json_object_get(cur, tok.p);
        } else if (json_is_array(cur)) {
            /* An index: digits, no leading zero, within the array. */
            const char *t = tok.p;
            size_t idx = 0;
            bool ok = *t && (t[0] != '0' || t[1] == '\0');
            for (; ok && *t; t++) {
                if (*t < '0' || *t > '9' || idx > (SIZE_MAX - 9) / 10)
                    ok = false;
                else
                    idx = idx * 10 + (size_t)(*t - '0');
            }
            cur = ok ? json_array_get(cur, idx) : NULL;
        } else {
            cur = NULL;
        }
    }
    free(tok.p);
    return cur;
}

/* Point every $ref at its node. Targets no ordinary walk reached (a $ref
 * into an unknown keyword, say) are compiled here, which can queue more. */
int resolve_refs(compiler *cc)
{
    te_schema *s = cc->s;
    for (size_t i = 0; i < cc->nrefs; i++) {
        pending_ref p = cc->refs[i]; /* a copy: compiling may move the array */
        char *hash = strchr(p.uri, '#');
        const char *frag = hash ? hash + 1 : "";
        char *abs = strndup(p.uri, hash ? (size_t)(hash - p.uri) : strlen(p.uri));
        char *decoded = percent_decode(frag);
        if (!abs || !decoded) {
            free(abs);
            free(decoded);
            return cc_oom(cc);
        }
        const json_t *target = NULL;
        const char *base = NULL;
        node *tn = NULL;
        bool oom = false;
        const id_entry *e = NULL;
        if (*frag && *frag != '/') {
            e = find_id(cc, p.uri); /* a plain-name fragment: an anchor */
            if (e)
                target = e->json;
        } else if ((e = find_id(cc, abs))) {
            target = pointer_get(e->json, decoded, &oom);
        } else if (draft_of_uri(abs) && !*frag) {
            /* only the draft the schema is written in: its meta-schema */
            if (draft_of_uri(abs) == s->draft)
                tn = &s->meta_node;
        }
        if (e)
            base = e->base;
        free(abs);
        int rc = 0;
        sb_truncate(&cc->ptr, 0);
        if (oom) {
            rc = cc_oom(cc);
        } else if (!tn && (!target || (!json_is_object(target) && !json_is_boolean(target)))) {
            sb_puts(&cc->ptr, p.where);
            char *msg = quoted_message("", p.text,
                                       target ? " does not point to a schema"
                                              : " does not resolve within the schema");
            rc = cc->ptr.oom || !msg ? cc_oom(cc) : cc_fail(cc, "%s", msg);
            free(msg);
        } else if (target) {
            /* Messages about a target compiled here name its pointer. */
            sb_puts(&cc->ptr, *frag == '/' ? decoded : "");
            cc->base = base;
            cc->depth = 0;
            rc = cc->ptr.oom ? cc_oom(cc) : cc->subcompile(cc, target, &tn);
        }
        free(decoded);
        sb_truncate(&cc->ptr, 0);
        if (rc)
            return rc;
        p.n->ref = tn;
    }
    return 0;
}
