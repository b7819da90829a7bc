/*
 * schema_uneval.c - JSON Schema validator: unevaluatedProperties and unevaluatedItems (2019-09
 * and later). See schema_int.h for the whole.
 *
 * Instead of collecting annotations during every validation, the members
 * and items a schema "evaluated" are worked out afterwards, only for the
 * schemas that carry one of these keywords: the same walk over the
 * in-place applicators ($ref, allOf, anyOf, oneOf, if/then/else,
 * dependentSchemas) that annotation collection would do, where a branch
 * counts only if the instance matches it (re-checked quietly). The cost is
 * paid only by schemas that use the keywords, and it counts against the
 * same step budget as everything else.
 */
#include "schema_int.h"

/* What n itself (not its applicators) evaluated of inst, added to acc.
 * top: n is the schema whose own unevaluated* keyword is asked about (it
 * does not count itself). */
typedef void (*own_fn)(vctx *ctx, const node *n, const json_t *inst, void *acc, bool top);

/* The walk annotation collection would do: n's own, then every in-place
 * applicator whose branch inst matches. One walk for members and items. */
static void collect(vctx *ctx, const node *n, const json_t *inst, own_fn own, void *acc, bool top)
{
    if (n->kind != NODE_SCHEMA || ctx->oom || ctx->exhausted)
        return;
    if (++ctx->steps > MAX_STEPS || ctx->frames >= MAX_FRAMES) {
        ctx->exhausted = true;
        return;
    }
    ctx->frames++;
    own(ctx, n, inst, acc, top);
    if (n->ref)
        collect(ctx, n->ref, inst, own, acc, false);
    for (size_t i = 0; i < n->nall_of; i++)
        collect(ctx, n->all_of[i], inst, own, acc, false);
    for (size_t i = 0; i < n->nany_of; i++)
        if (matches(ctx, n->any_of[i], inst))
            collect(ctx, n->any_of[i], inst, own, acc, false);
    for (size_t i = 0; i < n->none_of; i++)
        if (matches(ctx, n->one_of[i], inst))
            collect(ctx, n->one_of[i], inst, own, acc, false);
    if (n->if_schema) {
        if (matches(ctx, n->if_schema, inst)) {
            collect(ctx, n->if_schema, inst, own, acc, false);
            if (n->then_schema)
                collect(ctx, n->then_schema, inst, own, acc, false);
        } else if (n->else_schema) {
            collect(ctx, n->else_schema, inst, own, acc, false);
        }
    }
    /* dependentSchemas: only an object has the member that triggers one */
    for (size_t i = 0; i < n->ndeps && json_is_object(inst); i++)
        if (n->deps[i].schema && json_object_get(inst, n->deps[i].name))
            collect(ctx, n->deps[i].schema, inst, own, acc, false);
    ctx->frames--;
}

/* Members: every name n evaluated, as keys of the object acc. */
static void own_props(vctx *ctx, const node *n, const json_t *inst, void *acc, bool top)
{
    json_t *set = acc;
    const char *key;
    const json_t *v;
    bool all = n->additional_props || (!top && n->uneval_props);
    json_object_foreach((json_t *)inst, key, v)
    {
        bool hit = all || (n->props_json && json_object_get(n->props_json, key));
        for (size_t i = 0; !hit && i < n->npprops; i++)
            hit = regex_match(ctx, n->pprops[i].re, n->pprops[i].source, key, strlen(key)) == 1;
        if (hit && json_object_set(set, key, json_true()))
            ctx->oom = true;
    }
}

/* Items: seen[i] (acc) set for every index n evaluated. */
static void own_items(vctx *ctx, const node *n, const json_t *inst, void *acc, bool top)
{
    bool *seen = acc;
    size_t size = json_array_size(inst);
    size_t upto = 0;
    if (n->items || (n->item_list && n->additional_items) || (!top && n->uneval_items))
        upto = size;
    else if (n->item_list)
        upto = size < n->nitem_list ? size : n->nitem_list;
    for (size_t i = 0; i < upto; i++)
        seen[i] = true;
    if (n->contains && n->contains_annotates)
        for (size_t i = 0; i < size; i++)
            if (!seen[i] && matches(ctx, n->contains, json_array_get(inst, i)))
                seen[i] = true;
}

bool validate_unevaluated(vctx *ctx, const node *n, const json_t *inst)
{
    bool ok = true;
    if (n->uneval_props && json_is_object(inst) && json_object_size(inst)) {
        json_t *set = json_object();
        if (!set) {
            ctx->oom = true;
            return false;
        }
        collect(ctx, n, inst, own_props, set, true);
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)inst, key, v)
        {
            if (ctx->oom || ctx->exhausted || json_object_get(set, key))
                continue;
            if (n->uneval_props->kind == NODE_FALSE) {
                violation_with(ctx, "property ", NULL, key, strlen(key),
                               " is not allowed (unevaluated)");
                ok = false;
            } else if (!descend(ctx, n->uneval_props, v, key, 0)) {
                ok = false;
            }
            if (!ok && ctx->quiet)
                break;
        }
        json_decref(set);
    }
    if ((ok || !ctx->quiet) && n->uneval_items && json_is_array(inst) && json_array_size(inst)) {
        size_t size = json_array_size(inst);
        bool *seen = calloc(size, sizeof(*seen));
        if (!seen) {
            ctx->oom = true;
            return false;
        }
        collect(ctx, n, inst, own_items, seen, true);
        for (size_t i = 0; i < size && !ctx->oom && !ctx->exhausted; i++) {
            if (seen[i])
                continue;
            if (n->uneval_items->kind == NODE_FALSE) {
                violation(ctx, "item %zu is not allowed (unevaluated)", i);
                ok = false;
            } else if (!descend(ctx, n->uneval_items, json_array_get(inst, i), NULL, i)) {
                ok = false;
            }
            if (!ok && ctx->quiet)
                break;
        }
        free(seen);
    }
    return ok && !ctx->oom && !ctx->exhausted;
}
