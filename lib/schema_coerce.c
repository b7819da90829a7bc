/*
 * schema_coerce.c - JSON Schema validator: opt-in coercion of strings to the scalar types a schema
 * asks for. See schema_int.h for the whole.
 */
#include "schema_int.h"

/* ------------------------------------------------------------------------ */
/* Coercion of strings to the scalar types a schema asks for.               */

#define TY_ALL (TY_NULL | TY_BOOLEAN | TY_OBJECT | TY_ARRAY | TY_NUMBER | TY_STRING | TY_INTEGER)

typedef struct cctx {
    unsigned long steps; /* bounded like a validation: allOf over $ref loops */
    bool oom;
    pcre2_match_data *md;
    pcre2_match_context *mc;
} cctx;

/* The node a chain of $refs ends at; NULL for a chain that loops. */
static const node *deref(const node *n)
{
    for (int hops = 0; n && n->ref; hops++) {
        if (hops >= MAX_FRAMES)
            return NULL;
        n = n->ref;
    }
    return n;
}

/* The types a schema allows, through $ref and allOf (TY_ALL: any). An
 * integer is a number, so "number" allows integers too. */
static unsigned allowed_types(cctx *c, const node *n, int depth)
{
    n = deref(n);
    if (!n || depth >= TE_SCHEMA_MAX_DEPTH || ++c->steps > MAX_STEPS)
        return TY_ALL;
    if (n->kind == NODE_FALSE)
        return 0;
    if (n->kind != NODE_SCHEMA)
        return TY_ALL;
    unsigned t = n->types ? n->types : TY_ALL;
    if (t & TY_NUMBER)
        t |= TY_INTEGER;
    for (size_t i = 0; i < n->nall_of; i++)
        t &= allowed_types(c, n->all_of[i], depth + 1);
    return t;
}

/* Parse a whole string as a JSON number. 1 and *out set, 0 when it is not
 * one (or, with !fraction, not a whole number), -ENOMEM. */
static int parse_number(const char *s, size_t len, bool fraction, json_t **out)
{
    size_t i = 0;
    bool plain = true; /* no fraction, no exponent */
    *out = NULL;
    if (i < len && s[i] == '-')
        i++;
    if (i < len && s[i] == '0') {
        i++;
    } else if (i < len && s[i] >= '1' && s[i] <= '9') {
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
    } else {
        return 0;
    }
    if (i < len && s[i] == '.') {
        plain = false;
        if (++i >= len || s[i] < '0' || s[i] > '9')
            return 0;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        plain = false;
        if (++i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= len || s[i] < '0' || s[i] > '9')
            return 0;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i != len) /* trailing text (or an embedded NUL) */
        return 0;
    if (plain) {
        errno = 0;
        long long v = strtoll(s, NULL, 10);
        if (errno != ERANGE) {
            *out = json_integer(v);
            return *out ? 1 : -ENOMEM;
        }
    }
    double d = strtod(s, NULL);
    if (!isfinite(d))
        return 0;
    if (!fraction) {
        /* An integer is wanted: "4.0" and "1e3" are whole numbers. */
        if (!real_is_integral(d))
            return 0;
        if (d >= -9223372036854775808.0 && d < 9223372036854775808.0)
            *out = json_integer((json_int_t)d);
        else
            *out = json_real(d);
    } else {
        *out = json_real(d);
    }
    return *out ? 1 : -ENOMEM;
}

/* The converted value for a string under types t, or NULL. */
static json_t *coerce_string(cctx *c, const json_t *str, unsigned t)
{
    const char *s = json_string_value(str);
    size_t len = json_string_length(str);
    if (t & TY_STRING)
        return NULL; /* a string is fine as it is */
    if ((t & TY_BOOLEAN) && len == 4 && memcmp(s, "true", 4) == 0)
        return json_true();
    if ((t & TY_BOOLEAN) && len == 5 && memcmp(s, "false", 5) == 0)
        return json_false();
    if (!(t & (TY_NUMBER | TY_INTEGER)))
        return NULL;
    json_t *out;
    if (parse_number(s, len, (t & TY_NUMBER) != 0, &out) < 0)
        c->oom = true;
    return out;
}

static int coerce_value(cctx *c, const node *n, json_t *inst, int depth);

/* Coerce the member or element v, which the nsubs schemas in subs apply
 * to: a string is replaced through *repl, anything else is walked. */
static int coerce_slot(cctx *c, const node *const *subs, size_t nsubs, json_t *v, json_t **repl,
                       int depth)
{
    *repl = NULL;
    if (nsubs == 0)
        return 0;
    if (json_is_string(v)) {
        unsigned t = TY_ALL;
        for (size_t i = 0; i < nsubs; i++)
            t &= allowed_types(c, subs[i], 0);
        *repl = coerce_string(c, v, t);
        return c->oom ? -ENOMEM : *repl != NULL;
    }
    int total = 0;
    for (size_t i = 0; i < nsubs; i++) {
        int r = coerce_value(c, subs[i], v, depth + 1);
        if (r < 0)
            return r;
        total += r;
    }
    return total;
}

static int coerce_object(cctx *c, const node *n, json_t *inst, int depth)
{
    int total = 0;
    const node **subs = malloc((n->npprops + 2) * sizeof(*subs));
    if (!subs)
        return -ENOMEM;
    for (void *it = json_object_iter(inst); it; it = json_object_iter_next(inst, it)) {
        const char *key = json_object_iter_key(it);
        size_t nsubs = 0;
        for (size_t i = 0; i < n->nprops; i++)
            if (strcmp(n->props[i].name, key) == 0)
                subs[nsubs++] = n->props[i].schema;
        bool matched = nsubs > 0;
        for (size_t i = 0; i < n->npprops; i++) {
            if (!c->md && (!(c->md = pcre2_match_data_create(1, NULL)) ||
                           !(c->mc = regex_context(&c->steps)))) {
                free(subs);
                return -ENOMEM;
            }
            int m = pcre2_match(n->pprops[i].re, (PCRE2_SPTR)key, strlen(key), 0, 0, c->md, c->mc);
            if (m >= 0) {
                subs[nsubs++] = n->pprops[i].schema;
                matched = true;
            } else if (m != PCRE2_ERROR_NOMATCH) {
                /* a limit: coerce no further (the validation says why) */
                c->steps = MAX_STEPS + 1;
            }
        }
        if (!matched && n->additional_props)
            subs[nsubs++] = n->additional_props;
        json_t *repl;
        int r = coerce_slot(c, subs, nsubs, json_object_iter_value(it), &repl, depth);
        if (r < 0) {
            free(subs);
            return r;
        }
        if (repl && json_object_iter_set_new(inst, it, repl) < 0) {
            free(subs);
            return -ENOMEM;
        }
        total += r;
    }
    free(subs);
    return total;
}

static int coerce_array(cctx *c, const node *n, json_t *inst, int depth)
{
    int total = 0;
    for (size_t i = 0; i < json_array_size(inst); i++) {
        const node *sub = n->items;
        if (n->item_list)
            sub = i < n->nitem_list ? n->item_list[i] : n->additional_items;
        json_t *repl;
        int r = coerce_slot(c, &sub, sub != NULL, json_array_get(inst, i), &repl, depth);
        if (r < 0)
            return r;
        if (repl && json_array_set_new(inst, i, repl) < 0)
            return -ENOMEM;
        total += r;
    }
    return total;
}

static int coerce_value(cctx *c, const node *n, json_t *inst, int depth)
{
    n = deref(n);
    if (!n || n->kind != NODE_SCHEMA || depth >= TE_SCHEMA_MAX_DEPTH || ++c->steps > MAX_STEPS)
        return 0;
    int total = 0;
    for (size_t i = 0; i < n->nall_of; i++) {
        int r = coerce_value(c, n->all_of[i], inst, depth + 1);
        if (r < 0)
            return r;
        total += r;
    }
    int r = 0;
    if (json_is_object(inst))
        r = coerce_object(c, n, inst, depth);
    else if (json_is_array(inst))
        r = coerce_array(c, n, inst, depth);
    if (r < 0)
        return r;
    return total + r;
}

int te_schema_coerce(const te_schema *s, json_t *instance)
{
    if (!s || !instance)
        return -EINVAL;
    cctx c = {0};
    int r = coerce_value(&c, s->root, instance, 0);
    pcre2_match_data_free(c.md);
    pcre2_match_context_free(c.mc);
    return c.oom ? -ENOMEM : r;
}
