/*
 * schema_combine.c - JSON Schema validator: allOf/anyOf/oneOf/not, if/then/else. See schema_int.h
 * for the whole.
 */
#include "schema_int.h"

bool validate_combinators(vctx *ctx, const node *n, const json_t *inst)
{
    bool ok = true;
    for (size_t i = 0; i < n->nall_of; i++)
        if (!ctx->recurse(ctx, n->all_of[i], inst))
            FAILED();
    if (n->nany_of) {
        bool any = false;
        for (size_t i = 0; i < n->nany_of && !any; i++)
            any = matches(ctx, n->any_of[i], inst);
        if (!any) {
            violation(ctx, "does not match any of the %zu schemas in anyOf", n->nany_of);
            FAILED();
        }
    }
    if (n->none_of) {
        size_t first = 0, hits = 0;
        for (size_t i = 0; i < n->none_of && hits < 2; i++) {
            if (!matches(ctx, n->one_of[i], inst))
                continue;
            if (hits++ == 0)
                first = i;
            else
                violation(ctx, "must match exactly one schema in oneOf, but matches #%zu and #%zu",
                          first, i);
        }
        if (hits == 0)
            violation(ctx, "does not match any of the %zu schemas in oneOf", n->none_of);
        if (hits != 1)
            FAILED();
    }
    if (n->not_schema && matches(ctx, n->not_schema, inst)) {
        violation(ctx, "must not match the schema in not");
        FAILED();
    }
    if (n->if_schema && (n->then_schema || n->else_schema)) {
        /* "if" only chooses; its own failures are not errors. */
        const node *branch = matches(ctx, n->if_schema, inst) ? n->then_schema : n->else_schema;
        if (branch && !ctx->recurse(ctx, branch, inst))
            FAILED();
    }
    return ok;
}
