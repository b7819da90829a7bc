/* Unit tests of the JSON Schema validator (lib/schema.c) beyond what the
 * official suite checks: the wording of messages and their JSON pointers,
 * invalid schemas, coercion, $ref resolution corners, and the limits that
 * keep hostile instances and looping schemas from exhausting stack or CPU. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "toolexec.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v)
        fprintf(stderr, "bad test JSON %s: %s\n", text, e.text);
    return v;
}

static te_schema *compile_text(const char *text)
{
    json_t *j = parse(text);
    te_schema *s = NULL;
    char err[256];
    int rc = te_schema_compile(j, &s, err, sizeof(err));
    if (rc)
        fprintf(stderr, "schema %s: %d %s\n", text, rc, err);
    json_decref(j);
    return s;
}

/* Validate instance text against schema text: the count, and the messages
 * in *msg (caller frees). */
static int check_text(const char *schema, const char *instance, char **msg)
{
    te_schema *s = compile_text(schema);
    json_t *inst = parse(instance);
    *msg = NULL;
    int rc = s && inst ? te_schema_validate(s, inst, msg) : -999;
    json_decref(inst);
    te_schema_free(s);
    return rc;
}

static void expect(const char *schema, const char *instance, int count, const char *messages)
{
    char *msg;
    int rc = check_text(schema, instance, &msg);
    if (rc != count || (messages && (!msg || strcmp(msg, messages) != 0)) || (!messages && msg))
        fprintf(stderr, "schema %s instance %s:\n  got %d \"%s\"\n  want %d \"%s\"\n", schema,
                instance, rc, msg ? msg : "(null)", count, messages ? messages : "(null)");
    CHECK(rc == count);
    if (messages)
        CHECK_STR(msg, messages);
    else
        CHECK(msg == NULL);
    free(msg);
}

static void messages(void)
{
    /* The example of the issue. */
    const char *tool = "{\"type\":\"object\",\"properties\":{\"count\":{\"type\":\"integer\"},"
                       "\"mode\":{\"enum\":[\"a\",\"b\"]}}}";
    expect(tool, "{\"count\":\"5\",\"mode\":\"c\"}", 2,
           "/count: expected integer, got string; /mode: must be one of [\"a\",\"b\"]");
    expect(tool, "{\"count\":5,\"mode\":\"a\"}", 0, NULL);
    expect(tool, "{\"count\":5.0}", 0, NULL); /* 5.0 is an integer */
    expect(tool, "{\"count\":5.5}", 1, "/count: expected integer, got number");

    /* The root is written "/". */
    expect("{\"required\":[\"x\",\"y\"]}", "{\"y\":1}", 1, "/: missing required property \"x\"");
    expect("{\"type\":[\"string\",\"null\"]}", "3", 1, "/: expected string or null, got integer");
    expect("{\"type\":[\"string\",\"array\",\"null\"]}", "{}", 1,
           "/: expected string, array or null, got object");
    expect("false", "1", 1, "/: not allowed (the schema is false)");
    expect("true", "1", 0, NULL);
    expect("{}", "[1]", 0, NULL);

    /* JSON pointers escape "~" and "/" (RFC 6901); array indexes. */
    expect(
        "{\"properties\":{\"a/b\":{\"type\":\"string\"},\"c~d\":{\"items\":{\"type\":\"null\"}}}}",
        "{\"a/b\":1,\"c~d\":[null,null,0]}", 2,
        "/a~1b: expected string, got integer; /c~0d/2: expected null, got integer");

    /* Lengths count code points: "é" is 2 bytes, "😀" 4. */
    expect("{\"minLength\":2}", "\"\xc3\xa9\"", 1, "/: must be at least 2 characters long, got 1");
    expect("{\"maxLength\":1}", "\"\xf0\x9f\x98\x80\"", 0, NULL);
    expect("{\"maxLength\":1}", "\"ab\"", 1, "/: must be at most 1 character long, got 2");
    expect("{\"pattern\":\"^[a-z]+$\"}", "\"abc1\"", 1, "/: must match the pattern \"^[a-z]+$\"");
    expect("{\"pattern\":\"^\\\\d+$\"}", "\"12\"", 0, NULL);
    expect("{\"pattern\":\"^a$\"}", "\"a\\n\"", 1,
           "/: must match the pattern \"^a$\"");                      /* ECMA $ */
    expect("{\"pattern\":\"^\\\\u00e9$\"}", "\"\xc3\xa9\"", 0, NULL); /* \uHHHH */
    expect("{\"pattern\":\"^[^]$\"}", "\"x\"", 0, NULL); /* ECMA's [^]: any character */

    /* Numbers: exact bounds, decimal multipleOf, shortest forms in messages. */
    expect("{\"minimum\":1.5}", "1", 1, "/: must be >= 1.5, got 1");
    expect("{\"exclusiveMaximum\":10}", "10.0", 1, "/: must be < 10, got 10");
    expect("{\"exclusiveMinimum\":0}", "0", 1, "/: must be > 0, got 0");
    expect("{\"maximum\":9007199254740992}", "9007199254740993", 1,
           "/: must be <= 9007199254740992, got 9007199254740993");
    expect("{\"multipleOf\":0.01}", "19.99", 0, NULL);
    expect("{\"multipleOf\":0.01}", "19.991", 1, "/: must be a multiple of 0.01, got 19.991");
    expect("{\"multipleOf\":3}", "-9", 0, NULL);
    expect("{\"multipleOf\":0.1}", "1e300", 0, NULL);
    expect("{\"multipleOf\":7}", "1e-5", 1, "/: must be a multiple of 7, got 1e-05");

    /* Equality is JSON equality: 1 == 1.0, objects regardless of order. */
    expect("{\"enum\":[1,\"x\"]}", "1.0", 0, NULL);
    expect("{\"const\":{\"a\":[1,2],\"b\":null}}", "{\"b\":null,\"a\":[1.0,2]}", 0, NULL);
    expect("{\"const\":{\"a\":1}}", "{\"a\":true}", 1, "/: must be equal to {\"a\":1}");
    expect("{\"uniqueItems\":true}", "[1,{\"a\":[1]},3,{\"a\":[1.0]}]", 1,
           "/: items must be unique, but items 1 and 3 are equal");
    expect("{\"uniqueItems\":true}", "[1,true,\"1\",[1],{\"1\":1},null,0,false]", 0, NULL);

    /* Arrays. */
    expect("{\"items\":[{\"type\":\"string\"}],\"additionalItems\":false}", "[\"a\",2,3]", 1,
           "/: must have at most 1 item, got 3 (no additional items allowed)");
    expect("{\"items\":[true],\"additionalItems\":{\"type\":\"integer\"}}", "[\"a\",2,\"c\"]", 1,
           "/2: expected integer, got string");
    expect("{\"minItems\":2,\"contains\":{\"const\":\"x\"}}", "[1]", 2,
           "/: must have at least 2 items, got 1; /: must contain an item that matches the schema "
           "in contains");
    expect("{\"maxItems\":1}", "[1,2]", 1, "/: must have at most 1 item, got 2");

    /* Objects. */
    expect("{\"properties\":{\"a\":true},\"patternProperties\":{\"^x-\":{\"type\":\"string\"}},"
           "\"additionalProperties\":false}",
           "{\"a\":1,\"x-y\":2,\"z\":3}", 2,
           "/x-y: expected string, got integer; /: property \"z\" is not allowed");
    expect("{\"additionalProperties\":{\"type\":\"boolean\"}}", "{\"q\":1}", 1,
           "/q: expected boolean, got integer");
    expect("{\"propertyNames\":{\"maxLength\":3}}", "{\"abcd\":1,\"ab\":2}", 1,
           "/: property name \"abcd\" does not match the schema in propertyNames");
    expect("{\"dependencies\":{\"a\":[\"b\"],\"c\":{\"required\":[\"d\"]}}}", "{\"a\":1,\"c\":2}",
           2,
           "/: property \"b\" is required when \"a\" is present; /: missing required property "
           "\"d\"");
    expect("{\"minProperties\":1}", "{}", 1, "/: must have at least 1 property, got 0");
    expect("{\"maxProperties\":1}", "{\"a\":1,\"b\":2}", 1,
           "/: must have at most 1 property, got 2");
    expect("{\"required\":[\"a\\\"b\"]}", "{}", 1, "/: missing required property \"a\\\"b\"");

    /* Combinators keep their messages short. */
    expect("{\"anyOf\":[{\"type\":\"string\"},{\"minimum\":3}]}", "2", 1,
           "/: does not match any of the 2 schemas in anyOf");
    expect("{\"properties\":{\"x\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}}}",
           "{\"x\":1}", 1, "/x: does not match any of the 2 schemas in anyOf");
    expect("{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "2", 1,
           "/: must match exactly one schema in oneOf, but matches #0 and #1");
    expect("{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "-2.5", 1,
           "/: does not match any of the 2 schemas in oneOf");
    expect("{\"not\":{\"type\":\"string\"}}", "\"s\"", 1, "/: must not match the schema in not");
    expect("{\"allOf\":[{\"minimum\":5},{\"multipleOf\":2}]}", "3", 2,
           "/: must be >= 5, got 3; /: must be a multiple of 2, got 3");
    expect("{\"if\":{\"properties\":{\"k\":{\"const\":\"n\"}}},\"then\":{\"required\":[\"num\"]},"
           "\"else\":{\"required\":[\"str\"]}}",
           "{\"k\":\"n\"}", 1, "/: missing required property \"num\"");
    expect("{\"if\":{\"properties\":{\"k\":{\"const\":\"n\"}}},\"then\":{\"required\":[\"num\"]},"
           "\"else\":{\"required\":[\"str\"]}}",
           "{\"k\":\"s\"}", 1, "/: missing required property \"str\"");

    /* A $ref ignores its siblings (draft-07). */
    expect("{\"definitions\":{\"s\":{\"type\":\"string\"}},\"properties\":{\"a\":{\"$ref\":"
           "\"#/definitions/s\",\"maxLength\":1}}}",
           "{\"a\":\"long\"}", 0, NULL);

    /* The meta-schema: "is this a valid schema?". */
    expect("{\"$ref\":\"http://json-schema.org/draft-07/schema#\"}",
           "{\"properties\":{\"a\":{\"minLength\":-1}}}", 1,
           "/: is not a valid JSON Schema: /properties/a/minLength: expected a non-negative "
           "integer");
    expect("{\"$ref\":\"http://json-schema.org/draft-07/schema#\"}", "{\"$ref\":\"#/nowhere\"}", 0,
           NULL);

    /* Without a message buffer the count is the same. */
    te_schema *s = compile_text("{\"items\":{\"type\":\"string\"}}");
    json_t *inst = parse("[1,2,\"x\",4]");
    CHECK(te_schema_validate(s, inst, NULL) == 3);
    CHECK(te_schema_validate(s, NULL, NULL) == -EINVAL);
    json_decref(inst);
    te_schema_free(s);
}

/* Violations past the listing cap are counted, not spelled out. */
static void many_violations(void)
{
    te_schema *s = compile_text("{\"items\":{\"type\":\"string\"}}");
    json_t *arr = json_array();
    for (int i = 0; i < 1000; i++)
        json_array_append_new(arr, json_integer(i));
    char *msg = NULL;
    CHECK(te_schema_validate(s, arr, &msg) == 1000);
    CHECK(msg && strstr(msg, "/0: expected string, got integer; /1: ") == msg);
    CHECK(msg && strstr(msg, "; ... and 950 more") != NULL);
    CHECK(msg && strlen(msg) < 4000);
    free(msg);
    json_decref(arr);
    te_schema_free(s);
}

static void invalid(const char *schema, const char *message)
{
    json_t *j = parse(schema);
    te_schema *s = (te_schema *)&s; /* must be reset to NULL */
    char err[256] = "";
    int rc = te_schema_compile(j, &s, err, sizeof(err));
    if (rc != -EINVAL || strcmp(err, message) != 0)
        fprintf(stderr, "schema %s: %d \"%s\", want \"%s\"\n", schema, rc, err, message);
    CHECK(rc == -EINVAL);
    CHECK(s == NULL);
    CHECK_STR(err, message);
    json_decref(j);
}

static void invalid_schemas(void)
{
    invalid("5", "/: expected a schema (an object or a boolean)");
    invalid("null", "/: expected a schema (an object or a boolean)");
    invalid("{\"properties\":{\"count\":{\"type\":5}}}",
            "/properties/count/type: expected a string or an array of strings");
    invalid("{\"type\":[]}", "/type: expected a string or an array of strings");
    invalid("{\"type\":\"int\"}", "/type: unknown type \"int\"");
    invalid("{\"type\":[\"string\",\"string\"]}", "/type: duplicate type \"string\"");
    invalid("{\"properties\":[]}", "/properties: expected an object");
    invalid("{\"properties\":{\"a\":1}}",
            "/properties/a: expected a schema (an object or a boolean)");
    invalid("{\"properties\":{\"a/b~\":{\"minimum\":\"1\"}}}",
            "/properties/a~1b~0/minimum: expected a number");
    invalid("{\"required\":\"a\"}", "/required: expected an array of strings");
    invalid("{\"required\":[\"a\",1]}", "/required: expected an array of strings");
    invalid("{\"required\":[\"a\",\"a\"]}", "/required: duplicate \"a\"");
    invalid("{\"minLength\":-1}", "/minLength: expected a non-negative integer");
    invalid("{\"maxItems\":1.5}", "/maxItems: expected a non-negative integer");
    invalid("{\"multipleOf\":0}", "/multipleOf: expected a number greater than 0");
    invalid("{\"exclusiveMinimum\":true}", "/exclusiveMinimum: expected a number");
    invalid("{\"enum\":{}}", "/enum: expected an array");
    invalid("{\"uniqueItems\":1}", "/uniqueItems: expected a boolean");
    invalid("{\"items\":[]}", "/items: expected a non-empty array of schemas");
    invalid("{\"items\":[{},3]}", "/items/1: expected a schema (an object or a boolean)");
    invalid("{\"anyOf\":[]}", "/anyOf: expected a non-empty array of schemas");
    invalid("{\"allOf\":{}}", "/allOf: expected a non-empty array of schemas");
    invalid("{\"not\":\"x\"}", "/not: expected a schema (an object or a boolean)");
    invalid("{\"dependencies\":{\"a\":1}}",
            "/dependencies/a: expected a schema or an array of strings");
    invalid("{\"dependencies\":{\"a\":[\"b\",2]}}",
            "/dependencies/a: expected an array of strings");
    invalid("{\"pattern\":\"(\"}",
            "/pattern: invalid regular expression at offset 1: missing closing parenthesis");
    invalid("{\"patternProperties\":{\"a[\":{}}}",
            "/patternProperties/a[: invalid regular expression at offset 2: missing terminating ] "
            "for character class");
    invalid("{\"title\":1}", "/title: expected a string");
    invalid("{\"$ref\":1}", "/$ref: expected a string");
    invalid("{\"properties\":{\"a\":{\"$ref\":\"#/definitions/nope\"}}}",
            "/properties/a/$ref: \"#/definitions/nope\" does not resolve within the schema");
    invalid("{\"$ref\":\"other.json\"}",
            "/$ref: \"other.json\" does not resolve within the schema");
    invalid("{\"$ref\":\"#/required\",\"required\":[\"a\"]}",
            "/$ref: \"#/required\" does not point to a schema");
    invalid("{\"definitions\":{\"x\":{\"type\":\"strin\"}}}",
            "/definitions/x/type: unknown type \"strin\"");
    /* A $ref target no ordinary walk reaches is still checked. */
    invalid("{\"$ref\":\"#/x\",\"x\":{\"minimum\":\"0\"}}", "/x/minimum: expected a number");

    char err[64];
    te_schema *s;
    CHECK(te_schema_compile(NULL, &s, err, sizeof(err)) == -EINVAL);
    CHECK(te_schema_compile(json_true(), NULL, err, sizeof(err)) == -EINVAL);
    /* A short or absent message buffer is fine. */
    json_t *j = parse("{\"type\":5}");
    CHECK(te_schema_compile(j, &s, err, 8) == -EINVAL && strlen(err) == 7);
    CHECK(te_schema_compile(j, &s, NULL, 0) == -EINVAL);
    json_decref(j);
}

static void refs(void)
{
    /* Pointers with ~0, ~1, percent-encoding and array indexes. */
    const char *sch =
        "{\"definitions\":{\"a~b\":{\"type\":\"integer\"},\"c/d\":{\"type\":\"string\"},"
        "\"e%f\":{\"type\":\"null\"}},\"x-list\":[{\"minimum\":10}],"
        "\"properties\":{\"p\":{\"$ref\":\"#/definitions/a~0b\"},"
        "\"q\":{\"$ref\":\"#/definitions/c~1d\"},\"r\":{\"$ref\":\"#/definitions/e%25f\"},"
        "\"s\":{\"$ref\":\"#/x-list/0\"}}}";
    expect(sch, "{\"p\":1,\"q\":\"x\",\"r\":null,\"s\":11}", 0, NULL);
    expect(sch, "{\"p\":\"1\",\"q\":1,\"r\":0,\"s\":1}", 4,
           "/p: expected integer, got string; /q: expected string, got integer; /r: expected null, "
           "got integer; /s: must be >= 10, got 1");

    /* $id: relative and absolute, plain-name anchors, nested bases. */
    const char *ids =
        "{\"$id\":\"http://example.com/root.json\",\"definitions\":{"
        "\"A\":{\"$id\":\"#foo\",\"type\":\"integer\"},"
        "\"B\":{\"$id\":\"other.json\",\"definitions\":{\"X\":{\"$id\":\"#bar\",\"type\":"
        "\"string\"},"
        "\"Y\":{\"type\":\"null\"}}},"
        "\"C\":{\"$id\":\"t/inner.json\",\"items\":{\"$ref\":\"../other.json#/definitions/Y\"}}},"
        "\"properties\":{\"a\":{\"$ref\":\"#foo\"},\"b\":{\"$ref\":\"other.json#bar\"},"
        "\"c\":{\"$ref\":\"http://example.com/other.json#/definitions/Y\"},"
        "\"d\":{\"$ref\":\"t/inner.json\"}}}";
    expect(ids, "{\"a\":1,\"b\":\"x\",\"c\":null,\"d\":[null]}", 0, NULL);
    expect(ids, "{\"a\":\"1\",\"b\":2,\"c\":3,\"d\":[4]}", 4,
           "/a: expected integer, got string; /b: expected string, got integer; /c: expected null, "
           "got integer; /d/0: expected null, got integer");

    /* A recursive tree. */
    const char *tree = "{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"number\"},"
                       "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}},"
                       "\"required\":[\"v\"]}";
    expect(tree, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]}]}", 0, NULL);
    expect(tree, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"w\":3}]}]}", 1,
           "/kids/0/kids/0: missing required property \"v\"");

    /* A $ref that loops without consuming the instance ends with a violation. */
    expect("{\"$ref\":\"#\"}", "1", 1, "/: schema recursion too deep (a $ref that loops?)");
    expect("{\"definitions\":{\"a\":{\"$ref\":\"#/definitions/b\"},\"b\":{\"allOf\":[{\"$ref\":"
           "\"#/definitions/a\"}]}},\"properties\":{\"x\":{\"$ref\":\"#/definitions/a\"}}}",
           "{\"x\":1}", 1, "/x: schema recursion too deep (a $ref that loops?)");
    expect("{\"anyOf\":[{\"$ref\":\"#\"}]}", "1", 1,
           "/: does not match any of the 1 schemas in anyOf");
}

/* Instances deeper than the parser allows (built by hand) are cut off at
 * TE_SCHEMA_MAX_DEPTH with a violation, and nothing recurses without bound. */
static void deep(void)
{
    json_t *root = json_array(), *cur = root;
    for (int i = 0; i < 20000; i++) {
        json_t *next = json_array();
        json_array_append_new(cur, next);
        cur = next;
    }
    te_schema *s = compile_text("{\"items\":{\"$ref\":\"#\"}}");
    char *msg = NULL;
    CHECK(te_schema_validate(s, root, &msg) == 1);
    CHECK(msg && strstr(msg, "nesting too deep") && strncmp(msg, "/0/0/0/", 7) == 0);
    free(msg);
    te_schema_free(s);

    /* Equality and hashing of deep values are bounded too. */
    static const char *const whole[] = {"{\"uniqueItems\":true}", "{\"enum\":[[]]}",
                                        "{\"const\":[[[1]]]}"};
    json_t *pair = json_pack("[O,O]", root, root);
    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
        s = compile_text(whole[i]);
        msg = NULL;
        CHECK(te_schema_validate(s, pair, &msg) >= 1);
        free(msg);
        te_schema_free(s);
    }
    /* Coercion stops descending too. */
    s = compile_text("{\"items\":{\"$ref\":\"#\"}}");
    CHECK(te_schema_coerce(s, root) == 0);
    te_schema_free(s);
    json_decref(pair);
    /* Free iteratively: jansson's json_decref recurses. */
    while (json_array_size(root)) {
        json_t *child = json_incref(json_array_get(root, 0));
        json_decref(root);
        root = child;
    }
    json_decref(root);
}

/* Exponential schemas hit the work budget instead of stalling. */
static void expensive(void)
{
    /* Each level tries the first branch in full, fails at "contains", then
     * the second: 2^depth evaluations. */
    te_schema *s = compile_text("{\"anyOf\":[{\"items\":{\"$ref\":\"#\"},\"contains\":false},{"
                                "\"items\":{\"$ref\":\"#\"}}]}");
    char text[200] = "";
    for (int i = 0; i < 60; i++)
        strcat(text, "[");
    for (int i = 0; i < 60; i++)
        strcat(text, "]");
    json_t *inst = parse(text);
    char *msg = NULL;
    clock_t t0 = clock();
    int rc = te_schema_validate(s, inst, &msg);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECK(rc >= 1);
    CHECK(msg && strstr(msg, "validation too expensive") != NULL);
    printf("work budget reached in %.2f s\n", secs);
    free(msg);
    json_decref(inst);
    te_schema_free(s);
}

/* Regular expressions run under limits and inside the work budget: a
 * catastrophic pattern is a clear error, never a stall, a
 * crash or a silent pass. */
#define SLUG "^([a-z0-9]+-?)*$" /* nested repeats: exponential on "aaa...!" */

static char *tags(int n, int len)
{
    char *t = malloc((size_t)n * (size_t)(len + 4) + 16);
    size_t k = 0;
    t[k++] = '[';
    for (int i = 0; i < n; i++) {
        k += (size_t)sprintf(t + k, "%s\"", i ? "," : "");
        memset(t + k, 'a', (size_t)len - 1);
        k += (size_t)len - 1;
        k += (size_t)sprintf(t + k, "!\"");
    }
    strcpy(t + k, "]");
    return t;
}

static void regex_limits(void)
{
    static const char why[] =
        "validation too expensive: matching the pattern \"" SLUG "\" stopped: match limit exceeded";
    /* one string past the per-match limit */
    expect("{\"pattern\":\"" SLUG "\"}", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\"", 1,
           "/: "
           "validation too expensive: matching the pattern \"" SLUG
           "\" stopped: match limit exceeded");
    /* under "not" a match that could not finish is no pass */
    expect("{\"not\":{\"pattern\":\"" SLUG "\"}}", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\"", 1,
           "/: "
           "validation too expensive: matching the pattern \"" SLUG
           "\" stopped: match limit exceeded");
    /* a property name */
    expect("{\"patternProperties\":{\"" SLUG "\":{}}}", "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\":1}", 1,
           "/: "
           "validation too expensive: matching the pattern \"" SLUG
           "\" stopped: match limit exceeded");

    /* 200 tags: the first that hits the limit ends the validation */
    const char *schema = "{\"properties\":{\"tags\":{\"items\":{\"pattern\":\"" SLUG "\"}}}}";
    char *arr = tags(200, 30);
    char *inst = malloc(strlen(arr) + 16);
    sprintf(inst, "{\"tags\":%s}", arr);
    char *msg = NULL;
    clock_t t0 = clock();
    CHECK(check_text(schema, inst, &msg) == 1);
    printf("200 catastrophic tags refused in %.3f s\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    CHECK(msg && strncmp(msg, "/tags/0: ", 9) == 0 && strcmp(msg + 9, why) == 0);
    if (msg && strncmp(msg, "/tags/0: ", 9) != 0)
        fprintf(stderr, "got %s\n", msg);
    free(msg);
    free(arr);
    free(inst);

    /* tags that each stay under the per-match limit (17 characters: 2^19
     * steps) still add up: the budget of the whole validation stops them */
    arr = tags(200, 18);
    inst = malloc(strlen(arr) + 16);
    sprintf(inst, "{\"tags\":%s}", arr);
    msg = NULL;
    t0 = clock();
    CHECK(check_text(schema, inst, &msg) >= 1); /* earlier tags did not match */
    printf("200 costly tags refused at the budget in %.3f s\n",
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    CHECK(msg && strncmp(msg, "/tags/", 6) == 0 &&
          strstr(msg, ": validation too expensive: matching the pattern \"" SLUG
                      "\" went past the validation's budget of 16777216 steps") != NULL);
    free(msg);
    free(arr);
    free(inst);

    /* coercion stops matching at the limit too, and converts nothing */
    te_schema *s = compile_text("{\"patternProperties\":{\"" SLUG "\":{\"type\":\"integer\"}}}");
    json_t *obj = json_pack("{s:s}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "1");
    CHECK(te_schema_coerce(s, obj) == 0);
    json_decref(obj);
    te_schema_free(s);

    /* ordinary work is not refused: a long string through a repeated
     * group, a pattern over many values */
    char *big = malloc(20000 + 3);
    big[0] = '"';
    memset(big + 1, 'a', 20000);
    strcpy(big + 20001, "\"");
    expect("{\"pattern\":\"^(\\\\w|-)*$\"}", big, 0, NULL);
    free(big);
    arr = tags(2000, 12);
    for (char *p = arr; *p; p++)
        if (*p == '!')
            *p = 'b';
    expect("{\"items\":{\"pattern\":\"" SLUG "\"}}", arr, 0, NULL);
    free(arr);
}

/* uniqueItems on long arrays is O(n log n). */
static void unique_long(void)
{
    te_schema *s = compile_text("{\"uniqueItems\":true}");
    json_t *arr = json_array();
    for (int i = 0; i < 200000; i++)
        json_array_append_new(arr, i % 2 ? json_integer(i) : json_real(i));
    clock_t t0 = clock();
    CHECK(te_schema_validate(s, arr, NULL) == 0);
    json_array_append_new(arr, json_real(4711.0));
    char *msg = NULL;
    CHECK(te_schema_validate(s, arr, &msg) == 1);
    CHECK_STR(msg, "/: items must be unique, but items 4711 and 200000 are equal");
    CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 5);
    free(msg);
    json_decref(arr);
    te_schema_free(s);
}

static void coerce_case(const char *schema, const char *in, int converted, const char *out)
{
    te_schema *s = compile_text(schema);
    json_t *inst = parse(in);
    int rc = s && inst ? te_schema_coerce(s, inst) : -999;
    char *got = inst ? json_dumps(inst, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (rc != converted || !got || strcmp(got, out) != 0)
        fprintf(stderr, "coerce %s with %s: %d %s, want %d %s\n", in, schema, rc,
                got ? got : "(null)", converted, out);
    CHECK(rc == converted);
    CHECK_STR(got, out);
    free(got);
    json_decref(inst);
    te_schema_free(s);
}

static void coercion(void)
{
    const char *tool = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},"
                       "\"x\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},"
                       "\"s\":{\"type\":\"string\"},\"any\":{}}}";
    coerce_case(tool, "{\"n\":\"42\",\"x\":\"4.5\",\"b\":\"true\",\"s\":\"7\",\"any\":\"8\"}", 3,
                "{\"n\":42,\"x\":4.5,\"b\":true,\"s\":\"7\",\"any\":\"8\"}");
    /* Only complete parses: JSON number syntax, nothing before or after. */
    coerce_case(tool, "{\"n\":\"42abc\",\"x\":\" 1\",\"b\":\"True\"}", 0,
                "{\"n\":\"42abc\",\"x\":\" 1\",\"b\":\"True\"}");
    coerce_case(tool, "{\"n\":\"+1\",\"x\":\"1.\",\"b\":\"1\"}", 0,
                "{\"n\":\"+1\",\"x\":\"1.\",\"b\":\"1\"}");
    coerce_case(tool, "{\"n\":\"0x10\",\"x\":\"nan\"}", 0, "{\"n\":\"0x10\",\"x\":\"nan\"}");
    coerce_case(tool, "{\"n\":\"4.5\",\"x\":\"-2\",\"b\":\"false\"}", 2,
                "{\"n\":\"4.5\",\"x\":-2,\"b\":false}");
    coerce_case(tool, "{\"n\":\"1e3\",\"x\":\"1e400\"}", 1, "{\"n\":1000,\"x\":\"1e400\"}");
    coerce_case(tool, "{\"n\":\"-0\",\"x\":\"2.50\"}", 2, "{\"n\":0,\"x\":2.5}");
    coerce_case(tool, "{\"n\":\"99999999999999999999\"}", 1, "{\"n\":1e20}");
    /* A value that may stay a string stays one. */
    coerce_case("{\"properties\":{\"v\":{\"type\":[\"integer\",\"string\"]}}}", "{\"v\":\"1\"}", 0,
                "{\"v\":\"1\"}");
    coerce_case("{\"properties\":{\"v\":{\"type\":[\"integer\",\"null\"]}}}", "{\"v\":\"1\"}", 1,
                "{\"v\":1}");
    /* Through items (both forms), additionalItems, additionalProperties,
     * patternProperties, allOf and $ref. */
    coerce_case("{\"properties\":{\"l\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}}}",
                "{\"l\":[\"1\",\"x\",2]}", 1, "{\"l\":[1,\"x\",2]}");
    coerce_case("{\"items\":[{\"type\":\"boolean\"}],\"additionalItems\":{\"type\":\"number\"}}",
                "[\"false\",\"3\"]", 2, "[false,3]");
    coerce_case("{\"additionalProperties\":{\"type\":\"integer\"},\"properties\":{\"k\":true}}",
                "{\"k\":\"1\",\"o\":\"2\"}", 1, "{\"k\":\"1\",\"o\":2}");
    coerce_case("{\"patternProperties\":{\"^n_\":{\"type\":\"integer\"}}}",
                "{\"n_a\":\"5\",\"m\":\"6\"}", 1, "{\"n_a\":5,\"m\":\"6\"}");
    coerce_case("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"number\"}}}]}", "{\"a\":\"0.5\"}",
                1, "{\"a\":0.5}");
    coerce_case("{\"definitions\":{\"num\":{\"type\":\"integer\"},"
                "\"node\":{\"properties\":{\"v\":{\"$ref\":\"#/definitions/num\"},"
                "\"next\":{\"$ref\":\"#/definitions/node\"}}}},\"$ref\":\"#/definitions/node\"}",
                "{\"v\":\"1\",\"next\":{\"v\":\"2\",\"next\":{\"v\":\"3\"}}}", 3,
                "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}");
    /* allOf intersects: integer and number make integer. */
    coerce_case("{\"properties\":{\"a\":{\"type\":\"number\",\"allOf\":[{\"type\":\"integer\"}]}}}",
                "{\"a\":\"2.5\"}", 0, "{\"a\":\"2.5\"}");
    /* The root itself is never replaced; loops end. */
    coerce_case("{\"type\":\"integer\"}", "\"1\"", 0, "\"1\"");
    coerce_case("{\"$ref\":\"#\"}", "{\"a\":\"1\"}", 0, "{\"a\":\"1\"}");

    /* Coerce then validate: "42abc" stays a string and fails. */
    te_schema *s = compile_text(tool);
    json_t *args = parse("{\"n\":\"42abc\",\"x\":\"1.5\"}");
    CHECK(te_schema_coerce(s, args) == 1);
    char *msg = NULL;
    CHECK(te_schema_validate(s, args, &msg) == 1);
    CHECK_STR(msg, "/n: expected integer, got string");
    free(msg);
    json_decref(args);
    te_schema_free(s);
}

/* A compiled schema does not depend on the caller's copy. */
static void independent(void)
{
    json_t *j = parse("{\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"^x\"}}}");
    te_schema *s = NULL;
    CHECK(te_schema_compile(j, &s, NULL, 0) == 0);
    json_decref(j);
    json_t *inst = parse("{\"a\":\"xy\"}");
    CHECK(te_schema_validate(s, inst, NULL) == 0);
    json_decref(inst);
    te_schema_free(s);
    te_schema_free(NULL);
}

int main(void)
{
    messages();
    many_violations();
    invalid_schemas();
    refs();
    deep();
    expensive();
    regex_limits();
    unique_long();
    coercion();
    independent();
    CHECK_DONE();
}
