/*
 * schema_report.c - JSON Schema validator: violations and the descent into subschemas, shared by
 * the keyword files. Recursion goes through ctx->recurse, set by te_schema_validate(). See
 * schema_int.h for the whole.
 */
#include "schema_int.h"

void violation(vctx *ctx, const char *fmt, ...)
{
    if (ctx->quiet)
        return;
    ctx->count++;
    if (!ctx->want_text || ctx->count > MAX_LISTED)
        return;
    if (ctx->out.len)
        sb_puts(&ctx->out, "; ");
    if (ctx->path.len)
        sb_put_clipped(&ctx->out, ctx->path.p, ctx->path.len, MAX_QUOTED);
    else
        sb_putc(&ctx->out, '/');
    sb_puts(&ctx->out, ": ");
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&ctx->out, fmt, ap);
    va_end(ap);
}

/* Whether the message under construction should be built at all. */
bool loud(const vctx *ctx)
{
    return !ctx->quiet && ctx->want_text && ctx->count < MAX_LISTED;
}

/* A violation whose text holds a JSON value or quoted string: built in a
 * scratch buffer first, only when it will be shown. */
void violation_with(vctx *ctx, const char *prefix, const json_t *value, const char *str, size_t len,
                    const char *suffix)
{
    if (ctx->quiet)
        return;
    if (!loud(ctx)) {
        ctx->count++;
        return;
    }
    sbuf b = {0};
    sb_puts(&b, prefix);
    if (value)
        sb_put_json(&b, value);
    else
        sb_put_quoted(&b, str, len);
    sb_puts(&b, suffix ? suffix : "");
    if (b.oom)
        ctx->oom = true;
    else
        violation(ctx, "%s", b.p);
    free(b.p);
}

/* Validate a member or element: one level deeper in the instance. */
bool descend(vctx *ctx, const node *n, const json_t *child, const char *key, size_t index)
{
    size_t mark = ctx->path.len;
    if (key)
        sb_put_segment(&ctx->path, key);
    else
        sb_put_index(&ctx->path, index);
    bool ok;
    if (ctx->path.oom) {
        ctx->oom = true;
        ok = false;
    } else if (ctx->inst_depth >= TE_SCHEMA_MAX_DEPTH) {
        violation(ctx, "nesting too deep (more than %d levels)", TE_SCHEMA_MAX_DEPTH);
        ok = false;
    } else {
        ctx->inst_depth++;
        ok = ctx->recurse(ctx, n, child);
        ctx->inst_depth--;
    }
    sb_truncate(&ctx->path, mark);
    return ok;
}

/* Quietly: does inst satisfy n? */
bool matches(vctx *ctx, const node *n, const json_t *inst)
{
    ctx->quiet++;
    bool ok = ctx->recurse(ctx, n, inst);
    ctx->quiet--;
    return ok;
}

const char *plural(long long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}
