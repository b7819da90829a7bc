/* "$schema" chooses the draft: 2019-09 and 2020-12 are
 * validated as such, draft-07 stays the default, and a $schema or keyword
 * that is not supported is refused at compile time, naming its pointer. */
#include <stdlib.h>

#include "check.h"
#include "toolexec.h"

#define D2020 "\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
#define D2019 "\"$schema\":\"https://json-schema.org/draft/2019-09/schema\","
#define D07 "\"$schema\":\"http://json-schema.org/draft-07/schema#\","

/* 1 valid, 0 invalid, -1 refused at compile (err then holds why) */
static int check(const char *schema_text, const char *inst_text, char *err, size_t errlen)
{
    json_t *sj = json_loads(schema_text, 0, NULL),
           *inst = json_loads(inst_text, JSON_DECODE_ANY, NULL);
    te_schema *s = NULL;
    int rc = -1;
    err[0] = '\0';
    if (!sj || !inst)
        fprintf(stderr, "  bad test JSON: %s / %s\n", schema_text, inst_text);
    else if (te_schema_compile(sj, &s, err, errlen) == 0)
        rc = te_schema_validate(s, inst, NULL) == 0;
    te_schema_free(s);
    json_decref(sj);
    json_decref(inst);
    return rc;
}

static int valid(const char *schema_text, const char *inst_text)
{
    char err[512];
    int rc = check(schema_text, inst_text, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "  refused: %s: %s\n", schema_text, err);
    return rc;
}

static void refused(const char *schema_text, const char *want)
{
    char err[512];
    int rc = check(schema_text, "{}", err, sizeof(err));
    CHECK(rc == -1);
    if (!strstr(err, want)) {
        fprintf(stderr, "  %s: got \"%s\", want \"%s\"\n", schema_text, err, want);
        check_failures++;
    }
}

static void arrays(void)
{
    /* the issue's example: prefixItems applies under 2020-12 */
    const char *pi = "{" D2020 "\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}";
    CHECK(valid(pi, "[\"a\",1]") == 1);
    CHECK(valid(pi, "[1,\"a\"]") == 0);
    const char *rest =
        "{" D2020 "\"prefixItems\":[{\"type\":\"string\"}],\"items\":{\"type\":\"integer\"}}";
    CHECK(valid(rest, "[\"a\",1,2]") == 1);
    CHECK(valid(rest, "[\"a\",1,\"b\"]") == 0);
    CHECK(valid("{" D2020 "\"items\":false,\"prefixItems\":[true]}", "[1,2]") == 0);
    refused("{" D2020 "\"items\":[{\"type\":\"string\"}]}", "/items: expected a schema");
    /* 2019-09 keeps the array form of items and additionalItems */
    const char *tuple = "{" D2019 "\"items\":[{\"type\":\"string\"}],\"additionalItems\":false}";
    CHECK(valid(tuple, "[\"a\"]") == 1);
    CHECK(valid(tuple, "[\"a\",1]") == 0);
    /* without $schema: draft-07, where prefixItems is no keyword */
    CHECK(valid("{\"prefixItems\":[{\"type\":\"string\"}]}", "[1]") == 1);
    /* minContains / maxContains */
    const char *mc = "{" D2019 "\"contains\":{\"const\":1},\"minContains\":2,\"maxContains\":3}";
    CHECK(valid(mc, "[1,2,1]") == 1);
    CHECK(valid(mc, "[1,2]") == 0);
    CHECK(valid(mc, "[1,1,1,1]") == 0);
    CHECK(valid("{" D2020 "\"contains\":{\"const\":1},\"minContains\":0}", "[]") == 1);
    CHECK(valid("{" D07 "\"contains\":{\"const\":1},\"minContains\":0}", "[]") == 0);
    /* unevaluatedItems sees through allOf and prefixItems */
    const char *ui = "{" D2020 "\"allOf\":[{\"prefixItems\":[true]}],\"unevaluatedItems\":false}";
    CHECK(valid(ui, "[1]") == 1);
    CHECK(valid(ui, "[1,2]") == 0);
}

static void objects(void)
{
    const char *dr = "{" D2020 "\"dependentRequired\":{\"card\":[\"address\"]}}";
    CHECK(valid(dr, "{\"card\":1,\"address\":2}") == 1);
    CHECK(valid(dr, "{\"card\":1}") == 0);
    const char *ds = "{" D2019 "\"dependentSchemas\":{\"card\":{\"required\":[\"cvv\"]}}}";
    CHECK(valid(ds, "{\"card\":1,\"cvv\":2}") == 1);
    CHECK(valid(ds, "{\"card\":1}") == 0);
    /* draft-07's dependencies is not a keyword of 2020-12 */
    CHECK(valid("{" D2020 "\"dependencies\":{\"a\":[\"b\"]}}", "{\"a\":1}") == 1);
    CHECK(valid("{\"dependencies\":{\"a\":[\"b\"]}}", "{\"a\":1}") == 0);
    /* unevaluatedProperties, through $ref, allOf, and if/then */
    const char *up = "{" D2020 "\"$defs\":{\"named\":{\"properties\":{\"name\":true}}},"
                     "\"$ref\":\"#/$defs/named\",\"allOf\":[{\"properties\":{\"age\":true}}],"
                     "\"if\":{\"required\":[\"kind\"]},\"then\":{\"properties\":{\"kind\":true}},"
                     "\"unevaluatedProperties\":false}";
    CHECK(valid(up, "{\"name\":1,\"age\":2,\"kind\":3}") == 1);
    CHECK(valid(up, "{\"name\":1,\"extra\":2}") == 0);
    /* 2019-09 on, $ref does not hide its siblings */
    const char *sib = "{" D2019 "\"$defs\":{\"s\":{\"type\":\"object\"}},\"$ref\":\"#/$defs/s\","
                      "\"required\":[\"a\"]}";
    CHECK(valid(sib, "{}") == 0);
    CHECK(valid("{\"definitions\":{\"s\":{\"type\":\"object\"}},\"$ref\":\"#/definitions/s\","
                "\"required\":[\"a\"]}",
                "{}") == 1);
    /* $anchor */
    const char *anc = "{" D2020 "\"$defs\":{\"n\":{\"$anchor\":\"num\",\"type\":\"number\"}},"
                      "\"properties\":{\"x\":{\"$ref\":\"#num\"}}}";
    CHECK(valid(anc, "{\"x\":1}") == 1);
    CHECK(valid(anc, "{\"x\":\"1\"}") == 0);
}

static void refusals(void)
{
    refused("{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"object\"}",
            "/$schema: unsupported $schema \"http://json-schema.org/draft-04/schema#\"");
    refused("{\"$schema\":\"https://example.com/my-meta\"}", "/$schema: unsupported $schema");
    refused("{\"$schema\":42}", "/$schema: expected a string");
    refused("{" D2020 "\"properties\":{\"a\":{\"$dynamicRef\":\"#node\"}}}",
            "/properties/a/$dynamicRef: not supported");
    refused("{" D2019 "\"items\":{\"$recursiveRef\":\"#\"}}",
            "/items/$recursiveRef: not supported");
    refused("{" D2020 "\"$vocabulary\":{}}", "/$vocabulary: not supported");
    refused("{" D2020 "\"$defs\":{\"a\":{" D07 "\"type\":\"string\"}}}",
            "/$defs/a/$schema: names another draft");
    refused("{" D2020 "\"$anchor\":\"1bad\"}", "/$anchor: expected a name");
    refused("{" D2020 "\"$id\":\"https://x.example/s#frag\"}", "/$id: expected no fragment");
    /* the drafts that are supported compile, with or without the "#" */
    CHECK(valid("{\"$schema\":\"http://json-schema.org/draft-07/schema\"}", "1") == 1);
    CHECK(valid("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema#\"}", "1") == 1);
    /* in draft-07 unknown keywords stay ignored, as the draft says */
    CHECK(valid("{\"$dynamicRef\":\"#x\",\"unevaluatedProperties\":false}", "{\"a\":1}") == 1);
}

int main(void)
{
    arrays();
    objects();
    refusals();
    CHECK_DONE();
}
