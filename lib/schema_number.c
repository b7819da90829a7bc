/*
 * schema_number.c - JSON Schema validator: numbers: types of a value, exact comparison, decimal
 * multipleOf, and the numeric keywords. See schema_int.h for the whole.
 */
#include "schema_int.h"

/* ------------------------------------------------------------------------ */
/* Numbers: JSON compares values, not representations, so an integer and a
 * real with the same value are equal (1 == 1.0) and bounds compare exactly
 * even where a double cannot hold a 64-bit integer.                         */

bool real_is_integral(double d)
{
    return isfinite(d) && floor(d) == d;
}

/* ------------------------------------------------------------------------ */
/* Any number as decimal text: digits (no leading or trailing zeros) times a
 * power of ten. Raw numbers (te_json_loadb(): integers beyond 64 bits, reals
 * beyond a double) are compared and divided this way, exactly.             */

typedef struct bigdec {
    bool neg;
    char *digits; /* "" for zero */
    size_t nd;
    long exp;
} bigdec;

static bool bigdec_parse(const char *t, bigdec *d)
{
    size_t n = strlen(t);
    d->digits = malloc(n + 1);
    d->nd = 0;
    d->exp = 0;
    d->neg = false;
    if (!d->digits)
        return false;
    const char *p = t;
    if (*p == '-') {
        d->neg = true;
        p++;
    }
    bool frac = false;
    for (; *p && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.' || *p == ',') {
            frac = true;
            continue;
        }
        if (*p < '0' || *p > '9')
            continue;
        if (d->nd || *p != '0')
            d->digits[d->nd++] = *p;
        if (frac)
            d->exp--;
    }
    if (*p == 'e' || *p == 'E') {
        long e = strtol(p + 1, NULL, 10);
        d->exp = e > 1000000000L ? 1000000000L : e < -1000000000L ? -1000000000L : d->exp + e;
    }
    while (d->nd && d->digits[d->nd - 1] == '0') {
        d->nd--;
        d->exp++;
    }
    d->digits[d->nd] = '\0';
    if (!d->nd)
        d->neg = false;
    return true;
}

static bool bigdec_of(const json_t *v, bigdec *d)
{
    char buf[64];
    const char *raw = te_json_rawnum_text(v);
    if (!raw && json_is_integer(v))
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (!raw && real_is_integral(json_real_value(v)) && fabs(json_real_value(v)) < 1e30)
        snprintf(buf, sizeof(buf), "%.0f", json_real_value(v)); /* exact: 2^64 as 2^64 */
    else if (!raw)
        te_json_real_text(json_real_value(v), buf, sizeof(buf));
    return bigdec_parse(raw ? raw : buf, d);
}

static int bigdec_cmp(const bigdec *a, const bigdec *b)
{
    if (a->neg != b->neg)
        return a->neg ? -1 : 1;
    int sign = a->neg ? -1 : 1;
    if (!a->nd || !b->nd)
        return a->nd == b->nd ? 0 : (a->nd ? sign : -sign);
    /* The place of the leading digit decides, then the digits. */
    long pa = (long)a->nd + a->exp, pb = (long)b->nd + b->exp;
    if (pa != pb)
        return pa < pb ? -sign : sign;
    size_t n = a->nd > b->nd ? a->nd : b->nd;
    for (size_t i = 0; i < n; i++) {
        char x = i < a->nd ? a->digits[i] : '0', y = i < b->nd ? b->digits[i] : '0';
        if (x != y)
            return x < y ? -sign : sign;
    }
    return 0;
}

static bool rawnum_is_integral(const json_t *v)
{
    bigdec d;
    if (!bigdec_parse(te_json_rawnum_text(v), &d))
        return false;
    bool integral = d.exp >= 0;
    free(d.digits);
    return integral;
}

/* The draft-07 types a value has: a number with no fractional part is an
 * integer whatever its representation. */
unsigned types_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL:
        return TY_NULL;
    case JSON_TRUE:
    case JSON_FALSE:
        return TY_BOOLEAN;
    case JSON_OBJECT:
        return TY_OBJECT;
    case JSON_ARRAY:
        return TY_ARRAY;
    case JSON_STRING:
        if (te_json_is_rawnum(v))
            return TY_NUMBER | (rawnum_is_integral(v) ? TY_INTEGER : 0);
        return TY_STRING;
    case JSON_INTEGER:
        return TY_NUMBER | TY_INTEGER;
    case JSON_REAL:
        return TY_NUMBER | (real_is_integral(json_real_value(v)) ? TY_INTEGER : 0);
    }
    return 0;
}

/* The name of a value's type as a reader would say it ("got number" for
 * 1.5, "got integer" for 3). */
const char *type_name_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL:
        return "null";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        if (te_json_is_rawnum(v))
            return rawnum_is_integral(v) ? "integer" : "number";
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    }
    return "value";
}

/* Compare an integer with a finite double exactly: -1, 0 or 1. */
static int cmp_int_real(json_int_t i, double d)
{
    /* 2^63 is exactly representable; doubles beyond it are beyond any
     * json_int_t (assumed 64-bit, as jansson uses long long). */
    if (d >= 9223372036854775808.0)
        return -1;
    if (d < -9223372036854775808.0)
        return 1;
    double t = trunc(d);
    json_int_t ti = (json_int_t)t;
    if (i != ti)
        return i < ti ? -1 : 1;
    return d > t ? -1 : d < t ? 1 : 0;
}

int num_cmp(const json_t *a, const json_t *b)
{
    if (te_json_is_rawnum(a) || te_json_is_rawnum(b)) {
        bigdec x, y;
        bool okx = bigdec_of(a, &x), oky = bigdec_of(b, &y);
        int r = okx && oky ? bigdec_cmp(&x, &y) : 0;
        free(okx ? x.digits : NULL);
        free(oky ? y.digits : NULL);
        return r;
    }
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return x < y ? -1 : x > y;
    }
    if (json_is_integer(a))
        return cmp_int_real(json_integer_value(a), json_real_value(b));
    if (json_is_integer(b))
        return -cmp_int_real(json_integer_value(b), json_real_value(a));
    double x = json_real_value(a), y = json_real_value(b);
    return x < y ? -1 : x > y;
}
decimal decimal_of(const json_t *v)
{
    decimal d = {0, 0};
    if (te_json_is_rawnum(v)) {
        /* A raw multipleOf: 0 digits (refused at compile) when beyond 64 bits. */
        bigdec x;
        if (bigdec_parse(te_json_rawnum_text(v), &x) && x.nd <= 19) {
            for (size_t i = 0; i < x.nd; i++)
                d.digits = d.digits * 10 + (uint64_t)(x.digits[i] - '0');
            d.exp = (int)(x.exp > 100000 ? 100000 : x.exp < -100000 ? -100000 : x.exp);
        }
        free(x.digits);
        return d;
    }
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        d.digits = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
        return d;
    }
    double x = fabs(json_real_value(v));
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    /* buf is "D[.DDD]e[+-]XX" (the radix character is whatever the locale
     * says, so anything that is not a digit before the 'e' is skipped). */
    const char *p = buf;
    int frac = -1;
    for (; *p && *p != 'e'; p++) {
        if (*p >= '0' && *p <= '9') {
            d.digits = d.digits * 10 + (uint64_t)(*p - '0');
            if (frac >= 0)
                frac++;
        } else if (frac < 0) {
            frac = 0;
        }
    }
    d.exp = (*p == 'e' ? atoi(p + 1) : 0) - (frac > 0 ? frac : 0);
    while (d.digits && d.digits % 10 == 0) {
        d.digits /= 10;
        d.exp++;
    }
    return d;
}

/* (a + b) mod m for a, b < m, without overflow. */
static uint64_t addmod(uint64_t a, uint64_t b, uint64_t m)
{
    return a >= m - b ? a - (m - b) : a + b;
}

/* Whether x is an integer multiple of m (m > 0), exactly, in decimal. */
static bool is_multiple(decimal x, decimal m)
{
    if (x.digits == 0)
        return true;
    if (x.exp >= m.exp) {
        /* m.digits must divide x.digits * 10^(x.exp - m.exp). */
        uint64_t r = x.digits % m.digits;
        for (int k = x.exp - m.exp; k > 0 && r; k--) {
            uint64_t r10 = 0;
            for (int j = 0; j < 10; j++)
                r10 = addmod(r10, r, m.digits);
            r = r10;
        }
        return r == 0;
    }
    /* m.digits * 10^(m.exp - x.exp) must divide x.digits; once it exceeds
     * x.digits it cannot. */
    uint64_t div = m.digits;
    for (int k = m.exp - x.exp; k > 0; k--) {
        if (div > x.digits / 10)
            return false;
        div *= 10;
    }
    return x.digits % div == 0;
}

/* The same for a raw number: its digits' remainder is taken one digit at a
 * time, so that any length works. */
static bool raw_is_multiple(const json_t *inst, decimal m)
{
    bigdec x;
    if (!bigdec_parse(te_json_rawnum_text(inst), &x))
        return false;
    bool r;
    if (!x.nd) {
        r = true;
    } else if (x.exp < m.exp || !m.digits) {
        r = false; /* digits without trailing zeros cannot carry m's */
    } else {
        unsigned __int128 rem = 0;
        for (size_t i = 0; i < x.nd; i++)
            rem = (rem * 10 + (unsigned)(x.digits[i] - '0')) % m.digits;
        for (long k = x.exp - m.exp; k > 0 && rem; k--)
            rem = rem * 10 % m.digits;
        r = rem == 0;
    }
    free(x.digits);
    return r;
}

/* A number as text for messages: integers as they are, reals in their
 * shortest round-tripping form. */
static void sb_put_number(sbuf *b, const json_t *v)
{
    if (te_json_is_rawnum(v)) {
        sb_puts(b, te_json_rawnum_text(v));
        return;
    }
    if (json_is_integer(v)) {
        sb_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return;
    }
    double x = json_real_value(v);
    char buf[48];
    if (real_is_integral(x) && fabs(x) < 1e16) {
        snprintf(buf, sizeof(buf), "%.0f", x); /* 10.0 reads better as 10 than 1e+01 */
    } else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof(buf), "%.*g", prec, x);
            if (strtod(buf, NULL) == x)
                break;
        }
    }
    sb_puts(b, buf);
}
/* A bound violated: "must be >= 5, got 3". */
static void bound_violation(vctx *ctx, const char *op, const json_t *bound, const json_t *inst)
{
    if (!loud(ctx)) {
        violation(ctx, "bound");
        return;
    }
    sbuf b = {0};
    sb_printf(&b, "must be %s ", op);
    sb_put_number(&b, bound);
    sb_puts(&b, ", got ");
    sb_put_number(&b, inst);
    if (b.oom)
        ctx->oom = true;
    else
        violation(ctx, "%s", b.p);
    free(b.p);
}

bool validate_number(vctx *ctx, const node *n, const json_t *inst)
{
    bool ok = true;
    if (n->minimum && num_cmp(inst, n->minimum) < 0) {
        bound_violation(ctx, ">=", n->minimum, inst);
        FAILED();
    }
    if (n->xminimum && num_cmp(inst, n->xminimum) <= 0) {
        bound_violation(ctx, ">", n->xminimum, inst);
        FAILED();
    }
    if (n->maximum && num_cmp(inst, n->maximum) > 0) {
        bound_violation(ctx, "<=", n->maximum, inst);
        FAILED();
    }
    if (n->xmaximum && num_cmp(inst, n->xmaximum) >= 0) {
        bound_violation(ctx, "<", n->xmaximum, inst);
        FAILED();
    }
    if (n->multiple_of && !(te_json_is_rawnum(inst) ? raw_is_multiple(inst, n->multiple)
                                                    : is_multiple(decimal_of(inst), n->multiple))) {
        bound_violation(ctx, "a multiple of", n->multiple_of, inst);
        FAILED();
    }
    return ok;
}
