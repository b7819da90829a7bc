/*
 * schema_cckw.c - JSON Schema validator: the parts compiling is built of
 * (schema_compile.c walks a schema's keywords with them): the map from a
 * schema object to its node, the $id table ($id, $anchor), a keyword's
 * value checked against what the meta-schema allows, and a subschema
 * compiled at its JSON pointer (through compiler.subcompile, which is
 * compile()). See schema_int.h for the whole.
 */
#include "schema_int.h"

static const struct {
    const char *name;
    unsigned bit;
} type_names[] = {
    {"null", TY_NULL},     {"boolean", TY_BOOLEAN}, {"object", TY_OBJECT},   {"array", TY_ARRAY},
    {"number", TY_NUMBER}, {"string", TY_STRING},   {"integer", TY_INTEGER},
};

bool cc_grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, c * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = c;
    return true;
}

static size_t map_slot(const compiler *cc, const json_t *key)
{
    return (size_t)mix64((uint64_t)(uintptr_t)key) & (cc->capmap - 1);
}

node *map_get(const compiler *cc, const json_t *key)
{
    if (!cc->capmap)
        return NULL;
    for (size_t i = map_slot(cc, key);; i = (i + 1) & (cc->capmap - 1)) {
        if (cc->map[i].key == key)
            return cc->map[i].value;
        if (!cc->map[i].key)
            return NULL;
    }
}

bool map_put(compiler *cc, const json_t *key, node *value)
{
    if ((cc->mapn + 1) * 2 > cc->capmap) {
        size_t cap = cc->capmap ? cc->capmap * 2 : 64;
        map_entry *old = cc->map;
        size_t oldcap = cc->capmap;
        cc->map = calloc(cap, sizeof(*cc->map));
        if (!cc->map) {
            cc->map = old;
            return false;
        }
        cc->capmap = cap;
        for (size_t i = 0; i < oldcap; i++) {
            if (!old[i].key)
                continue;
            size_t j = map_slot(cc, old[i].key);
            while (cc->map[j].key)
                j = (j + 1) & (cap - 1);
            cc->map[j] = old[i];
        }
        free(old);
    }
    size_t j = map_slot(cc, key);
    while (cc->map[j].key)
        j = (j + 1) & (cc->capmap - 1);
    cc->map[j].key = key;
    cc->map[j].value = value;
    cc->mapn++;
    return true;
}

static char *cc_own(compiler *cc, char *str)
{
    if (!str)
        return NULL;
    if (!cc_grow((void **)&cc->owned, &cc->capowned, cc->nowned, sizeof(*cc->owned))) {
        free(str);
        return NULL;
    }
    cc->owned[cc->nowned++] = str;
    return str;
}

int add_id(compiler *cc, const char *uri_text, const json_t *json, const char *base)
{
    for (size_t i = 0; i < cc->nids; i++)
        if (strcmp(cc->ids[i].uri, uri_text) == 0)
            return 0; /* the first one wins, as in document order */
    char *copy = strdup(uri_text);
    if (!copy || !cc_grow((void **)&cc->ids, &cc->capids, cc->nids, sizeof(*cc->ids))) {
        free(copy);
        return cc_oom(cc);
    }
    cc->ids[cc->nids++] = (id_entry){copy, json, base};
    return 0;
}

/* Compile j at "<pointer>/<seg>" (and "/<seg2>" when seg2 is set). */
int compile_at(compiler *cc, const json_t *j, const char *seg, const char *seg2, node **out)
{
    size_t mark = cc->ptr.len;
    sb_put_segment(&cc->ptr, seg);
    if (seg2)
        sb_put_segment(&cc->ptr, seg2);
    int rc = cc->ptr.oom ? cc_oom(cc) : cc->subcompile(cc, j, out);
    sb_truncate(&cc->ptr, mark);
    return rc;
}

static int compile_index(compiler *cc, const json_t *j, const char *seg, size_t i, node **out)
{
    char idx[24];
    snprintf(idx, sizeof(idx), "%zu", i);
    return compile_at(cc, j, seg, idx, out);
}

/* A keyword's value, or NULL; -EINVAL in *rc when it is not of one of the
 * types in mask. */
const json_t *cc_keyword(compiler *cc, const json_t *obj, const char *kw, unsigned mask,
                         const char *what, int *rc)
{
    const json_t *v = json_object_get(obj, kw);
    if (v && !(types_of(v) & mask)) {
        char text[96];
        snprintf(text, sizeof(text), "expected %s", what);
        *rc = kw_fail(cc, kw, text);
        return NULL;
    }
    return v;
}

/* A non-negative integer keyword (1.0 counts), or NO_LIMIT when absent. */
int count_keyword(compiler *cc, const json_t *obj, const char *kw, long long *out)
{
    int rc = 0;
    *out = NO_LIMIT;
    const json_t *v = cc_keyword(cc, obj, kw, TY_INTEGER, "a non-negative integer", &rc);
    if (!v)
        return rc;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return kw_fail(cc, kw, "expected a non-negative integer");
        *out = json_integer_value(v);
        return 0;
    }
    double d = json_real_value(v);
    if (d < 0)
        return kw_fail(cc, kw, "expected a non-negative integer");
    *out = d >= 9223372036854775807.0 ? LLONG_MAX : (long long)d;
    return 0;
}

/* An array of distinct strings ("required", a dependency's names). */
int check_string_array(compiler *cc, const json_t *arr, const char *kw, const char *kw2)
{
    size_t mark = cc->ptr.len;
    sb_put_segment(&cc->ptr, kw);
    if (kw2)
        sb_put_segment(&cc->ptr, kw2);
    int rc = cc->ptr.oom ? cc_oom(cc) : 0;
    for (size_t i = 0; rc == 0 && i < json_array_size(arr); i++) {
        const json_t *e = json_array_get(arr, i);
        if (!te_json_is_text(e)) {
            rc = cc_fail(cc, "expected an array of strings");
            break;
        }
        for (size_t k = 0; k < i; k++)
            if (json_eq(e, json_array_get(arr, k), 0) == 1) {
                char *msg = quoted_message("duplicate ", json_string_value(e), "");
                rc = msg ? cc_fail(cc, "%s", msg) : cc_oom(cc);
                free(msg);
                break;
            }
    }
    sb_truncate(&cc->ptr, mark);
    return rc;
}

/* An array of one or more schemas (allOf, anyOf, oneOf, items). */
int compile_schema_array(compiler *cc, const json_t *arr, const char *kw, node ***out, size_t *n)
{
    if (json_array_size(arr) == 0)
        return kw_fail(cc, kw, "expected a non-empty array of schemas");
    node **list = NULL;
    if (cc->s) {
        list = calloc(json_array_size(arr), sizeof(*list));
        if (!list)
            return cc_oom(cc);
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        node *child = NULL;
        int rc = compile_index(cc, json_array_get(arr, i), kw, i, &child);
        if (rc) {
            free(list);
            return rc;
        }
        if (list)
            list[i] = child;
    }
    if (out) {
        *out = list;
        *n = json_array_size(arr);
    } else {
        free(list);
    }
    return 0;
}

int compile_type(compiler *cc, const json_t *v, node *n)
{
    const char *expected = "expected a string or an array of strings";
    sbuf text = {0};
    unsigned types = 0;
    size_t count = json_is_array(v) ? json_array_size(v) : 1;
    if (!te_json_is_text(v) && !(json_is_array(v) && count > 0))
        return kw_fail(cc, "type", expected);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!te_json_is_text(e)) {
            rc = kw_fail(cc, "type", expected);
            break;
        }
        unsigned bit = 0;
        for (size_t k = 0; k < sizeof(type_names) / sizeof(type_names[0]); k++)
            if (strcmp(json_string_value(e), type_names[k].name) == 0)
                bit = type_names[k].bit;
        if (!bit || (types & bit)) {
            char *msg =
                quoted_message(bit ? "duplicate type " : "unknown type ", json_string_value(e), "");
            rc = msg ? kw_fail(cc, "type", msg) : cc_oom(cc);
            free(msg);
            break;
        }
        types |= bit;
        if (i > 0)
            sb_puts(&text, i + 1 == count ? " or " : ", ");
        sb_puts(&text, json_string_value(e));
    }
    if (rc == 0 && text.oom)
        rc = cc_oom(cc);
    if (rc == 0 && n) {
        n->types = types;
        n->types_text = text.p;
        text.p = NULL;
    }
    free(text.p);
    return rc;
}

/* $id: a new base URI for what is inside, and a name $ref can use. */
int compile_id(compiler *cc, const json_t *j, const char *id)
{
    char *full = cc_own(cc, uri_resolve(cc->base, id));
    if (!full)
        return cc_oom(cc);
    char *hash = strchr(full, '#');
    if (hash && hash[1] && hash[1] != '/') {
        /* A plain-name fragment ("#foo") names this schema but does not
         * change the base. */
        char *abs = cc_own(cc, strndup(full, (size_t)(hash - full)));
        if (!abs)
            return cc_oom(cc);
        int rc = add_id(cc, full, j, abs);
        if (rc)
            return rc;
        if (hash == full || find_id(cc, abs))
            return 0;
        cc->base = abs;
        return add_id(cc, abs, j, abs);
    }
    if (hash)
        *hash = '\0';
    cc->base = full;
    return add_id(cc, full, j, full);
}

/* "$schema": one of the drafts above, and below the root the root's own
 * (a document mixing drafts would be validated by one of them). */
int check_schema_keyword(compiler *cc, const json_t *v)
{
    if (!v)
        return 0;
    int d = draft_of_uri(json_string_value(v));
    if (!d) {
        char *msg = quoted_message("unsupported $schema ", json_string_value(v),
                                   ": supported are draft-07 (http://json-schema.org/draft-07/"
                                   "schema#, the default), 2019-09 "
                                   "(https://json-schema.org/draft/2019-09/schema) and 2020-12 "
                                   "(https://json-schema.org/draft/2020-12/schema)");
        int rc = msg ? kw_fail(cc, "$schema", msg) : cc_oom(cc);
        free(msg);
        return rc;
    }
    if (d != cc->draft)
        return kw_fail(cc, "$schema", "names another draft than the schema's root");
    return 0;
}

/* Keywords of the later drafts that are not implemented: refused rather
 * than ignored, so that a schema never means less than it says. */
int check_unsupported(compiler *cc, const json_t *j)
{
    static const struct {
        const char *kw;
        int from;
    } unsupported[] = {
        {"$recursiveRef", DRAFT_2019},
        {"$dynamicRef", DRAFT_2020},
        {"$vocabulary", DRAFT_2019},
    };
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
        if (cc->draft >= unsupported[i].from && json_object_get(j, unsupported[i].kw))
            return kw_fail(cc, unsupported[i].kw,
                           "not supported by this validator (refused rather than ignored)");
    return 0;
}

/* $anchor (and $dynamicAnchor, which without $dynamicRef is the same): a
 * plain-name fragment for this schema under the base in force. */
int compile_anchor(compiler *cc, const json_t *j, const char *kw)
{
    int rc = 0;
    const json_t *v = cc_keyword(cc, j, kw, TY_STRING, "a string", &rc);
    if (!v)
        return rc;
    const char *a = json_string_value(v);
    bool ok = (*a >= 'A' && *a <= 'Z') || (*a >= 'a' && *a <= 'z') || *a == '_';
    for (const char *p = a; ok && *++p;)
        ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
             *p == '-' || *p == '_' || *p == '.';
    if (!ok)
        return kw_fail(cc, kw, "expected a name: a letter or '_', then letters, digits, '-_.'");
    if (!cc->s)
        return 0;
    sbuf u = {0};
    sb_puts(&u, cc->base);
    char *hash = u.p ? strchr(u.p, '#') : NULL;
    if (hash)
        sb_truncate(&u, (size_t)(hash - u.p));
    sb_putc(&u, '#');
    sb_puts(&u, a);
    if (u.oom) {
        free(u.p);
        return cc_oom(cc);
    }
    char *base = cc_own(cc, strdup(cc->base));
    rc = base ? add_id(cc, u.p, j, base) : cc_oom(cc);
    free(u.p);
    return rc;
}
