/*
 * schema_compile.c - JSON Schema validator: compiling a schema into its node graph (keywords
 * checked against the meta-schema), and the meta-schema check. See schema_int.h for the whole.
 */
#include "schema_int.h"

static void node_free(node *n)
{
    free(n->types_text);
    pcre2_code_free(n->pattern);
    free(n->props);
    for (size_t i = 0; i < n->npprops; i++)
        pcre2_code_free(n->pprops[i].re);
    free(n->pprops);
    free(n->item_list);
    free(n->all_of);
    free(n->any_of);
    free(n->one_of);
    free(n->deps);
    free(n);
}

void te_schema_free(te_schema *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nnodes; i++)
        node_free(s->nodes[i]);
    free(s->nodes);
    json_decref(s->doc);
    free(s);
}
/* ------------------------------------------------------------------------ */
/* Compiling. The same walk also serves the meta-schema check ("is this
 * value a schema?"), with s == NULL: then nothing is built, no regular
 * expression compiled and no $ref resolved, exactly as the meta-schema
 * itself would judge (it treats "pattern" and "$ref" as plain strings).     */

static const struct {
    const char *name;
    unsigned bit;
} type_names[] = {
    {"null", TY_NULL},     {"boolean", TY_BOOLEAN}, {"object", TY_OBJECT},   {"array", TY_ARRAY},
    {"number", TY_NUMBER}, {"string", TY_STRING},   {"integer", TY_INTEGER},
};

static bool grow(void **arr, size_t *cap, size_t n, size_t elem)
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

static node *map_get(const compiler *cc, const json_t *key)
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

static bool map_put(compiler *cc, const json_t *key, node *value)
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

static char *own(compiler *cc, char *str)
{
    if (!str)
        return NULL;
    if (!grow((void **)&cc->owned, &cc->capowned, cc->nowned, sizeof(*cc->owned))) {
        free(str);
        return NULL;
    }
    cc->owned[cc->nowned++] = str;
    return str;
}

static int add_id(compiler *cc, const char *uri_text, const json_t *json, const char *base)
{
    for (size_t i = 0; i < cc->nids; i++)
        if (strcmp(cc->ids[i].uri, uri_text) == 0)
            return 0; /* the first one wins, as in document order */
    char *copy = strdup(uri_text);
    if (!copy || !grow((void **)&cc->ids, &cc->capids, cc->nids, sizeof(*cc->ids))) {
        free(copy);
        return cc_oom(cc);
    }
    cc->ids[cc->nids++] = (id_entry){copy, json, base};
    return 0;
}

/* Compile j at "<pointer>/<seg>" (and "/<seg2>" when seg2 is set). */
static int compile_at(compiler *cc, const json_t *j, const char *seg, const char *seg2, node **out)
{
    size_t mark = cc->ptr.len;
    sb_put_segment(&cc->ptr, seg);
    if (seg2)
        sb_put_segment(&cc->ptr, seg2);
    int rc = cc->ptr.oom ? cc_oom(cc) : compile(cc, j, out);
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
static const json_t *keyword(compiler *cc, const json_t *obj, const char *kw, unsigned mask,
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
static int count_keyword(compiler *cc, const json_t *obj, const char *kw, long long *out)
{
    int rc = 0;
    *out = NO_LIMIT;
    const json_t *v = keyword(cc, obj, kw, TY_INTEGER, "a non-negative integer", &rc);
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
static int check_string_array(compiler *cc, const json_t *arr, const char *kw, const char *kw2)
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
static int compile_schema_array(compiler *cc, const json_t *arr, const char *kw, node ***out,
                                size_t *n)
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

static int compile_type(compiler *cc, const json_t *v, node *n)
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
static int compile_id(compiler *cc, const json_t *j, const char *id)
{
    char *full = own(cc, uri_resolve(cc->base, id));
    if (!full)
        return cc_oom(cc);
    char *hash = strchr(full, '#');
    if (hash && hash[1] && hash[1] != '/') {
        /* A plain-name fragment ("#foo") names this schema but does not
         * change the base. */
        char *abs = own(cc, strndup(full, (size_t)(hash - full)));
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
static int check_schema_keyword(compiler *cc, const json_t *v)
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
static int check_unsupported(compiler *cc, const json_t *j)
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
static int compile_anchor(compiler *cc, const json_t *j, const char *kw)
{
    int rc = 0;
    const json_t *v = keyword(cc, j, kw, TY_STRING, "a string", &rc);
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
    char *base = own(cc, strdup(cc->base));
    rc = base ? add_id(cc, u.p, j, base) : cc_oom(cc);
    free(u.p);
    return rc;
}

static int compile_object_keywords(compiler *cc, const json_t *j, node *n);

int compile(compiler *cc, const json_t *j, node **out)
{
    te_schema *s = cc->s;
    *out = NULL;
    if (json_is_true(j)) {
        *out = s ? &s->true_node : NULL;
        return 0;
    }
    if (json_is_false(j)) {
        *out = s ? &s->false_node : NULL;
        return 0;
    }
    if (!json_is_object(j))
        return cc_fail(cc, "expected a schema (an object or a boolean)");
    if (cc->depth >= TE_SCHEMA_MAX_DEPTH)
        return cc_fail(cc, "nesting too deep");
    node *n = NULL;
    if (s) {
        n = map_get(cc, j);
        if (n) {
            *out = n;
            return 0;
        }
        n = calloc(1, sizeof(*n));
        if (!n || !grow((void **)&s->nodes, &s->capnodes, s->nnodes, sizeof(*s->nodes))) {
            free(n);
            return cc_oom(cc);
        }
        s->nodes[s->nnodes++] = n;
        n->kind = NODE_SCHEMA;
        if (!map_put(cc, j, n))
            return cc_oom(cc);
    }
    const char *saved_base = cc->base;
    cc->depth++;
    int rc = compile_object_keywords(cc, j, n);
    cc->depth--;
    cc->base = saved_base;
    *out = n;
    return rc;
}

/* 2019-09 and later: dependentRequired (names) and dependentSchemas, kept
 * as draft-07's "dependencies" are. */
static int compile_dependent(compiler *cc, const json_t *j, node *n)
{
    if (cc->draft < DRAFT_2019)
        return 0;
    int rc = 0;
    const json_t *req = keyword(cc, j, "dependentRequired", TY_OBJECT, "an object", &rc);
    if (rc)
        return rc;
    const json_t *sch = keyword(cc, j, "dependentSchemas", TY_OBJECT, "an object", &rc);
    if (rc)
        return rc;
    if (!req && !sch)
        return 0;
    if (n) {
        n->deps = calloc(json_object_size(req) + json_object_size(sch) + 1, sizeof(*n->deps));
        if (!n->deps)
            return cc_oom(cc);
    }
    const char *key;
    json_t *e;
    if (req)
        json_object_foreach((json_t *)req, key, e)
        {
            if (!json_is_array(e)) {
                size_t mark = cc->ptr.len;
                sb_put_segment(&cc->ptr, "dependentRequired");
                rc = kw_fail(cc, key, "expected an array of strings");
                sb_truncate(&cc->ptr, mark);
                return rc;
            }
            if ((rc = check_string_array(cc, e, "dependentRequired", key)))
                return rc;
            if (n)
                n->deps[n->ndeps++] = (dependency){key, e, NULL};
        }
    if (sch)
        json_object_foreach((json_t *)sch, key, e)
        {
            node *child;
            if ((rc = compile_at(cc, e, "dependentSchemas", key, &child)))
                return rc;
            if (n)
                n->deps[n->ndeps++] = (dependency){key, NULL, child};
        }
    return 0;
}

static int compile_object_keywords(compiler *cc, const json_t *j, node *n)
{
    int rc = 0;
    const json_t *v;
    te_schema *s = cc->s;

    /* Annotations: checked for type only, as the meta-schema does. */
    static const char *const string_kws[] = {"$schema",        "$comment", "title",
                                             "description",    "format",   "contentMediaType",
                                             "contentEncoding"};
    for (size_t i = 0; i < sizeof(string_kws) / sizeof(string_kws[0]); i++)
        if (!keyword(cc, j, string_kws[i], TY_STRING, "a string", &rc) && rc)
            return rc;
    if ((!keyword(cc, j, "readOnly", TY_BOOLEAN, "a boolean", &rc) && rc) ||
        (!keyword(cc, j, "writeOnly", TY_BOOLEAN, "a boolean", &rc) && rc) ||
        (!keyword(cc, j, "examples", TY_ARRAY, "an array", &rc) && rc))
        return rc;

    if ((rc = check_schema_keyword(cc, json_object_get(j, "$schema"))) ||
        (rc = check_unsupported(cc, j)))
        return rc;
    bool later = cc->draft >= DRAFT_2019;
    const json_t *ref = keyword(cc, j, "$ref", TY_STRING, "a string", &rc);
    if (rc)
        return rc;
    const json_t *id = keyword(cc, j, "$id", TY_STRING, "a string", &rc);
    if (rc)
        return rc;
    if (later && id) {
        const char *hash = strchr(json_string_value(id), '#');
        if (hash && hash[1])
            return kw_fail(cc, "$id", "expected no fragment (a name is $anchor's)");
    }
    /* Draft-07: next to a $ref every keyword, $id included, is ignored;
     * from 2019-09 on, $ref is a keyword like the others. */
    if (s && id && (!ref || later) && (rc = compile_id(cc, j, json_string_value(id))))
        return rc;
    if (later && ((rc = compile_anchor(cc, j, "$anchor")) ||
                  (cc->draft >= DRAFT_2020 && (rc = compile_anchor(cc, j, "$dynamicAnchor")))))
        return rc;
    if (later && !keyword(cc, j, "$recursiveAnchor", TY_BOOLEAN, "a boolean", &rc) && rc)
        return rc;
    if (n && ref)
        n->ref_too = later;
    if (s && ref) {
        if (!grow((void **)&cc->refs, &cc->caprefs, cc->nrefs, sizeof(*cc->refs)))
            return cc_oom(cc);
        pending_ref *p = &cc->refs[cc->nrefs];
        p->n = n;
        p->text = json_string_value(ref);
        p->uri = uri_resolve(cc->base, json_string_value(ref));
        sbuf where = {0};
        sb_puts(&where, cc->ptr.len ? cc->ptr.p : "");
        sb_puts(&where, "/$ref");
        p->where = where.p;
        if (!p->uri || where.oom) {
            free(p->uri);
            free(p->where);
            return cc_oom(cc);
        }
        cc->nrefs++;
    }

    if ((v = json_object_get(j, "type")) && (rc = compile_type(cc, v, n)))
        return rc;
    if ((v = keyword(cc, j, "enum", TY_ARRAY, "an array", &rc)) && n)
        n->enum_values = v;
    if (rc)
        return rc;
    if ((v = json_object_get(j, "const")) && n)
        n->const_value = v;

    /* Numbers. */
    static const char *const bounds[] = {"minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum", "multipleOf"};
    const json_t *bv[5];
    for (size_t i = 0; i < 5; i++)
        if (!(bv[i] = keyword(cc, j, bounds[i], TY_NUMBER, "a number", &rc)) && rc)
            return rc;
    if (bv[4]) {
        bool positive = te_json_is_rawnum(bv[4])
                            ? te_json_rawnum_text(bv[4])[0] != '-' && decimal_of(bv[4]).digits > 0
                        : json_is_integer(bv[4]) ? json_integer_value(bv[4]) > 0
                                                 : json_real_value(bv[4]) > 0;
        if (!positive)
            return kw_fail(cc, "multipleOf",
                           te_json_is_rawnum(bv[4])
                               ? "expected a number greater than 0 of at most 19 digits"
                               : "expected a number greater than 0");
    }
    if (n) {
        n->minimum = bv[0];
        n->maximum = bv[1];
        n->xminimum = bv[2];
        n->xmaximum = bv[3];
        n->multiple_of = bv[4];
        if (bv[4])
            n->multiple = decimal_of(bv[4]);
    }

    /* Counts: string lengths, item and property counts. */
    long long lim[6];
    static const char *const counts[] = {"minLength", "maxLength",     "minItems",
                                         "maxItems",  "minProperties", "maxProperties"};
    for (size_t i = 0; i < 6; i++)
        if ((rc = count_keyword(cc, j, counts[i], &lim[i])))
            return rc;
    if (n) {
        n->min_length = lim[0];
        n->max_length = lim[1];
        n->min_items = lim[2];
        n->max_items = lim[3];
        n->min_props = lim[4];
        n->max_props = lim[5];
    }
    if (n)
        n->min_contains = n->max_contains = NO_LIMIT;
    if (later && ((rc = count_keyword(cc, j, "minContains", n ? &n->min_contains : &lim[0])) ||
                  (rc = count_keyword(cc, j, "maxContains", n ? &n->max_contains : &lim[0]))))
        return rc;
    /* Strings. */
    if ((v = keyword(cc, j, "pattern", TY_STRING, "a string", &rc)) && n) {
        n->pattern_source = json_string_value(v);
        if ((rc = regex_compile(cc, "pattern", n->pattern_source, &n->pattern)))
            return rc;
    }
    if (rc)
        return rc;

    /* Arrays. 2020-12: prefixItems is the array form, and items applies
     * after it, as additionalItems does after an array of items. */
    bool d2020 = cc->draft >= DRAFT_2020;
    if (d2020 && (v = keyword(cc, j, "prefixItems", TY_ARRAY, "a non-empty array of schemas", &rc)))
        rc = compile_schema_array(cc, v, "prefixItems", n ? &n->item_list : NULL,
                                  n ? &n->nitem_list : NULL);
    if (rc)
        return rc;
    if (d2020 && (v = json_object_get(j, "items"))) {
        node *items;
        if (json_is_array(v))
            return kw_fail(cc, "items", "expected a schema (in 2020-12 an array is prefixItems)");
        if ((rc = compile_at(cc, v, "items", NULL, &items)))
            return rc;
        if (n && n->item_list)
            n->additional_items = items;
        else if (n)
            n->items = items;
    } else if ((v = json_object_get(j, "items"))) {
        if (json_is_array(v)) {
            if ((rc = compile_schema_array(cc, v, "items", n ? &n->item_list : NULL,
                                           n ? &n->nitem_list : NULL)))
                return rc;
        } else {
            node *items;
            if ((rc = compile_at(cc, v, "items", NULL, &items)))
                return rc;
            if (n)
                n->items = items;
        }
    }
    static const char *const single[] = {"additionalItems",
                                         "contains",
                                         "additionalProperties",
                                         "propertyNames",
                                         "not",
                                         "if",
                                         "then",
                                         "else"};
    node *sub[8] = {NULL};
    for (size_t i = d2020 ? 1 : 0; i < 8; i++) /* 2020-12 has no additionalItems */
        if ((v = json_object_get(j, single[i])) &&
            (rc = compile_at(cc, v, single[i], NULL, &sub[i])))
            return rc;
    if (n) {
        if (!d2020)
            n->additional_items = sub[0];
        n->contains = sub[1];
        n->additional_props = sub[2];
        n->property_names = sub[3];
        n->not_schema = sub[4];
        n->if_schema = sub[5];
        n->then_schema = sub[6];
        n->else_schema = sub[7];
    }
    if (later) {
        node *up = NULL, *ui = NULL;
        if (((v = json_object_get(j, "unevaluatedProperties")) &&
             (rc = compile_at(cc, v, "unevaluatedProperties", NULL, &up))) ||
            ((v = json_object_get(j, "unevaluatedItems")) &&
             (rc = compile_at(cc, v, "unevaluatedItems", NULL, &ui))))
            return rc;
        if (n) {
            n->uneval_props = up;
            n->uneval_items = ui;
            n->contains_annotates = d2020;
        }
    }
    if ((v = keyword(cc, j, "uniqueItems", TY_BOOLEAN, "a boolean", &rc)) && n)
        n->unique_items = json_is_true(v);
    if (rc)
        return rc;

    /* Objects. */
    if ((v = keyword(cc, j, "required", TY_ARRAY, "an array of strings", &rc))) {
        if ((rc = check_string_array(cc, v, "required", NULL)))
            return rc;
        if (n)
            n->required = v;
    }
    if (rc)
        return rc;
    if ((v = keyword(cc, j, "properties", TY_OBJECT, "an object", &rc))) {
        if (n) {
            n->props_json = v;
            n->props = calloc(json_object_size(v) + 1, sizeof(*n->props));
            if (!n->props)
                return cc_oom(cc);
        }
        const char *key;
        json_t *e;
        json_object_foreach((json_t *)v, key, e)
        {
            node *child;
            if ((rc = compile_at(cc, e, "properties", key, &child)))
                return rc;
            if (n)
                n->props[n->nprops++] = (named_node){key, child};
        }
    }
    if (rc)
        return rc;
    if ((v = keyword(cc, j, "patternProperties", TY_OBJECT, "an object", &rc))) {
        if (n) {
            n->pprops = calloc(json_object_size(v) + 1, sizeof(*n->pprops));
            if (!n->pprops)
                return cc_oom(cc);
        }
        const char *key;
        json_t *e;
        json_object_foreach((json_t *)v, key, e)
        {
            node *child;
            if ((rc = compile_at(cc, e, "patternProperties", key, &child)))
                return rc;
            if (!n)
                continue;
            regex_node *r = &n->pprops[n->npprops];
            r->source = key;
            r->schema = child;
            size_t mark = cc->ptr.len;
            sb_put_segment(&cc->ptr, "patternProperties");
            rc = cc->ptr.oom ? cc_oom(cc) : regex_compile(cc, key, key, &r->re);
            sb_truncate(&cc->ptr, mark);
            if (rc)
                return rc;
            n->npprops++;
        }
    }
    if (rc)
        return rc;
    if ((rc = compile_dependent(cc, j, n)))
        return rc;
    if (!later && (v = keyword(cc, j, "dependencies", TY_OBJECT, "an object", &rc))) {
        if (n) {
            n->deps = calloc(json_object_size(v) + 1, sizeof(*n->deps));
            if (!n->deps)
                return cc_oom(cc);
        }
        const char *key;
        json_t *e;
        json_object_foreach((json_t *)v, key, e)
        {
            dependency d = {key, NULL, NULL};
            if (json_is_array(e)) {
                if ((rc = check_string_array(cc, e, "dependencies", key)))
                    return rc;
                d.required = e;
            } else if (json_is_object(e) || json_is_boolean(e)) {
                if ((rc = compile_at(cc, e, "dependencies", key, &d.schema)))
                    return rc;
            } else {
                size_t mark = cc->ptr.len;
                sb_put_segment(&cc->ptr, "dependencies");
                rc = kw_fail(cc, key, "expected a schema or an array of strings");
                sb_truncate(&cc->ptr, mark);
                return rc;
            }
            if (n)
                n->deps[n->ndeps++] = d;
        }
    }
    if (rc)
        return rc;
    static const char *const defs[] = {"definitions", "$defs"};
    for (size_t i = 0; i < (later ? 2u : 1u); i++) {
        if ((v = keyword(cc, j, defs[i], TY_OBJECT, "an object", &rc))) {
            /* Compiled for their checks and their $ids; reached through $ref. */
            const char *key;
            json_t *e;
            json_object_foreach((json_t *)v, key, e)
            {
                node *child;
                if ((rc = compile_at(cc, e, defs[i], key, &child)))
                    return rc;
            }
        }
        if (rc)
            return rc;
    }

    /* Combinators. */
    static const char *const combos[] = {"allOf", "anyOf", "oneOf"};
    for (size_t i = 0; i < 3; i++) {
        if (!(v = keyword(cc, j, combos[i], TY_ARRAY, "a non-empty array of schemas", &rc))) {
            if (rc)
                return rc;
            continue;
        }
        node ***list = !n ? NULL : i == 0 ? &n->all_of : i == 1 ? &n->any_of : &n->one_of;
        size_t *count = !n ? NULL : i == 0 ? &n->nall_of : i == 1 ? &n->nany_of : &n->none_of;
        if ((rc = compile_schema_array(cc, v, combos[i], list, count)))
            return rc;
    }
    return 0;
}
void compiler_free(compiler *cc)
{
    free(cc->ptr.p);
    for (size_t i = 0; i < cc->nids; i++)
        free(cc->ids[i].uri);
    free(cc->ids);
    for (size_t i = 0; i < cc->nrefs; i++) {
        free(cc->refs[i].uri);
        free(cc->refs[i].where);
    }
    free(cc->refs);
    free(cc->map);
    for (size_t i = 0; i < cc->nowned; i++)
        free(cc->owned[i]);
    free(cc->owned);
    pcre2_compile_context_free(cc->re_ctx);
}

int te_schema_compile(const json_t *schema, te_schema **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return -EINVAL;
    *out = NULL;
    compiler cc = {.err = err, .errlen = errlen, .base = "", .subcompile = compile};
    if (!schema)
        return cc_fail(&cc, "expected a schema (an object or a boolean)");
    te_schema *s = calloc(1, sizeof(*s));
    if (!s)
        return cc_oom(&cc);
    s->true_node.kind = NODE_TRUE;
    s->false_node.kind = NODE_FALSE;
    s->meta_node.kind = NODE_META;
    cc.s = s;
    int rc = 0;
    s->doc = json_deep_copy(schema);
    if (!s->doc)
        rc = cc_oom(&cc);
    /* The draft: the root's "$schema" (checked with the other keywords). */
    cc.draft = DRAFT_07;
    const json_t *decl = json_object_get(schema, "$schema");
    if (json_is_string(decl) && draft_of_uri(json_string_value(decl)))
        cc.draft = draft_of_uri(json_string_value(decl));
    s->draft = s->meta_node.meta_draft = cc.draft;
    /* The document itself, when it has no $id, is the resource "". */
    if (rc == 0)
        rc = add_id(&cc, "", s->doc, "");
    if (rc == 0)
        rc = compile(&cc, s->doc, &s->root);
    if (rc == 0)
        rc = resolve_refs(&cc);
    compiler_free(&cc);
    if (rc) {
        te_schema_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Meta-schema: the value must itself be a valid schema of the draft. */
bool validate_meta(vctx *ctx, const json_t *inst, int draft)
{
    char why[256];
    compiler cc = {
        .err = why, .errlen = sizeof(why), .base = "", .subcompile = compile, .draft = draft};
    cc.depth = ctx->inst_depth;
    node *unused;
    int rc = compile(&cc, inst, &unused);
    compiler_free(&cc);
    if (rc == -ENOMEM)
        ctx->oom = true;
    if (rc)
        violation(ctx, "is not a valid JSON Schema: %s", why);
    return rc == 0;
}
