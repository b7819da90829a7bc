/*
 * schema_compile.c - JSON Schema validator: compiling a schema into its node graph (keywords
 * checked against the meta-schema), and the meta-schema check. The walk over a schema's
 * keywords is here; the parts it is built of (node map, $id table, a keyword's value checked,
 * a subschema compiled at its pointer) are in schema_cckw.c. See schema_int.h for the whole.
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
        if (!n || !cc_grow((void **)&s->nodes, &s->capnodes, s->nnodes, sizeof(*s->nodes))) {
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
    const json_t *req = cc_keyword(cc, j, "dependentRequired", TY_OBJECT, "an object", &rc);
    if (rc)
        return rc;
    const json_t *sch = cc_keyword(cc, j, "dependentSchemas", TY_OBJECT, "an object", &rc);
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
        if (!cc_keyword(cc, j, string_kws[i], TY_STRING, "a string", &rc) && rc)
            return rc;
    if ((!cc_keyword(cc, j, "readOnly", TY_BOOLEAN, "a boolean", &rc) && rc) ||
        (!cc_keyword(cc, j, "writeOnly", TY_BOOLEAN, "a boolean", &rc) && rc) ||
        (!cc_keyword(cc, j, "examples", TY_ARRAY, "an array", &rc) && rc))
        return rc;

    if ((rc = check_schema_keyword(cc, json_object_get(j, "$schema"))) ||
        (rc = check_unsupported(cc, j)))
        return rc;
    bool later = cc->draft >= DRAFT_2019;
    const json_t *ref = cc_keyword(cc, j, "$ref", TY_STRING, "a string", &rc);
    if (rc)
        return rc;
    const json_t *id = cc_keyword(cc, j, "$id", TY_STRING, "a string", &rc);
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
    if (later && !cc_keyword(cc, j, "$recursiveAnchor", TY_BOOLEAN, "a boolean", &rc) && rc)
        return rc;
    if (n && ref)
        n->ref_too = later;
    if (s && ref) {
        if (!cc_grow((void **)&cc->refs, &cc->caprefs, cc->nrefs, sizeof(*cc->refs)))
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
    if ((v = cc_keyword(cc, j, "enum", TY_ARRAY, "an array", &rc)) && n)
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
        if (!(bv[i] = cc_keyword(cc, j, bounds[i], TY_NUMBER, "a number", &rc)) && rc)
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
    if ((v = cc_keyword(cc, j, "pattern", TY_STRING, "a string", &rc)) && n) {
        n->pattern_source = json_string_value(v);
        if ((rc = regex_compile(cc, "pattern", n->pattern_source, &n->pattern)))
            return rc;
    }
    if (rc)
        return rc;

    /* Arrays. 2020-12: prefixItems is the array form, and items applies
     * after it, as additionalItems does after an array of items. */
    bool d2020 = cc->draft >= DRAFT_2020;
    if (d2020 &&
        (v = cc_keyword(cc, j, "prefixItems", TY_ARRAY, "a non-empty array of schemas", &rc)))
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
    if ((v = cc_keyword(cc, j, "uniqueItems", TY_BOOLEAN, "a boolean", &rc)) && n)
        n->unique_items = json_is_true(v);
    if (rc)
        return rc;

    /* Objects. */
    if ((v = cc_keyword(cc, j, "required", TY_ARRAY, "an array of strings", &rc))) {
        if ((rc = check_string_array(cc, v, "required", NULL)))
            return rc;
        if (n)
            n->required = v;
    }
    if (rc)
        return rc;
    if ((v = cc_keyword(cc, j, "properties", TY_OBJECT, "an object", &rc))) {
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
    if ((v = cc_keyword(cc, j, "patternProperties", TY_OBJECT, "an object", &rc))) {
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
    if (!later && (v = cc_keyword(cc, j, "dependencies", TY_OBJECT, "an object", &rc))) {
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
        if ((v = cc_keyword(cc, j, defs[i], TY_OBJECT, "an object", &rc))) {
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
        if (!(v = cc_keyword(cc, j, combos[i], TY_ARRAY, "a non-empty array of schemas", &rc))) {
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
