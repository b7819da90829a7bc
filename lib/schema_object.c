/*
 * schema_object.c - JSON Schema validator: the object keywords.
 * See schema_int.h for the whole.
 */
#include "schema_int.h"

/* Whether the instance property key is one of "properties". */
static bool declared(const node *n, const char *key)
{
    return n->props_json && json_object_get(n->props_json, key);
}

bool validate_object(vctx *ctx, const node *n, const json_t *inst)
{
    bool ok = true;
    size_t size = json_object_size(inst);
    if (n->min_props != NO_LIMIT && (long long)size < n->min_props) {
        violation(ctx, "must have at least %lld %s, got %zu", n->min_props,
                  plural(n->min_props, "property", "properties"), size);
        FAILED();
    }
    if (n->max_props != NO_LIMIT && (long long)size > n->max_props) {
        violation(ctx, "must have at most %lld %s, got %zu", n->max_props,
                  plural(n->max_props, "property", "properties"), size);
        FAILED();
    }
    for (size_t i = 0; n->required && i < json_array_size(n->required); i++) {
        const json_t *name = json_array_get(n->required, i);
        if (!json_object_get(inst, json_string_value(name))) {
            violation_with(ctx, "missing required property ", NULL, json_string_value(name),
                           json_string_length(name), NULL);
            FAILED();
        }
    }
    for (size_t i = 0; i < n->nprops; i++) {
        const json_t *v = json_object_get(inst, n->props[i].name);
        if (v && !descend(ctx, n->props[i].schema, v, n->props[i].name, 0))
            FAILED();
    }
    if (n->npprops || n->additional_props || n->property_names) {
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)inst, key, v)
        {
            bool matched = declared(n, key);
            for (size_t i = 0; i < n->npprops; i++) {
                int m = regex_match(ctx, n->pprops[i].re, n->pprops[i].source, key, strlen(key));
                if (m < 0)
                    FAILED();
                if (m != 1)
                    continue;
                matched = true;
                if (!descend(ctx, n->pprops[i].schema, v, key, 0))
                    FAILED();
            }
            if (!matched && n->additional_props) {
                if (n->additional_props->kind == NODE_FALSE) {
                    violation_with(ctx, "property ", NULL, key, strlen(key), " is not allowed");
                    FAILED();
                } else if (!descend(ctx, n->additional_props, v, key, 0)) {
                    FAILED();
                }
            }
            if (n->property_names && n->property_names->kind != NODE_TRUE) {
                json_t *name = json_stringn_nocheck(key, strlen(key));
                if (!name) {
                    ctx->oom = true;
                    return false;
                }
                bool good = matches(ctx, n->property_names, name);
                json_decref(name);
                if (!good) {
                    violation_with(ctx, "property name ", NULL, key, strlen(key),
                                   " does not match the schema in propertyNames");
                    FAILED();
                }
            }
        }
    }
    for (size_t i = 0; i < n->ndeps; i++) {
        const dependency *d = &n->deps[i];
        if (!json_object_get(inst, d->name))
            continue;
        for (size_t k = 0; d->required && k < json_array_size(d->required); k++) {
            const char *need = json_string_value(json_array_get(d->required, k));
            if (json_object_get(inst, need))
                continue;
            if (loud(ctx)) {
                sbuf b = {0};
                sb_puts(&b, "property ");
                sb_put_quoted(&b, need, strlen(need));
                sb_puts(&b, " is required when ");
                sb_put_quoted(&b, d->name, strlen(d->name));
                sb_puts(&b, " is present");
                if (b.oom)
                    ctx->oom = true;
                else
                    violation(ctx, "%s", b.p);
                free(b.p);
            } else {
                violation(ctx, "dependency");
            }
            FAILED();
        }
        if (d->schema && !ctx->recurse(ctx, d->schema, inst))
            FAILED();
    }
    return ok;
}
