/*
 * schema_ccerr.c - JSON Schema validator: compile errors and the $id table lookup, shared by the
 * compiling files. See schema_int.h for the whole.
 */
#include "schema_int.h"

int cc_fail(compiler *cc, const char *fmt, ...)
{
    if (cc->err && cc->errlen) {
        int n = snprintf(cc->err, cc->errlen, "%s: ", cc->ptr.len ? cc->ptr.p : "/");
        if (n >= 0 && (size_t)n < cc->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(cc->err + n, cc->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
        te_utf8_repair(cc->err); /* errlen may have cut a character */
    }
    return -EINVAL;
}

/* A message quoting a string of the schema: "<prefix>"<str>"<suffix>", the
 * string escaped and clipped on a character boundary. */
char *quoted_message(const char *prefix, const char *str, const char *suffix)
{
    sbuf b = {0};
    sb_puts(&b, prefix);
    sb_put_quoted(&b, str, strlen(str));
    sb_puts(&b, suffix);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int cc_oom(compiler *cc)
{
    if (cc->err && cc->errlen)
        snprintf(cc->err, cc->errlen, "out of memory");
    return -ENOMEM;
}

/* Report at "<pointer>/<keyword>". */
int kw_fail(compiler *cc, const char *kw, const char *what)
{
    size_t mark = cc->ptr.len;
    sb_put_segment(&cc->ptr, kw);
    int rc = cc->ptr.oom ? cc_oom(cc) : cc_fail(cc, "%s", what);
    sb_truncate(&cc->ptr, mark);
    return rc;
}

const id_entry *find_id(const compiler *cc, const char *uri_text)
{
    for (size_t i = 0; i < cc->nids; i++)
        if (strcmp(cc->ids[i].uri, uri_text) == 0)
            return &cc->ids[i];
    return NULL;
}
