/*
 * schema_validate.c - JSON Schema validator: validating: the dispatch over keywords,
 * te_schema_validate(). See schema_int.h for the whole.
 */
#include "schema_int.h"

/* ------------------------------------------------------------------------ */
/* Validating.                                                              */

bool validate(vctx *ctx, const node *n, const json_t *inst)
{
    if (ctx->oom || ctx->exhausted)
        return false;
    if (++ctx->steps > MAX_STEPS) {
        ctx->exhausted = true;
        return false;
    }
    switch (n->kind) {
    case NODE_TRUE:
        return true;
    case NODE_FALSE:
        violation(ctx, "not allowed (the schema is false)");
        return false;
    case NODE_META:
        return validate_meta(ctx, inst, n->meta_draft);
    case NODE_SCHEMA:
        break;
    }
    if (ctx->frames >= MAX_FRAMES) {
        violation(ctx, "schema recursion too deep (a $ref that loops?)");
        return false;
    }
    ctx->frames++;
    bool ok = true;
    if (n->ref && !n->ref_too) {
        ok = validate(ctx, n->ref, inst);
        ctx->frames--;
        return ok;
    }
    if (n->ref && !validate(ctx, n->ref, inst)) {
        if (ctx->quiet || ctx->oom || ctx->exhausted) {
            ctx->frames--;
            return false;
        }
        ok = false;
    }
    if (n->types && !(types_of(inst) & n->types)) {
        violation(ctx, "expected %s, got %s", n->types_text, type_name_of(inst));
        ok = false;
    }
    if (ok || !ctx->quiet) {
        if (n->enum_values) {
            bool found = false;
            for (size_t i = 0; i < json_array_size(n->enum_values) && !found; i++)
                found = json_eq(json_array_get(n->enum_values, i), inst, ctx->inst_depth) == 1;
            if (!found) {
                violation_with(ctx, "must be one of ", n->enum_values, NULL, 0, NULL);
                ok = false;
            }
        }
        if (n->const_value && json_eq(n->const_value, inst, ctx->inst_depth) != 1) {
            violation_with(ctx, "must be equal to ", n->const_value, NULL, 0, NULL);
            ok = false;
        }
    }
    if (ok || !ctx->quiet) {
        bool r = true;
        if (json_is_number(inst) || te_json_is_rawnum(inst))
            r = validate_number(ctx, n, inst);
        else if (json_is_string(inst))
            r = validate_string(ctx, n, inst);
        else if (json_is_array(inst))
            r = validate_array(ctx, n, inst);
        else if (json_is_object(inst))
            r = validate_object(ctx, n, inst);
        ok = ok && r;
    }
    if (ok || !ctx->quiet)
        ok = validate_combinators(ctx, n, inst) && ok;
    if ((ok || !ctx->quiet) && (n->uneval_props || n->uneval_items))
        ok = validate_unevaluated(ctx, n, inst) && ok;
    ctx->frames--;
    return ok;
}

int te_schema_validate(const te_schema *s, const json_t *instance, char **errors)
{
    if (errors)
        *errors = NULL;
    if (!s || !instance)
        return -EINVAL;
    vctx ctx = {.want_text = errors != NULL, .recurse = validate};
    bool ok = validate(&ctx, s->root, instance);
    if (ctx.exhausted) {
        ctx.quiet = 0;
        sb_truncate(&ctx.path, 0);
        if (ctx.regex_why) {
            sb_puts(&ctx.path, ctx.regex_at); /* where the match stopped */
            violation(&ctx, "validation too expensive: %s", ctx.regex_why);
        } else {
            violation(&ctx, "validation too expensive (more than %lu steps)", MAX_STEPS);
        }
    } else if (!ok && ctx.count == 0) {
        violation(&ctx, "does not match the schema"); /* not expected to happen */
    }
    if (ctx.count > MAX_LISTED && ctx.want_text)
        sb_printf(&ctx.out, "; ... and %zu more", ctx.count - MAX_LISTED);
    pcre2_match_data_free(ctx.md);
    pcre2_match_context_free(ctx.mc);
    free(ctx.regex_why);
    free(ctx.regex_at);
    free(ctx.path.p);
    if (ctx.oom || ctx.out.oom) {
        free(ctx.out.p);
        return -ENOMEM;
    }
    if (ctx.count == 0) {
        free(ctx.out.p);
        return 0;
    }
    if (errors)
        *errors = ctx.out.p;
    else
        free(ctx.out.p);
    return ctx.count > INT_MAX ? INT_MAX : (int)ctx.count;
}
