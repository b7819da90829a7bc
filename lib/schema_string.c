/*
 * schema_string.c - JSON Schema validator: strings: lengths in code points and "pattern" (PCRE2,
 * with its match/depth limits and the callout step budget). See schema_int.h for the whole.
 */
#include "schema_int.h"

int regex_compile(compiler *cc, const char *kw, const char *src, pcre2_code **out)
{
    if (!cc->re_ctx) {
        cc->re_ctx = pcre2_compile_context_create(NULL);
        if (!cc->re_ctx)
            return cc_oom(cc);
        /* ECMA-262 \u{HHHH} escapes; on PCRE2 >= 10.43 also ECMA's ASCII-only
         * \d and \w (\s stays Unicode, as in ECMA). */
        uint32_t extra = 0;
#ifdef PCRE2_EXTRA_ALT_BSUX
        extra |= PCRE2_EXTRA_ALT_BSUX;
#endif
#ifdef PCRE2_EXTRA_ASCII_BSD
        extra |= PCRE2_EXTRA_ASCII_BSD | PCRE2_EXTRA_ASCII_BSW;
#endif
        pcre2_set_compile_extra_options(cc->re_ctx, extra);
    }
    /* UTF + UCP: patterns and strings are Unicode text. DOLLAR_ENDONLY: in
     * ECMA "$" does not match before a final newline. ALT_BSUX: \uHHHH and
     * \xHH as ECMA spells them. ALLOW_EMPTY_CLASS: ECMA's "[]" (nothing) and
     * "[^]" (any character). AUTO_CALLOUT: every step of a match is
     * counted (see REGEX_MATCH_LIMIT). */
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX |
                    PCRE2_ALLOW_EMPTY_CLASS | PCRE2_AUTO_CALLOUT;
    int code;
    PCRE2_SIZE off;
    *out = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED, opts, &code, &off, cc->re_ctx);
    if (*out)
        return 0;
    if (code == PCRE2_ERROR_NOMEMORY)
        return cc_oom(cc);
    PCRE2_UCHAR msg[160];
    if (pcre2_get_error_message(code, msg, sizeof(msg)) < 0)
        snprintf((char *)msg, sizeof(msg), "error %d", code);
    char text[256];
    snprintf(text, sizeof(text), "invalid regular expression at offset %zu: %s", (size_t)off,
             (const char *)msg);
    return kw ? kw_fail(cc, kw, text) : cc_fail(cc, "%s", text);
}

/* The match context every regex match of a validation (or coercion) runs
 * with: REGEX_MATCH_LIMIT, REGEX_DEPTH_LIMIT, and a callout that counts each
 * step in *steps and stops the match once it passes MAX_STEPS. */
static int count_step(pcre2_callout_block *cb, void *data)
{
    (void)cb;
    unsigned long *steps = data;
    return ++*steps > MAX_STEPS ? PCRE2_ERROR_CALLOUT : 0;
}

pcre2_match_context *regex_context(unsigned long *steps)
{
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    if (mc) {
        pcre2_set_match_limit(mc, REGEX_MATCH_LIMIT);
        pcre2_set_depth_limit(mc, REGEX_DEPTH_LIMIT);
        pcre2_set_callout(mc, count_step, steps);
    }
    return mc;
}

/* A match that stopped at a limit makes the whole validation fail, also
 * inside not/anyOf/oneOf where a failed match would otherwise count as a
 * plain mismatch (and "not" turn it into a pass). */
static void regex_stopped(vctx *ctx, const char *source, int rc)
{
    ctx->exhausted = true;
    if (ctx->regex_why)
        return;
    sbuf b = {0};
    sb_puts(&b, "matching the pattern ");
    sb_put_quoted(&b, source, strlen(source));
    if (rc == PCRE2_ERROR_CALLOUT) {
        sb_printf(&b, " went past the validation's budget of %lu steps", MAX_STEPS);
    } else {
        PCRE2_UCHAR msg[120];
        if (pcre2_get_error_message(rc, msg, sizeof(msg)) < 0)
            snprintf((char *)msg, sizeof(msg), "error %d", rc);
        sb_printf(&b, " stopped: %s", (const char *)msg);
    }
    ctx->regex_at = strndup(ctx->path.p ? ctx->path.p : "", ctx->path.len);
    if (b.oom || !ctx->regex_at) {
        free(b.p);
        free(ctx->regex_at);
        ctx->regex_at = NULL;
        ctx->oom = true;
        return;
    }
    ctx->regex_why = b.p;
}

/* 1 match, 0 no match, -1 the match could not be run (reported). */
int regex_match(vctx *ctx, const pcre2_code *re, const char *source, const char *s, size_t len)
{
    if (!ctx->md) {
        ctx->md = pcre2_match_data_create(1, NULL);
        ctx->mc = regex_context(&ctx->steps);
        if (!ctx->md || !ctx->mc) {
            ctx->oom = true;
            return -1;
        }
    }
    int rc = pcre2_match(re, (PCRE2_SPTR)s, len, 0, 0, ctx->md, ctx->mc);
    if (rc >= 0)
        return 1;
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc == PCRE2_ERROR_NOMEMORY) {
        ctx->oom = true;
        return -1;
    }
    if (rc == PCRE2_ERROR_CALLOUT || rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT) {
        regex_stopped(ctx, source, rc);
        return -1;
    }
    PCRE2_UCHAR msg[120];
    if (pcre2_get_error_message(rc, msg, sizeof(msg)) < 0)
        snprintf((char *)msg, sizeof(msg), "error %d", rc);
    violation(ctx, "regular expression could not be matched: %s", (const char *)msg);
    return -1;
}

static size_t utf8_length(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += ((unsigned char)s[i] & 0xc0) != 0x80;
    return count;
}
bool validate_string(vctx *ctx, const node *n, const json_t *inst)
{
    bool ok = true;
    const char *str = json_string_value(inst);
    size_t len = json_string_length(inst);
    if (n->min_length != NO_LIMIT || n->max_length != NO_LIMIT) {
        /* Lengths count characters (code points), not bytes. */
        long long chars = (long long)utf8_length(str, len);
        if (n->min_length != NO_LIMIT && chars < n->min_length) {
            violation(ctx, "must be at least %lld %s long, got %lld", n->min_length,
                      plural(n->min_length, "character", "characters"), chars);
            FAILED();
        }
        if (n->max_length != NO_LIMIT && chars > n->max_length) {
            violation(ctx, "must be at most %lld %s long, got %lld", n->max_length,
                      plural(n->max_length, "character", "characters"), chars);
            FAILED();
        }
    }
    if (n->pattern) {
        int m = regex_match(ctx, n->pattern, n->pattern_source, str, len);
        if (m == 0)
            violation_with(ctx, "must match the pattern ", NULL, n->pattern_source,
                           strlen(n->pattern_source), NULL);
        if (m != 1)
            FAILED();
    }
    return ok;
}
