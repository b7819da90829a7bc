/*
 * schema_int.h - internals shared by the files of the JSON Schema validator
 * (libtoolexec's te_schema_* API, declared in toolexec.h). Not installed.
 *
 * JSON Schema validation of tool arguments: draft-07 by default, 2019-09 and
 * 2020-12 when "$schema" says so ($recursiveRef, $dynamicRef and $vocabulary
 * are refused at compile time rather than ignored).
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
 *
 * The files, each calling only files listed above it (the recursion goes
 * back up through the function pointers vctx.recurse and compiler.subcompile):
 *
 *   schema_text.c      message strings (sbuf), JSON pointer and quoting helpers
 *   schema_report.c    violations, and the descent into subschemas
 *   schema_ccerr.c     compile errors, and the $id table lookup
 *   schema_number.c    numbers: types, comparison, decimal multipleOf, keywords
 *   schema_equal.c     JSON equality (enum, const, uniqueItems) and its hash
 *   schema_uri.c       URI references (RFC 3986) for $id and $ref, and the
 *                      drafts a "$schema" URI names
 *   schema_string.c    string lengths in code points, "pattern" (PCRE2, limits)
 *   schema_ref.c       $ref resolution: fragments, JSON pointers, $id lookup
 *   schema_cckw.c      compiling's parts: the node map, the $id table, a
 *                      keyword's value checked, a subschema compiled at its
 *                      pointer (compile() through compiler.subcompile)
 *   schema_compile.c   compiling a schema into its node graph (keywords checked
 *                      against the meta-schema), and the meta-schema check
 *   schema_array.c     the array keywords
 *   schema_object.c    the object keywords
 *   schema_combine.c   allOf/anyOf/oneOf/not, if/then/else
 *   schema_uneval.c    unevaluatedProperties/Items (2019-09 on)
 *   schema_validate.c  the dispatch over keywords, te_schema_validate()
 *   schema_coerce.c    opt-in coercion of strings to the scalar types a schema
 *                      asks for
 */
#ifndef TE_SCHEMA_INT_H
#define TE_SCHEMA_INT_H

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

/* Everything declared here stays inside the library. */
#pragma GCC visibility push(hidden)

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
#define META_SCHEMA_2019 "https://json-schema.org/draft/2019-09/schema"
#define META_SCHEMA_2020 "https://json-schema.org/draft/2020-12/schema"

/* The drafts a "$schema" may name; draft-07 without one. */
enum draft {
    DRAFT_07 = 7,
    DRAFT_2019 = 2019,
    DRAFT_2020 = 2020,
};

/* ------------------------------------------------------------------------ */
/* Growable strings that remember an allocation failure instead of
 * reporting each one, so that message building stays linear.               */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

enum {
    TY_NULL = 1,
    TY_BOOLEAN = 2,
    TY_OBJECT = 4,
    TY_ARRAY = 8,
    TY_NUMBER = 16,
    TY_STRING = 32,
    TY_INTEGER = 64,
};

/* A number's absolute value as digits * 10^exp, from its shortest decimal
 * form: multipleOf is decided on the decimal value the JSON text wrote
 * (0.0075 is a multiple of 0.0001), which binary floating point cannot. */
typedef struct decimal {
    uint64_t digits;
    int exp;
} decimal;

typedef struct uri {
    const char *scheme, *auth, *path, *query, *frag;
    size_t scheme_n, auth_n, path_n, query_n, frag_n;
    bool has_scheme, has_auth, has_query, has_frag;
} uri;

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
    node *ref;      /* draft-07: a $ref replaces every other keyword */
    bool ref_too;   /* 2019-09 and later: $ref applies beside the others */
    int meta_draft; /* NODE_META: the draft it checks against */
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
    node **prefix_items; /* 2020-12 prefixItems (then "items" is the rest) */
    size_t nprefix_items;
    long long min_contains, max_contains; /* 2019-09 and later */
    bool contains_annotates;              /* 2020-12: its matches count as evaluated */
    node *uneval_props, *uneval_items;    /* unevaluated* (schema_uneval.c) */
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
    int draft;
    node **nodes; /* every NODE_SCHEMA node, for freeing */
    size_t nnodes, capnodes;
};

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

typedef struct compiler compiler;
struct compiler {
    /* compile() itself, set where the compiler is made (schema_compile.c): schema_ref.c compiles
     * the targets of $refs through it without naming schema_compile.c */
    int (*subcompile)(compiler *cc, const json_t *j, node **out);
    te_schema *s; /* NULL: check only */
    int draft;    /* enum draft */
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
};

typedef struct vctx vctx;
struct vctx {
    /* validate() itself, set by te_schema_validate() (schema_validate.c): the keyword files
     * recurse through it without naming schema_validate.c */
    bool (*recurse)(vctx *ctx, const node *n, const json_t *inst);
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
};

/* The result of a failed check: in quiet mode stop at once. */
#define FAILED()                                                                                   \
    do {                                                                                           \
        if (ctx->quiet || ctx->oom || ctx->exhausted)                                              \
            return false;                                                                          \
        ok = false;                                                                                \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Functions shared between the files, by file.                             */

/* schema_text.c */
void sb_putn(sbuf *b, const char *s, size_t n);
void sb_puts(sbuf *b, const char *s);
void sb_putc(sbuf *b, char c);
void sb_vprintf(sbuf *b, const char *fmt, va_list ap);
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_truncate(sbuf *b, size_t len);
void sb_put_clipped(sbuf *b, const char *s, size_t len, size_t max);
void sb_put_quoted(sbuf *b, const char *s, size_t len);
void sb_put_json(sbuf *b, const json_t *v);
void sb_put_segment(sbuf *b, const char *name);
void sb_put_index(sbuf *b, size_t i);

/* schema_number.c */
bool real_is_integral(double d);
unsigned types_of(const json_t *v);
const char *type_name_of(const json_t *v);
int num_cmp(const json_t *a, const json_t *b);
decimal decimal_of(const json_t *v);
bool validate_number(vctx *ctx, const node *n, const json_t *inst);

/* schema_equal.c */
int json_eq(const json_t *a, const json_t *b, int depth);
uint64_t mix64(uint64_t x);
int json_hash(const json_t *v, int depth, uint64_t *out);

/* schema_uri.c */
char *uri_resolve(const char *base, const char *ref);
int draft_of_uri(const char *text);

/* schema_ccerr.c */
int cc_fail(compiler *cc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *quoted_message(const char *prefix, const char *str, const char *suffix);
int cc_oom(compiler *cc);
int kw_fail(compiler *cc, const char *kw, const char *what);
const id_entry *find_id(const compiler *cc, const char *uri_text);

/* schema_cckw.c */
bool cc_grow(void **arr, size_t *cap, size_t n, size_t elem);
node *map_get(const compiler *cc, const json_t *key);
bool map_put(compiler *cc, const json_t *key, node *value);
int add_id(compiler *cc, const char *uri_text, const json_t *json, const char *base);
int compile_at(compiler *cc, const json_t *j, const char *seg, const char *seg2, node **out);
const json_t *cc_keyword(compiler *cc, const json_t *obj, const char *kw, unsigned mask,
                         const char *what, int *rc);
int count_keyword(compiler *cc, const json_t *obj, const char *kw, long long *out);
int check_string_array(compiler *cc, const json_t *arr, const char *kw, const char *kw2);
int compile_schema_array(compiler *cc, const json_t *arr, const char *kw, node ***out, size_t *n);
int compile_type(compiler *cc, const json_t *v, node *n);
int compile_id(compiler *cc, const json_t *j, const char *id);
int check_schema_keyword(compiler *cc, const json_t *v);
int check_unsupported(compiler *cc, const json_t *j);
int compile_anchor(compiler *cc, const json_t *j, const char *kw);

/* schema_compile.c */
int compile(compiler *cc, const json_t *j, node **out);
void compiler_free(compiler *cc);
bool validate_meta(vctx *ctx, const json_t *inst, int draft);

/* schema_ref.c */
int resolve_refs(compiler *cc);

/* schema_string.c */
int regex_compile(compiler *cc, const char *kw, const char *src, pcre2_code **out);
pcre2_match_context *regex_context(unsigned long *steps);
int regex_match(vctx *ctx, const pcre2_code *re, const char *source, const char *s, size_t len);
bool validate_string(vctx *ctx, const node *n, const json_t *inst);

/* schema_array.c */
bool validate_array(vctx *ctx, const node *n, const json_t *inst);

/* schema_object.c */
bool validate_object(vctx *ctx, const node *n, const json_t *inst);

/* schema_combine.c */
bool validate_combinators(vctx *ctx, const node *n, const json_t *inst);

/* schema_report.c */
void violation(vctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool loud(const vctx *ctx);
void violation_with(vctx *ctx, const char *prefix, const json_t *value, const char *str, size_t len,
                    const char *suffix);
bool descend(vctx *ctx, const node *n, const json_t *child, const char *key, size_t index);
bool matches(vctx *ctx, const node *n, const json_t *inst);
const char *plural(long long n, const char *one, const char *many);

/* schema_uneval.c */
bool validate_unevaluated(vctx *ctx, const node *n, const json_t *inst);

/* schema_validate.c */
bool validate(vctx *ctx, const node *n, const json_t *inst);

#pragma GCC visibility pop

#endif
