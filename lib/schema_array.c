/*
 * schema_array.c - JSON Schema validator: the array keywords.
 * See schema_int.h for the whole.
 */
#include "schema_int.h"

typedef struct hashed {
    uint64_t h;
    size_t i;
} hashed;

static int hashed_cmp(const void *a, const void *b)
{
    const hashed *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Find two equal items: sorting by a hash consistent with equality keeps
 * this O(n log n) on long arrays. 1 and *a < *b when found, 0 when all
 * items are distinct, -1 too deep (reported), -2 out of memory. */
static int find_duplicate(vctx *ctx, const json_t *arr, size_t *a, size_t *b)
{
    size_t n = json_array_size(arr);
    hashed *hs = malloc((n ? n : 1) * sizeof(*hs));
    if (!hs)
        return -2;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        hs[i].i = i;
        if (json_hash(json_array_get(arr, i), ctx->inst_depth, &hs[i].h) < 0)
            rc = -1;
    }
    if (rc == 0)
        qsort(hs, n, sizeof(*hs), hashed_cmp);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        for (size_t k = i + 1; rc == 0 && k < n && hs[k].h == hs[i].h; k++) {
            int eq = json_eq(json_array_get(arr, hs[i].i), json_array_get(arr, hs[k].i),
                             ctx->inst_depth);
            if (eq == 1) {
                *a = hs[i].i < hs[k].i ? hs[i].i : hs[k].i;
                *b = hs[i].i < hs[k].i ? hs[k].i : hs[i].i;
                rc = 1;
            } else if (eq < 0) {
                rc = -1;
            }
        }
    }
    free(hs);
    if (rc == -1)
        violation(ctx, "nesting too deep (more than %d levels)", TE_SCHEMA_MAX_DEPTH);
    return rc;
}

bool validate_array(vctx *ctx, const node *n, const json_t *inst)
{
    bool ok = true;
    size_t size = json_array_size(inst);
    if (n->min_items != NO_LIMIT && (long long)size < n->min_items) {
        violation(ctx, "must have at least %lld %s, got %zu", n->min_items,
                  plural(n->min_items, "item", "items"), size);
        FAILED();
    }
    if (n->max_items != NO_LIMIT && (long long)size > n->max_items) {
        violation(ctx, "must have at most %lld %s, got %zu", n->max_items,
                  plural(n->max_items, "item", "items"), size);
        FAILED();
    }
    if (n->unique_items && size > 1) {
        size_t a = 0, b = 0;
        int rc = find_duplicate(ctx, inst, &a, &b);
        if (rc == -2)
            ctx->oom = true;
        if (rc == 1)
            violation(ctx, "items must be unique, but items %zu and %zu are equal", a, b);
        if (rc != 0)
            FAILED();
    }
    if (n->items && n->items->kind != NODE_TRUE) {
        for (size_t i = 0; i < size; i++)
            if (!descend(ctx, n->items, json_array_get(inst, i), NULL, i))
                FAILED();
    } else if (n->item_list) {
        size_t fixed = size < n->nitem_list ? size : n->nitem_list;
        for (size_t i = 0; i < fixed; i++)
            if (!descend(ctx, n->item_list[i], json_array_get(inst, i), NULL, i))
                FAILED();
        if (size > n->nitem_list && n->additional_items) {
            if (n->additional_items->kind == NODE_FALSE) {
                violation(ctx, "must have at most %zu %s, got %zu (no additional items allowed)",
                          n->nitem_list, plural((long long)n->nitem_list, "item", "items"), size);
                FAILED();
            } else {
                for (size_t i = n->nitem_list; i < size; i++)
                    if (!descend(ctx, n->additional_items, json_array_get(inst, i), NULL, i))
                        FAILED();
            }
        }
    }
    if (n->contains && n->min_contains == NO_LIMIT && n->max_contains == NO_LIMIT) {
        bool found = false;
        for (size_t i = 0; i < size && !found; i++)
            found = matches(ctx, n->contains, json_array_get(inst, i));
        if (!found) {
            violation(ctx, "must contain an item that matches the schema in contains");
            FAILED();
        }
    } else if (n->contains) {
        /* 2019-09 on: how many items match, between minContains (1 when
         * absent; 0 lets any array pass) and maxContains. */
        long long least = n->min_contains == NO_LIMIT ? 1 : n->min_contains;
        long long count = 0;
        for (size_t i = 0; i < size; i++) {
            if (n->max_contains == NO_LIMIT && count >= least)
                break;
            count += matches(ctx, n->contains, json_array_get(inst, i));
        }
        if (count < least) {
            violation(ctx, "must contain at least %lld %s that %s the schema in contains, got %lld",
                      least, plural(least, "item", "items"), least == 1 ? "matches" : "match",
                      count);
            FAILED();
        }
        if (n->max_contains != NO_LIMIT && count > n->max_contains) {
            violation(ctx, "must contain at most %lld %s that %s the schema in contains, got %lld",
                      n->max_contains, plural(n->max_contains, "item", "items"),
                      n->max_contains == 1 ? "matches" : "match", count);
            FAILED();
        }
    }
    return ok;
}
