/*
 * schema.c - JSON Schema draft-07 validation of tool arguments.
 *
 * A schema is compiled once (when the tool definitions load) into a graph of
 * nodes, one per schema object: keyword values are checked against what the
 * draft-07 meta-schema allows, regular expressions are compiled, and every
 * $ref is resolved to the node it points at, so that validating a call's
 * arguments never parses, resolves or compiles anything. Nodes borrow their
 * strings and values from a private deep copy of the schema document.
 *
 * Validation walks instance and graph together and collects every violation
 * with the JSON pointer of the offending value. Subschemas whose failures are
 * not themselves errors (anyOf, oneOf, not, if, contains, propertyNames) are
 * evaluated "quietly": no messages, and the evaluation stops at the first
 * violation. Recursion is bounded (instance depth, stacked schema
 * applications, total work) so that neither a hostile instance nor a looping
 * $ref can exhaust the stack or the CPU.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolexec.h"

/* Schema applications stacked at once during a validation. Recursion
 * through $ref, allOf and friends stacks a few per instance level; a $ref
 * that loops without consuming the instance ({"$ref": "#"}) would otherwise
 * never end. At a few hundred bytes per level this stays well inside a
 * thread's stack, sanitizers included. */
#define MAX_FRAMES (4 * TE_SCHEMA_MAX_DEPTH)
/* Subschema evaluations in one validation. Nested anyOf/oneOf over
 * recursive $refs can take time exponential in the instance's depth; past
 * this budget the instance is rejected rather than the daemon stalled. */
#define MAX_STEPS (1ul << 24)
/* Regular expressions ("pattern", "patternProperties") run PCRE2's
 * interpreter with a callout before every pattern item (auto-callout), each
 * counted as one step of the budget above: backtracking is work like any
 * other. At PCRE2's own limits a slug pattern with nested repeats over 200
 * tags of catastrophic input took 0.2 s per tag, 26-30 s in all, with the
 * daemon's loop waiting; now the whole validation stops at the budget
 * (16M callouts, ~0.4 s) and is refused as too expensive. Per match, the
 * match limit (PCRE2's default is 10M: 0.2 s) and the depth limit (nested
 * backtracking, its memory) bound a single match whatever budget is left.
 * No JIT: it only divides the cost by a constant where the budget is what
 * bounds it, and it would need executable memory and a stack of its own. */
#define REGEX_MATCH_LIMIT 1000000 /* 1.3M callouts, ~35 ms */
/* ~144 bytes of heap a level: 14 MiB; "^(\\w|-)*$" nests about a level a
 * character, so a string of some 50k characters through a repeated group
 * is refused as too expensive (20k pass). */
#define REGEX_DEPTH_LIMIT 100000
/* Violations spelled out in the message; later ones are only counted. */
#define MAX_LISTED 50
/* Bytes of a quoted value (an enum, a property name, a JSON pointer) shown
 * in one message; longer ones keep their head and tail around "...". */
#define MAX_QUOTED 160

/* The meta-schema a "$ref" may name to ask "is this value a valid schema?". */
#define META_SCHEMA_URI "http://json-schema.org/draft-07/schema"

/* ------------------------------------------------------------------------ */
/* Growable strings that remember an allocation failure instead of
 * reporting each one, so that message building stays linear.               */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static bool sb_reserve(sbuf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + more + 1) {
        if (cap > SIZE_MAX / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (!sb_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static void sb_putc(sbuf *b, char c)
{
    sb_putn(b, &c, 1);
}

static void sb_vprintf(sbuf *b, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0 || !sb_reserve(b, (size_t)n))
        return;
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

static void sb_truncate(sbuf *b, size_t len)
{
    b->len = len;
    if (b->p)
        b->p[len] = '\0';
}

/* Append s, keeping at most about max bytes: head "..." tail, both cut on
 * UTF-8 character boundaries so the message stays valid UTF-8. */
static void sb_put_clipped(sbuf *b, const char *s, size_t len, size_t max)
{
    if (len <= max) {
        sb_putn(b, s, len);
        return;
    }
    size_t head = max / 2, tail = len - max / 2;
    while (head > 0 && ((unsigned char)s[head] & 0xc0) == 0x80)
        head--;
    while (tail < len && ((unsigned char)s[tail] & 0xc0) == 0x80)
        tail++;
    sb_putn(b, s, head);
    sb_puts(b, "...");
    sb_putn(b, s + tail, len - tail);
}

/* Append a string as a JSON string literal (quoted, escaped, clipped). */
static void sb_put_quoted(sbuf *b, const char *s, size_t len)
{
    sbuf q = {0};
    sb_putc(&q, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            sb_putc(&q, '\\');
            sb_putc(&q, (char)c);
        } else if (c < 0x20) {
            sb_printf(&q, "\\u%04x", c);
        } else {
            sb_putc(&q, (char)c);
        }
    }
    sb_putc(&q, '"');
    if (q.oom)
        b->oom = true;
    else
        sb_put_clipped(b, q.p, q.len, MAX_QUOTED);
    free(q.p);
}

/* Append a JSON value as compact JSON text (clipped). */
static void sb_put_json(sbuf *b, const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) {
        b->oom = true;
        return;
    }
    sb_put_clipped(b, text, strlen(text), MAX_QUOTED);
    free(text);
}

/* Append one JSON pointer reference token: "/" then the name with "~"
 * written "~0" and "/" written "~1" (RFC 6901). */
static void sb_put_segment(sbuf *b, const char *name)
{
    sb_putc(b, '/');
    for (const char *p = name; *p; p++) {
        if (*p == '~')
            sb_puts(b, "~0");
        else if (*p == '/')
            sb_puts(b, "~1");
        else
            sb_putc(b, *p);
    }
}

static void sb_put_index(sbuf *b, size_t i)
{
    sb_printf(b, "/%zu", i);
}

/* ------------------------------------------------------------------------ */
/* Numbers: JSON compares values, not representations, so an integer and a
 * real with the same value are equal (1 == 1.0) and bounds compare exactly
 * even where a double cannot hold a 64-bit integer.                         */

enum {
    TY_NULL = 1,
    TY_BOOLEAN = 2,
    TY_OBJECT = 4,
    TY_ARRAY = 8,
    TY_NUMBER = 16,
    TY_STRING = 32,
    TY_INTEGER = 64,
};

static const struct {
    const char *name;
    unsigned bit;
} type_names[] = {
    {"null", TY_NULL},     {"boolean", TY_BOOLEAN}, {"object", TY_OBJECT},   {"array", TY_ARRAY},
    {"number", TY_NUMBER}, {"string", TY_STRING},   {"integer", TY_INTEGER},
};

static bool real_is_integral(double d)
{
    return isfinite(d) && floor(d) == d;
}

/* The draft-07 types a value has: a number with no fractional part is an
 * integer whatever its representation. */
static unsigned types_of(const json_t *v)
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
static const char *type_name_of(const json_t *v)
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

static int num_cmp(const json_t *a, const json_t *b)
{
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

/* A number's absolute value as digits * 10^exp, from its shortest decimal
 * form: multipleOf is decided on the decimal value the JSON text wrote
 * (0.0075 is a multiple of 0.0001), which binary floating point cannot. */
typedef struct decimal {
    uint64_t digits;
    int exp;
} decimal;

static decimal decimal_of(const json_t *v)
{
    decimal d = {0, 0};
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

/* A number as text for messages: integers as they are, reals in their
 * shortest round-tripping form. */
static void sb_put_number(sbuf *b, const json_t *v)
{
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

/* ------------------------------------------------------------------------ */
/* JSON equality (enum, const, uniqueItems) and a hash consistent with it.  */

/* 1 when equal, 0 when not, -1 when nested deeper than TE_SCHEMA_MAX_DEPTH
 * (the comparison would otherwise recurse without bound). */
static int json_eq(const json_t *a, const json_t *b, int depth)
{
    if (depth > TE_SCHEMA_MAX_DEPTH)
        return -1;
    if (json_is_number(a) && json_is_number(b))
        return num_cmp(a, b) == 0;
    if (json_typeof(a) != json_typeof(b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY: {
        size_t n = json_array_size(a);
        if (n != json_array_size(b))
            return 0;
        for (size_t i = 0; i < n; i++) {
            int r = json_eq(json_array_get(a, i), json_array_get(b, i), depth + 1);
            if (r != 1)
                return r;
        }
        return 1;
    }
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return 0;
        const char *key;
        const json_t *va;
        json_object_foreach((json_t *)a, key, va)
        {
            const json_t *vb = json_object_get(b, key);
            if (!vb)
                return 0;
            int r = json_eq(va, vb, depth + 1);
            if (r != 1)
                return r;
        }
        return 1;
    }
    default: /* null, true, false: the type says it all */
        return 1;
    }
}

static uint64_t mix64(uint64_t x)
{
    /* splitmix64's finaliser: every input bit affects every output bit. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return mix64(h);
}

/* Hash equal values (in the json_eq sense) equally. -1 when too deep. */
static int json_hash(const json_t *v, int depth, uint64_t *out)
{
    if (depth > TE_SCHEMA_MAX_DEPTH)
        return -1;
    uint64_t h = (uint64_t)json_typeof(v) + 1;
    switch (json_typeof(v)) {
    case JSON_INTEGER:
    case JSON_REAL: {
        uint64_t bits;
        double d = json_is_real(v) ? json_real_value(v) : 0;
        if (json_is_integer(v))
            bits = (uint64_t)json_integer_value(v);
        else if (real_is_integral(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
            bits = (uint64_t)(json_int_t)d; /* 1.0 hashes as 1 */
        else
            memcpy(&bits, &d, sizeof(bits));
        h = mix64(bits ^ 0x6e756d626572ull);
        break;
    }
    case JSON_STRING:
        h = hash_bytes(json_string_value(v), json_string_length(v));
        break;
    case JSON_ARRAY:
        for (size_t i = 0; i < json_array_size(v); i++) {
            uint64_t e;
            if (json_hash(json_array_get(v, i), depth + 1, &e) < 0)
                return -1;
            h = mix64(h ^ e) + i;
        }
        break;
    case JSON_OBJECT: {
        /* Members are combined with a sum: key order does not matter. */
        const char *key;
        json_t *m;
        json_object_foreach((json_t *)v, key, m)
        {
            uint64_t e;
            if (json_hash(m, depth + 1, &e) < 0)
                return -1;
            h += mix64(hash_bytes(key, strlen(key)) ^ e);
        }
        break;
    }
    default:
        break;
    }
    *out = h;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* URI references (RFC 3986), as far as $id and $ref need them.             */

typedef struct uri {
    const char *scheme, *auth, *path, *query, *frag;
    size_t scheme_n, auth_n, path_n, query_n, frag_n;
    bool has_scheme, has_auth, has_query, has_frag;
} uri;

static void uri_split(const char *s, uri *u)
{
    memset(u, 0, sizeof(*u));
    const char *p = s;
    /* scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
        const char *q = p + 1;
        while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
               *q == '+' || *q == '-' || *q == '.')
            q++;
        if (*q == ':') {
            u->has_scheme = true;
            u->scheme = p;
            u->scheme_n = (size_t)(q - p);
            p = q + 1;
        }
    }
    if (p[0] == '/' && p[1] == '/') {
        u->has_auth = true;
        u->auth = p + 2;
        u->auth_n = strcspn(u->auth, "/?#");
        p = u->auth + u->auth_n;
    }
    u->path = p;
    u->path_n = strcspn(p, "?#");
    p += u->path_n;
    if (*p == '?') {
        u->has_query = true;
        u->query = p + 1;
        u->query_n = strcspn(u->query, "#");
        p = u->query + u->query_n;
    }
    if (*p == '#') {
        u->has_frag = true;
        u->frag = p + 1;
        u->frag_n = strlen(u->frag);
    }
}

/* Remove "." and ".." segments from a path (RFC 3986 section 5.2.4). */
static void remove_dots(sbuf *out, const char *path, size_t n)
{
    char *in = malloc(n + 1);
    if (!in) {
        out->oom = true;
        return;
    }
    memcpy(in, path, n);
    in[n] = '\0';
    size_t start = out->len; /* out may hold scheme and authority already */
    char *p = in;
    while (*p) {
        if (strncmp(p, "../", 3) == 0) {
            p += 3;
        } else if (strncmp(p, "./", 2) == 0 || strncmp(p, "/./", 3) == 0) {
            p += 2;
        } else if (strcmp(p, "/.") == 0) {
            p[1] = '/';
            p += 1;
        } else if (strncmp(p, "/../", 4) == 0 || strcmp(p, "/..") == 0) {
            if (p[3] == '\0')
                p[2] = '/', p += 2;
            else
                p += 3;
            size_t len = out->len;
            while (len > start && out->p[len - 1] != '/')
                len--;
            if (len > start)
                len--;
            sb_truncate(out, len);
        } else if (strcmp(p, ".") == 0 || strcmp(p, "..") == 0) {
            break;
        } else {
            size_t seg = (*p == '/') + strcspn(p + (*p == '/'), "/");
            sb_putn(out, p, seg);
            p += seg;
        }
    }
    free(in);
}

/* Resolve a reference against a base (RFC 3986 section 5.2.2). An empty
 * fragment is dropped: "x#" and "x" name the same resource. */
static char *uri_resolve(const char *base, const char *ref)
{
    uri b, r;
    uri_split(base, &b);
    uri_split(ref, &r);
    sbuf t = {0};
    const uri *sa = r.has_scheme ? &r : &b; /* where scheme comes from */
    if (sa->has_scheme) {
        sb_putn(&t, sa->scheme, sa->scheme_n);
        sb_putc(&t, ':');
    }
    if (r.has_scheme || r.has_auth) {
        if (r.has_auth) {
            sb_puts(&t, "//");
            sb_putn(&t, r.auth, r.auth_n);
        }
        remove_dots(&t, r.path, r.path_n);
        if (r.has_query) {
            sb_putc(&t, '?');
            sb_putn(&t, r.query, r.query_n);
        }
    } else {
        if (b.has_auth) {
            sb_puts(&t, "//");
            sb_putn(&t, b.auth, b.auth_n);
        }
        if (r.path_n == 0) {
            sb_putn(&t, b.path, b.path_n);
            if (r.has_query || b.has_query) {
                sb_putc(&t, '?');
                sb_putn(&t, r.has_query ? r.query : b.query, r.has_query ? r.query_n : b.query_n);
            }
        } else {
            if (r.path[0] == '/') {
                remove_dots(&t, r.path, r.path_n);
            } else {
                sbuf merged = {0};
                if (b.has_auth && b.path_n == 0) {
                    sb_putc(&merged, '/');
                } else {
                    size_t dir = b.path_n;
                    while (dir > 0 && b.path[dir - 1] != '/')
                        dir--;
                    sb_putn(&merged, b.path, dir);
                }
                sb_putn(&merged, r.path, r.path_n);
                if (merged.oom)
                    t.oom = true;
                else
                    remove_dots(&t, merged.p, merged.len);
                free(merged.p);
            }
            if (r.has_query) {
                sb_putc(&t, '?');
                sb_putn(&t, r.query, r.query_n);
            }
        }
    }
    if (r.has_frag && r.frag_n > 0) {
        sb_putc(&t, '#');
        sb_putn(&t, r.frag, r.frag_n);
    }
    if (!t.oom && !t.p)
        sb_puts(&t, "");
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    return t.p;
}

/* ------------------------------------------------------------------------ */
/* The compiled form.                                                       */

enum node_kind {
    NODE_TRUE,   /* true or {}: anything */
    NODE_FALSE,  /* false: nothing */
    NODE_SCHEMA, /* a schema object */
    NODE_META,   /* the draft-07 meta-schema: "is a valid schema" */
};

typedef struct node node;

typedef struct named_node {
    const char *name;
    node *schema;
} named_node;

typedef struct regex_node {
    pcre2_code *re;
    const char *source;
    node *schema;
} regex_node;

typedef struct dependency {
    const char *name;
    const json_t *required; /* array of names, or NULL */
    node *schema;           /* or NULL */
} dependency;

#define NO_LIMIT (-1LL) /* a count keyword that is absent */

struct node {
    enum node_kind kind;
    node *ref; /* draft-07: a $ref replaces every other keyword */
    unsigned types;
    char *types_text; /* "string or null", for messages */
    const json_t *enum_values, *const_value;
    const json_t *minimum, *maximum, *xminimum, *xmaximum, *multiple_of;
    decimal multiple;
    long long min_length, max_length, min_items, max_items, min_props, max_props;
    pcre2_code *pattern;
    const char *pattern_source;
    const json_t *props_json;
    named_node *props;
    size_t nprops;
    regex_node *pprops;
    size_t npprops;
    node *additional_props, *property_names;
    node *items;       /* items as one schema */
    node **item_list;  /* items as an array of schemas */
    size_t nitem_list; /* its length; item_list set means the array form */
    node *additional_items, *contains;
    bool unique_items;
    const json_t *required;
    node **all_of, **any_of, **one_of;
    size_t nall_of, nany_of, none_of;
    node *not_schema, *if_schema, *then_schema, *else_schema;
    dependency *deps;
    size_t ndeps;
};

struct te_schema {
    json_t *doc; /* private copy; nodes borrow from it */
    node *root;
    node true_node, false_node, meta_node;
    node **nodes; /* every NODE_SCHEMA node, for freeing */
    size_t nnodes, capnodes;
};

static void node_free(node *n)
{
    free(n->types_text);
    pcre2_code_free(n->pattern);
    free(n->props);
    for (size_t i = 0; i < n->npprops; i++)
        pcre2_code_free(n->pprops[i].re);
    free(n->pprops);
    free(n->item_list);
    free(n->all_of);
    free(n->any_of);
    free(n->one_of);
    free(n->deps);
    free(n);
}

void te_schema_free(te_schema *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nnodes; i++)
        node_free(s->nodes[i]);
    free(s->nodes);
    json_decref(s->doc);
    free(s);
}

/* ------------------------------------------------------------------------ */
/* Compiling. The same walk also serves the meta-schema check ("is this
 * value a schema?"), with s == NULL: then nothing is built, no regular
 * expression compiled and no $ref resolved, exactly as the meta-schema
 * itself would judge (it treats "pattern" and "$ref" as plain strings).     */

typedef struct id_entry {
    char *uri;          /* absolute part, or absolute#anchor */
    const json_t *json; /* the schema it identifies */
    const char *base;   /* the base URI inside it */
} id_entry;

typedef struct pending_ref {
    node *n;
    const char *text; /* the $ref as written */
    char *uri;        /* resolved against the base in force */
    char *where;      /* JSON pointer of the "$ref", for messages */
} pending_ref;

typedef struct map_entry {
    const json_t *key;
    node *value;
} map_entry;

typedef struct compiler {
    te_schema *s; /* NULL: check only */
    sbuf ptr;     /* JSON pointer of the value being compiled */
    const char *base;
    int depth;
    char *err;
    size_t errlen;
    id_entry *ids;
    size_t nids, capids;
    pending_ref *refs;
    size_t nrefs, caprefs;
    map_entry *map; /* open addressing, keyed by the schema object */
    size_t mapn, capmap;
    char **owned; /* base URIs made for $id, freed after compiling */
    size_t nowned, capowned;
    pcre2_compile_context *re_ctx;
} compiler;

static bool grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, c * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = c;
    return true;
}

static int cc_fail(compiler *cc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cc_fail(compiler *cc, const char *fmt, ...)
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
static char *quoted_message(const char *prefix, const char *str, const char *suffix)
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

static int cc_oom(compiler *cc)
{
    if (cc->err && cc->errlen)
        snprintf(cc->err, cc->errlen, "out of memory");
    return -ENOMEM;
}

/* Report at "<pointer>/<keyword>". */
static int kw_fail(compiler *cc, const char *kw, const char *what)
{
    size_t mark = cc->ptr.len;
    sb_put_segment(&cc->ptr, kw);
    int rc = cc->ptr.oom ? cc_oom(cc) : cc_fail(cc, "%s", what);
    sb_truncate(&cc->ptr, mark);
    return rc;
}

static size_t map_slot(const compiler *cc, const json_t *key)
{
    return (size_t)mix64((uint64_t)(uintptr_t)key) & (cc->capmap - 1);
}

static node *map_get(const compiler *cc, const json_t *key)
{
    if (!cc->capmap)
        return NULL;
    for (size_t i = map_slot(cc, key);; i = (i + 1) & (cc->capmap - 1)) {
        if (cc->map[i].key == key)
            return cc->map[i].value;
        if (!cc->map[i].key)
            return NULL;
    }
}

static bool map_put(compiler *cc, const json_t *key, node *value)
{
    if ((cc->mapn + 1) * 2 > cc->capmap) {
        size_t cap = cc->capmap ? cc->capmap * 2 : 64;
        map_entry *old = cc->map;
        size_t oldcap = cc->capmap;
        cc->map = calloc(cap, sizeof(*cc->map));
        if (!cc->map) {
            cc->map = old;
            return false;
        }
        cc->capmap = cap;
        for (size_t i = 0; i < oldcap; i++) {
            if (!old[i].key)
                continue;
            size_t j = map_slot(cc, old[i].key);
            while (cc->map[j].key)
                j = (j + 1) & (cap - 1);
            cc->map[j] = old[i];
        }
        free(old);
    }
    size_t j = map_slot(cc, key);
    while (cc->map[j].key)
        j = (j + 1) & (cc->capmap - 1);
    cc->map[j].key = key;
    cc->map[j].value = value;
    cc->mapn++;
    return true;
}

static char *own(compiler *cc, char *str)
{
    if (!str)
        return NULL;
    if (!grow((void **)&cc->owned, &cc->capowned, cc->nowned, sizeof(*cc->owned))) {
        free(str);
        return NULL;
    }
    cc->owned[cc->nowned++] = str;
    return str;
}

static int add_id(compiler *cc, const char *uri_text, const json_t *json, const char *base)
{
    for (size_t i = 0; i < cc->nids; i++)
        if (strcmp(cc->ids[i].uri, uri_text) == 0)
            return 0; /* the first one wins, as in document order */
    char *copy = strdup(uri_text);
    if (!copy || !grow((void **)&cc->ids, &cc->capids, cc->nids, sizeof(*cc->ids))) {
        free(copy);
        return cc_oom(cc);
    }
    cc->ids[cc->nids++] = (id_entry){copy, json, base};
    return 0;
}

static const id_entry *find_id(const compiler *cc, const char *uri_text)
{
    for (size_t i = 0; i < cc->nids; i++)
        if (strcmp(cc->ids[i].uri, uri_text) == 0)
            return &cc->ids[i];
    return NULL;
}

static int regex_compile(compiler *cc, const char *kw, const char *src, pcre2_code **out)
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

static int compile(compiler *cc, const json_t *j, node **out);

/* Compile j at "<pointer>/<seg>" (and "/<seg2>" when seg2 is set). */
static int compile_at(compiler *cc, const json_t *j, const char *seg, const char *seg2, node **out)
{
    size_t mark = cc->ptr.len;
    sb_put_segment(&cc->ptr, seg);
    if (seg2)
        sb_put_segment(&cc->ptr, seg2);
    int rc = cc->ptr.oom ? cc_oom(cc) : compile(cc, j, out);
    sb_truncate(&cc->ptr, mark);
    return rc;
}

static int compile_index(compiler *cc, const json_t *j, const char *seg, size_t i, node **out)
{
    char idx[24];
    snprintf(idx, sizeof(idx), "%zu", i);
    return compile_at(cc, j, seg, idx, out);
}

/* A keyword's value, or NULL; -EINVAL in *rc when it is not of one of the
 * types in mask. */
static const json_t *keyword(compiler *cc, const json_t *obj, const char *kw, unsigned mask,
                             const char *what, int *rc)
{
    const json_t *v = json_object_get(obj, kw);
    if (v && !(types_of(v) & mask)) {
        char text[96];
        snprintf(text, sizeof(text), "expected %s", what);
        *rc = kw_fail(cc, kw, text);
        return NULL;
    }
    return v;
}

/* A non-negative integer keyword (1.0 counts), or NO_LIMIT when absent. */
static int count_keyword(compiler *cc, const json_t *obj, const char *kw, long long *out)
{
    int rc = 0;
    *out = NO_LIMIT;
    const json_t *v = keyword(cc, obj, kw, TY_INTEGER, "a non-negative integer", &rc);
    if (!v)
        return rc;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return kw_fail(cc, kw, "expected a non-negative integer");
        *out = json_integer_value(v);
        return 0;
    }
    double d = json_real_value(v);
    if (d < 0)
        return kw_fail(cc, kw, "expected a non-negative integer");
    *out = d >= 9223372036854775807.0 ? LLONG_MAX : (long long)d;
    return 0;
}

/* An array of distinct strings ("required", a dependency's names). */
static int check_string_array(compiler *cc, const json_t *arr, const char *kw, const char *kw2)
{
    size_t mark = cc->ptr.len;
    sb_put_segment(&cc->ptr, kw);
    if (kw2)
        sb_put_segment(&cc->ptr, kw2);
    int rc = cc->ptr.oom ? cc_oom(cc) : 0;
    for (size_t i = 0; rc == 0 && i < json_array_size(arr); i++) {
        const json_t *e = json_array_get(arr, i);
        if (!json_is_string(e)) {
            rc = cc_fail(cc, "expected an array of strings");
            break;
        }
        for (size_t k = 0; k < i; k++)
            if (json_eq(e, json_array_get(arr, k), 0) == 1) {
                char *msg = quoted_message("duplicate ", json_string_value(e), "");
                rc = msg ? cc_fail(cc, "%s", msg) : cc_oom(cc);
                free(msg);
                break;
            }
    }
    sb_truncate(&cc->ptr, mark);
    return rc;
}

/* An array of one or more schemas (allOf, anyOf, oneOf, items). */
static int compile_schema_array(compiler *cc, const json_t *arr, const char *kw, node ***out,
                                size_t *n)
{
    if (json_array_size(arr) == 0)
        return kw_fail(cc, kw, "expected a non-empty array of schemas");
    node **list = NULL;
    if (cc->s) {
        list = calloc(json_array_size(arr), sizeof(*list));
        if (!list)
            return cc_oom(cc);
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        node *child = NULL;
        int rc = compile_index(cc, json_array_get(arr, i), kw, i, &child);
        if (rc) {
            free(list);
            return rc;
        }
        if (list)
            list[i] = child;
    }
    if (out) {
        *out = list;
        *n = json_array_size(arr);
    } else {
        free(list);
    }
    return 0;
}

static int compile_type(compiler *cc, const json_t *v, node *n)
{
    const char *expected = "expected a string or an array of strings";
    sbuf text = {0};
    unsigned types = 0;
    size_t count = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_string(v) && !(json_is_array(v) && count > 0))
        return kw_fail(cc, "type", expected);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(e)) {
            rc = kw_fail(cc, "type", expected);
            break;
        }
        unsigned bit = 0;
        for (size_t k = 0; k < sizeof(type_names) / sizeof(type_names[0]); k++)
            if (strcmp(json_string_value(e), type_names[k].name) == 0)
                bit = type_names[k].bit;
        if (!bit || (types & bit)) {
            char *msg =
                quoted_message(bit ? "duplicate type " : "unknown type ", json_string_value(e), "");
            rc = msg ? kw_fail(cc, "type", msg) : cc_oom(cc);
            free(msg);
            break;
        }
        types |= bit;
        if (i > 0)
            sb_puts(&text, i + 1 == count ? " or " : ", ");
        sb_puts(&text, json_string_value(e));
    }
    if (rc == 0 && text.oom)
        rc = cc_oom(cc);
    if (rc == 0 && n) {
        n->types = types;
        n->types_text = text.p;
        text.p = NULL;
    }
    free(text.p);
    return rc;
}

/* $id: a new base URI for what is inside, and a name $ref can use. */
static int compile_id(compiler *cc, const json_t *j, const char *id)
{
    char *full = own(cc, uri_resolve(cc->base, id));
    if (!full)
        return cc_oom(cc);
    char *hash = strchr(full, '#');
    if (hash && hash[1] && hash[1] != '/') {
        /* A plain-name fragment ("#foo") names this schema but does not
         * change the base. */
        char *abs = own(cc, strndup(full, (size_t)(hash - full)));
        if (!abs)
            return cc_oom(cc);
        int rc = add_id(cc, full, j, abs);
        if (rc)
            return rc;
        if (hash == full || find_id(cc, abs))
            return 0;
        cc->base = abs;
        return add_id(cc, abs, j, abs);
    }
    if (hash)
        *hash = '\0';
    cc->base = full;
    return add_id(cc, full, j, full);
}

static int compile_object_keywords(compiler *cc, const json_t *j, node *n);

static int compile(compiler *cc, const json_t *j, node **out)
{
    te_schema *s = cc->s;
    *out = NULL;
    if (json_is_true(j)) {
        *out = s ? &s->true_node : NULL;
        return 0;
    }
    if (json_is_false(j)) {
        *out = s ? &s->false_node : NULL;
        return 0;
    }
    if (!json_is_object(j))
        return cc_fail(cc, "expected a schema (an object or a boolean)");
    if (cc->depth >= TE_SCHEMA_MAX_DEPTH)
        return cc_fail(cc, "nesting too deep");
    node *n = NULL;
    if (s) {
        n = map_get(cc, j);
        if (n) {
            *out = n;
            return 0;
        }
        n = calloc(1, sizeof(*n));
        if (!n || !grow((void **)&s->nodes, &s->capnodes, s->nnodes, sizeof(*s->nodes))) {
            free(n);
            return cc_oom(cc);
        }
        s->nodes[s->nnodes++] = n;
        n->kind = NODE_SCHEMA;
        if (!map_put(cc, j, n))
            return cc_oom(cc);
    }
    const char *saved_base = cc->base;
    cc->depth++;
    int rc = compile_object_keywords(cc, j, n);
    cc->depth--;
    cc->base = saved_base;
    *out = n;
    return rc;
}

static int compile_object_keywords(compiler *cc, const json_t *j, node *n)
{
    int rc = 0;
    const json_t *v;
    te_schema *s = cc->s;

    /* Annotations: checked for type only, as the meta-schema does. */
    static const char *const string_kws[] = {"$schema",        "$comment", "title",
                                             "description",    "format",   "contentMediaType",
                                             "contentEncoding"};
    for (size_t i = 0; i < sizeof(string_kws) / sizeof(string_kws[0]); i++)
        if (!keyword(cc, j, string_kws[i], TY_STRING, "a string", &rc) && rc)
            return rc;
    if ((!keyword(cc, j, "readOnly", TY_BOOLEAN, "a boolean", &rc) && rc) ||
        (!keyword(cc, j, "writeOnly", TY_BOOLEAN, "a boolean", &rc) && rc) ||
        (!keyword(cc, j, "examples", TY_ARRAY, "an array", &rc) && rc))
        return rc;

    const json_t *ref = keyword(cc, j, "$ref", TY_STRING, "a string", &rc);
    if (rc)
        return rc;
    const json_t *id = keyword(cc, j, "$id", TY_STRING, "a string", &rc);
    if (rc)
        return rc;
    /* Draft-07: next to a $ref every keyword, $id included, is ignored. */
    if (s && id && !ref && (rc = compile_id(cc, j, json_string_value(id))))
        return rc;
    if (s && ref) {
        if (!grow((void **)&cc->refs, &cc->caprefs, cc->nrefs, sizeof(*cc->refs)))
            return cc_oom(cc);
        pending_ref *p = &cc->refs[cc->nrefs];
        p->n = n;
        p->text = json_string_value(ref);
        p->uri = uri_resolve(cc->base, json_string_value(ref));
        sbuf where = {0};
        sb_puts(&where, cc->ptr.len ? cc->ptr.p : "");
        sb_puts(&where, "/$ref");
        p->where = where.p;
        if (!p->uri || where.oom) {
            free(p->uri);
            free(p->where);
            return cc_oom(cc);
        }
        cc->nrefs++;
    }

    if ((v = json_object_get(j, "type")) && (rc = compile_type(cc, v, n)))
        return rc;
    if ((v = keyword(cc, j, "enum", TY_ARRAY, "an array", &rc)) && n)
        n->enum_values = v;
    if (rc)
        return rc;
    if ((v = json_object_get(j, "const")) && n)
        n->const_value = v;

    /* Numbers. */
    static const char *const bounds[] = {"minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum", "multipleOf"};
    const json_t *bv[5];
    for (size_t i = 0; i < 5; i++)
        if (!(bv[i] = keyword(cc, j, bounds[i], TY_NUMBER, "a number", &rc)) && rc)
            return rc;
    if (bv[4]) {
        bool positive =
            json_is_integer(bv[4]) ? json_integer_value(bv[4]) > 0 : json_real_value(bv[4]) > 0;
        if (!positive)
            return kw_fail(cc, "multipleOf", "expected a number greater than 0");
    }
    if (n) {
        n->minimum = bv[0];
        n->maximum = bv[1];
        n->xminimum = bv[2];
        n->xmaximum = bv[3];
        n->multiple_of = bv[4];
        if (bv[4])
            n->multiple = decimal_of(bv[4]);
    }

    /* Counts: string lengths, item and property counts. */
    long long lim[6];
    static const char *const counts[] = {"minLength", "maxLength",     "minItems",
                                         "maxItems",  "minProperties", "maxProperties"};
    for (size_t i = 0; i < 6; i++)
        if ((rc = count_keyword(cc, j, counts[i], &lim[i])))
            return rc;
    if (n) {
        n->min_length = lim[0];
        n->max_length = lim[1];
        n->min_items = lim[2];
        n->max_items = lim[3];
        n->min_props = lim[4];
        n->max_props = lim[5];
    }
    /* Strings. */
    if ((v = keyword(cc, j, "pattern", TY_STRING, "a string", &rc)) && n) {
        n->pattern_source = json_string_value(v);
        if ((rc = regex_compile(cc, "pattern", n->pattern_source, &n->pattern)))
            return rc;
    }
    if (rc)
        return rc;

    /* Arrays. */
    if ((v = json_object_get(j, "items"))) {
        if (json_is_array(v)) {
            if ((rc = compile_schema_array(cc, v, "items", n ? &n->item_list : NULL,
                                           n ? &n->nitem_list : NULL)))
                return rc;
        } else {
            node *items;
            if ((rc = compile_at(cc, v, "items", NULL, &items)))
                return rc;
            if (n)
                n->items = items;
        }
    }
    static const char *const single[] = {"additionalItems",
                                         "contains",
                                         "additionalProperties",
                                         "propertyNames",
                                         "not",
                                         "if",
                                         "then",
                                         "else"};
    node *sub[8] = {NULL};
    for (size_t i = 0; i < 8; i++)
        if ((v = json_object_get(j, single[i])) &&
            (rc = compile_at(cc, v, single[i], NULL, &sub[i])))
            return rc;
    if (n) {
        n->additional_items = sub[0];
        n->contains = sub[1];
        n->additional_props = sub[2];
        n->property_names = sub[3];
        n->not_schema = sub[4];
        n->if_schema = sub[5];
        n->then_schema = sub[6];
        n->else_schema = sub[7];
    }
    if ((v = keyword(cc, j, "uniqueItems", TY_BOOLEAN, "a boolean", &rc)) && n)
        n->unique_items = json_is_true(v);
    if (rc)
        return rc;

    /* Objects. */
    if ((v = keyword(cc, j, "required", TY_ARRAY, "an array of strings", &rc))) {
        if ((rc = check_string_array(cc, v, "required", NULL)))
            return rc;
        if (n)
            n->required = v;
    }
    if (rc)
        return rc;
    if ((v = keyword(cc, j, "properties", TY_OBJECT, "an object", &rc))) {
        if (n) {
            n->props_json = v;
            n->props = calloc(json_object_size(v) + 1, sizeof(*n->props));
            if (!n->props)
                return cc_oom(cc);
        }
        const char *key;
        json_t *e;
        json_object_foreach((json_t *)v, key, e)
        {
            node *child;
            if ((rc = compile_at(cc, e, "properties", key, &child)))
                return rc;
            if (n)
                n->props[n->nprops++] = (named_node){key, child};
        }
    }
    if (rc)
        return rc;
    if ((v = keyword(cc, j, "patternProperties", TY_OBJECT, "an object", &rc))) {
        if (n) {
            n->pprops = calloc(json_object_size(v) + 1, sizeof(*n->pprops));
            if (!n->pprops)
                return cc_oom(cc);
        }
        const char *key;
        json_t *e;
        json_object_foreach((json_t *)v, key, e)
        {
            node *child;
            if ((rc = compile_at(cc, e, "patternProperties", key, &child)))
                return rc;
            if (!n)
                continue;
            regex_node *r = &n->pprops[n->npprops];
            r->source = key;
            r->schema = child;
            size_t mark = cc->ptr.len;
            sb_put_segment(&cc->ptr, "patternProperties");
            rc = cc->ptr.oom ? cc_oom(cc) : regex_compile(cc, key, key, &r->re);
            sb_truncate(&cc->ptr, mark);
            if (rc)
                return rc;
            n->npprops++;
        }
    }
    if (rc)
        return rc;
    if ((v = keyword(cc, j, "dependencies", TY_OBJECT, "an object", &rc))) {
        if (n) {
            n->deps = calloc(json_object_size(v) + 1, sizeof(*n->deps));
            if (!n->deps)
                return cc_oom(cc);
        }
        const char *key;
        json_t *e;
        json_object_foreach((json_t *)v, key, e)
        {
            dependency d = {key, NULL, NULL};
            if (json_is_array(e)) {
                if ((rc = check_string_array(cc, e, "dependencies", key)))
                    return rc;
                d.required = e;
            } else if (json_is_object(e) || json_is_boolean(e)) {
                if ((rc = compile_at(cc, e, "dependencies", key, &d.schema)))
                    return rc;
            } else {
                size_t mark = cc->ptr.len;
                sb_put_segment(&cc->ptr, "dependencies");
                rc = kw_fail(cc, key, "expected a schema or an array of strings");
                sb_truncate(&cc->ptr, mark);
                return rc;
            }
            if (n)
                n->deps[n->ndeps++] = d;
        }
    }
    if (rc)
        return rc;
    if ((v = keyword(cc, j, "definitions", TY_OBJECT, "an object", &rc))) {
        /* Compiled for their checks and their $ids; reached through $ref. */
        const char *key;
        json_t *e;
        json_object_foreach((json_t *)v, key, e)
        {
            node *child;
            if ((rc = compile_at(cc, e, "definitions", key, &child)))
                return rc;
        }
    }
    if (rc)
        return rc;

    /* Combinators. */
    static const char *const combos[] = {"allOf", "anyOf", "oneOf"};
    for (size_t i = 0; i < 3; i++) {
        if (!(v = keyword(cc, j, combos[i], TY_ARRAY, "a non-empty array of schemas", &rc))) {
            if (rc)
                return rc;
            continue;
        }
        node ***list = !n ? NULL : i == 0 ? &n->all_of : i == 1 ? &n->any_of : &n->one_of;
        size_t *count = !n ? NULL : i == 0 ? &n->nall_of : i == 1 ? &n->nany_of : &n->none_of;
        if ((rc = compile_schema_array(cc, v, combos[i], list, count)))
            return rc;
    }
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A URI fragment percent-decodes to the JSON pointer ("#/a%25b" is
 * "/a%b"); a "%" not followed by two hex digits is kept as it is. */
static char *percent_decode(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0) {
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

/* The value a JSON pointer (RFC 6901) names inside root, or NULL. */
static const json_t *pointer_get(const json_t *root, const char *ptr, bool *oom)
{
    const json_t *cur = root;
    const char *p = ptr;
    sbuf tok = {0};
    if (*p && *p != '/')
        return NULL;
    while (cur && *p == '/') {
        p++;
        sb_truncate(&tok, 0);
        sb_puts(&tok, ""); /* tok.p is a string even for an empty token */
        while (*p && *p != '/') {
            char c = *p++;
            if (c == '~') {
                if (*p != '0' && *p != '1') {
                    cur = NULL;
                    break;
                }
                c = *p++ == '0' ? '~' : '/';
            }
            sb_putc(&tok, c);
        }
        if (tok.oom) {
            *oom = true;
            cur = NULL;
        } else if (!cur) {
            break;
        } else if (json_is_object(cur)) {
            cur = json_object_get(cur, tok.p);
        } else if (json_is_array(cur)) {
            /* An index: digits, no leading zero, within the array. */
            const char *t = tok.p;
            size_t idx = 0;
            bool ok = *t && (t[0] != '0' || t[1] == '\0');
            for (; ok && *t; t++) {
                if (*t < '0' || *t > '9' || idx > (SIZE_MAX - 9) / 10)
                    ok = false;
                else
                    idx = idx * 10 + (size_t)(*t - '0');
            }
            cur = ok ? json_array_get(cur, idx) : NULL;
        } else {
            cur = NULL;
        }
    }
    free(tok.p);
    return cur;
}

/* Point every $ref at its node. Targets no ordinary walk reached (a $ref
 * into an unknown keyword, say) are compiled here, which can queue more. */
static int resolve_refs(compiler *cc)
{
    te_schema *s = cc->s;
    for (size_t i = 0; i < cc->nrefs; i++) {
        pending_ref p = cc->refs[i]; /* a copy: compiling may move the array */
        char *hash = strchr(p.uri, '#');
        const char *frag = hash ? hash + 1 : "";
        char *abs = strndup(p.uri, hash ? (size_t)(hash - p.uri) : strlen(p.uri));
        char *decoded = percent_decode(frag);
        if (!abs || !decoded) {
            free(abs);
            free(decoded);
            return cc_oom(cc);
        }
        const json_t *target = NULL;
        const char *base = NULL;
        node *tn = NULL;
        bool oom = false;
        const id_entry *e = NULL;
        if (*frag && *frag != '/') {
            e = find_id(cc, p.uri); /* a plain-name fragment: an anchor */
            if (e)
                target = e->json;
        } else if ((e = find_id(cc, abs))) {
            target = pointer_get(e->json, decoded, &oom);
        } else if (strcmp(abs, META_SCHEMA_URI) == 0 && !*frag) {
            tn = &s->meta_node;
        }
        if (e)
            base = e->base;
        free(abs);
        int rc = 0;
        sb_truncate(&cc->ptr, 0);
        if (oom) {
            rc = cc_oom(cc);
        } else if (!tn && (!target || (!json_is_object(target) && !json_is_boolean(target)))) {
            sb_puts(&cc->ptr, p.where);
            char *msg = quoted_message("", p.text,
                                       target ? " does not point to a schema"
                                              : " does not resolve within the schema");
            rc = cc->ptr.oom || !msg ? cc_oom(cc) : cc_fail(cc, "%s", msg);
            free(msg);
        } else if (target) {
            /* Messages about a target compiled here name its pointer. */
            sb_puts(&cc->ptr, *frag == '/' ? decoded : "");
            cc->base = base;
            cc->depth = 0;
            rc = cc->ptr.oom ? cc_oom(cc) : compile(cc, target, &tn);
        }
        free(decoded);
        sb_truncate(&cc->ptr, 0);
        if (rc)
            return rc;
        p.n->ref = tn;
    }
    return 0;
}

static void compiler_free(compiler *cc)
{
    free(cc->ptr.p);
    for (size_t i = 0; i < cc->nids; i++)
        free(cc->ids[i].uri);
    free(cc->ids);
    for (size_t i = 0; i < cc->nrefs; i++) {
        free(cc->refs[i].uri);
        free(cc->refs[i].where);
    }
    free(cc->refs);
    free(cc->map);
    for (size_t i = 0; i < cc->nowned; i++)
        free(cc->owned[i]);
    free(cc->owned);
    pcre2_compile_context_free(cc->re_ctx);
}

int te_schema_compile(const json_t *schema, te_schema **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return -EINVAL;
    *out = NULL;
    compiler cc = {.err = err, .errlen = errlen, .base = ""};
    if (!schema)
        return cc_fail(&cc, "expected a schema (an object or a boolean)");
    te_schema *s = calloc(1, sizeof(*s));
    if (!s)
        return cc_oom(&cc);
    s->true_node.kind = NODE_TRUE;
    s->false_node.kind = NODE_FALSE;
    s->meta_node.kind = NODE_META;
    cc.s = s;
    int rc = 0;
    s->doc = json_deep_copy(schema);
    if (!s->doc)
        rc = cc_oom(&cc);
    /* The document itself, when it has no $id, is the resource "". */
    if (rc == 0)
        rc = add_id(&cc, "", s->doc, "");
    if (rc == 0)
        rc = compile(&cc, s->doc, &s->root);
    if (rc == 0)
        rc = resolve_refs(&cc);
    compiler_free(&cc);
    if (rc) {
        te_schema_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Validating.                                                              */

typedef struct vctx {
    sbuf path;      /* JSON pointer of the value being validated */
    int inst_depth; /* its nesting */
    int frames;     /* schema applications stacked */
    unsigned long steps;
    int quiet; /* > 0: inside anyOf/oneOf/not/...: no messages, stop early */
    size_t count;
    bool want_text;
    sbuf out;
    bool exhausted; /* MAX_STEPS reached */
    bool oom;
    pcre2_match_data *md;       /* made on first use, reused for every match */
    pcre2_match_context *mc;    /* its limits and step-counting callout */
    char *regex_why, *regex_at; /* a match stopped at a limit: why, and where */
} vctx;

static void violation(vctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(vctx *ctx, const char *fmt, ...)
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
static bool loud(const vctx *ctx)
{
    return !ctx->quiet && ctx->want_text && ctx->count < MAX_LISTED;
}

/* A violation whose text holds a JSON value or quoted string: built in a
 * scratch buffer first, only when it will be shown. */
static void violation_with(vctx *ctx, const char *prefix, const json_t *value, const char *str,
                           size_t len, const char *suffix)
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

static bool validate(vctx *ctx, const node *n, const json_t *inst);

/* The result of a failed check: in quiet mode stop at once. */
#define FAILED()                                                                                   \
    do {                                                                                           \
        if (ctx->quiet || ctx->oom || ctx->exhausted)                                              \
            return false;                                                                          \
        ok = false;                                                                                \
    } while (0)

/* Validate a member or element: one level deeper in the instance. */
static bool descend(vctx *ctx, const node *n, const json_t *child, const char *key, size_t index)
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
        ok = validate(ctx, n, child);
        ctx->inst_depth--;
    }
    sb_truncate(&ctx->path, mark);
    return ok;
}

/* Quietly: does inst satisfy n? */
static bool matches(vctx *ctx, const node *n, const json_t *inst)
{
    ctx->quiet++;
    bool ok = validate(ctx, n, inst);
    ctx->quiet--;
    return ok;
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

static pcre2_match_context *regex_context(unsigned long *steps)
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
static int regex_match(vctx *ctx, const pcre2_code *re, const char *source, const char *s,
                       size_t len)
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

static const char *plural(long long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
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

static bool validate_number(vctx *ctx, const node *n, const json_t *inst)
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
    if (n->multiple_of && !is_multiple(decimal_of(inst), n->multiple)) {
        bound_violation(ctx, "a multiple of", n->multiple_of, inst);
        FAILED();
    }
    return ok;
}

static bool validate_string(vctx *ctx, const node *n, const json_t *inst)
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

static bool validate_array(vctx *ctx, const node *n, const json_t *inst)
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
    if (n->contains) {
        bool found = false;
        for (size_t i = 0; i < size && !found; i++)
            found = matches(ctx, n->contains, json_array_get(inst, i));
        if (!found) {
            violation(ctx, "must contain an item that matches the schema in contains");
            FAILED();
        }
    }
    return ok;
}

/* Whether the instance property key is one of "properties". */
static bool declared(const node *n, const char *key)
{
    return n->props_json && json_object_get(n->props_json, key);
}

static bool validate_object(vctx *ctx, const node *n, const json_t *inst)
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
        if (d->schema && !validate(ctx, d->schema, inst))
            FAILED();
    }
    return ok;
}

static bool validate_combinators(vctx *ctx, const node *n, const json_t *inst)
{
    bool ok = true;
    for (size_t i = 0; i < n->nall_of; i++)
        if (!validate(ctx, n->all_of[i], inst))
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
        if (branch && !validate(ctx, branch, inst))
            FAILED();
    }
    return ok;
}

/* Meta-schema: the value must itself be a valid draft-07 schema. */
static bool validate_meta(vctx *ctx, const json_t *inst)
{
    char why[256];
    compiler cc = {.err = why, .errlen = sizeof(why), .base = ""};
    cc.depth = ctx->inst_depth;
    node *unused;
    int rc = compile(&cc, inst, &unused);
    compiler_free(&cc);
    if (rc == -ENOMEM)
        ctx->oom = true;
    if (rc)
        violation(ctx, "is not a valid JSON Schema: %s", why);
    return rc == 0;
}

static bool validate(vctx *ctx, const node *n, const json_t *inst)
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
        return validate_meta(ctx, inst);
    case NODE_SCHEMA:
        break;
    }
    if (ctx->frames >= MAX_FRAMES) {
        violation(ctx, "schema recursion too deep (a $ref that loops?)");
        return false;
    }
    ctx->frames++;
    bool ok = true;
    if (n->ref) {
        ok = validate(ctx, n->ref, inst);
        ctx->frames--;
        return ok;
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
        if (json_is_number(inst))
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
    ctx->frames--;
    return ok;
}

int te_schema_validate(const te_schema *s, const json_t *instance, char **errors)
{
    if (errors)
        *errors = NULL;
    if (!s || !instance)
        return -EINVAL;
    vctx ctx = {.want_text = errors != NULL};
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
