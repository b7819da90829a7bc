/* Replays the official JSON-Schema-Test-Suite (draft 7, and 2019-09 and
 * 2020-12 where the suite has them) against the validator: every .json
 * file of the draft's directory but refRemote.json (it needs a
 * web server) must pass in full; the optional/ tests (formats, bignums,
 * content) are run and reported but do not fail the test.
 *
 * Usage: test_schema_suite DRAFT7-DIR  (e.g. the Debian package's
 * /usr/share/json-schema-test-suite/tests/draft7)
 *
 * Besides the verdict, every case checks the contract of the error list: a
 * valid instance gets no message, an invalid one gets as many messages as
 * violations counted (up to the listing cap), each starting with "/". */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolexec.h"

typedef struct tally {
    int passed, total, refused;
} tally;

/* --refusals-allowed (the 2019-09 and 2020-12 runs): a schema the validator
 * refuses at load as unsupported ($recursiveRef, $dynamicRef, $vocabulary
 * and custom meta-schemas, PCRE2's unknown Unicode property names, $refs
 * to the suite's remote documents, which the validator never fetches) is
 * counted and listed, not failed: it is never validated wrongly. A wrong
 * verdict on a schema that compiled always fails. */
static int refusals_allowed;

static int refusal_ok(const char *err)
{
    return refusals_allowed &&
           (strstr(err, "not supported by this validator") || strstr(err, "unsupported $schema") ||
            strstr(err, "unknown property after \\P or \\p") ||
            strstr(err, "does not resolve within the schema"));
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether the message list agrees with the count: n entries joined by "; ". */
static int messages_consistent(int rc, const char *errors)
{
    if (rc == 0)
        return errors == NULL;
    if (!errors || errors[0] != '/')
        return 0;
    if (strstr(errors, "; ... and "))
        return 1; /* the list was capped; the count is what it was */
    int n = 1;
    for (const char *p = errors; (p = strstr(p, "; /")); p += 3)
        n++;
    /* A quoted value can itself contain "; /": never fewer than counted. */
    return n >= rc;
}

static void run_file(const char *path, const char *label, tally *t)
{
    /* te_json_loadb(): integers beyond 64 bits (optional/bignum.json) are
     * read as written, as the daemon reads them. */
    json_error_t jerr;
    json_t *groups = NULL;
    FILE *f = fopen(path, "rb");
    snprintf(jerr.text, sizeof(jerr.text), "%s", strerror(errno));
    if (f) {
        char *buf = NULL;
        size_t len = 0, cap = 0, got;
        do {
            if (len == cap && !(buf = realloc(buf, cap = cap ? cap * 2 : 65536)))
                abort();
            got = fread(buf + len, 1, cap - len, f);
            len += got;
        } while (got > 0);
        fclose(f);
        groups = te_json_loadb(buf, len, JSON_ALLOW_NUL, &jerr);
        free(buf);
    }
    if (!json_is_array(groups)) {
        printf("FAIL %s: cannot load: %s\n", label, jerr.text);
        t->total++;
        json_decref(groups);
        return;
    }
    size_t gi;
    json_t *group;
    json_array_foreach(groups, gi, group)
    {
        const char *gdesc = json_string_value(json_object_get(group, "description"));
        json_t *tests = json_object_get(group, "tests");
        te_schema *schema = NULL;
        char err[512];
        int crc = te_schema_compile(json_object_get(group, "schema"), &schema, err, sizeof(err));
        size_t ti;
        json_t *test;
        json_array_foreach(tests, ti, test)
        {
            const char *tdesc = json_string_value(json_object_get(test, "description"));
            int want_valid = json_is_true(json_object_get(test, "valid"));
            t->total++;
            if (crc != 0 && refusal_ok(err)) {
                printf("REFUSED %s: %s: %s: %s\n", label, gdesc, tdesc, err);
                t->refused++;
                continue;
            }
            if (crc != 0) {
                printf("FAIL %s: %s: %s: schema rejected: %s\n", label, gdesc, tdesc, err);
                continue;
            }
            char *errors = NULL;
            int rc = te_schema_validate(schema, json_object_get(test, "data"), &errors);
            if (rc < 0) {
                printf("FAIL %s: %s: %s: error %d\n", label, gdesc, tdesc, rc);
            } else if ((rc == 0) != want_valid) {
                printf("FAIL %s: %s: %s: expected %s, got %s%s%s\n", label, gdesc, tdesc,
                       want_valid ? "valid" : "invalid", rc == 0 ? "valid" : "invalid",
                       errors ? ": " : "", errors ? errors : "");
            } else if (!messages_consistent(rc, errors)) {
                printf("FAIL %s: %s: %s: %d violations but messages \"%s\"\n", label, gdesc, tdesc,
                       rc, errors ? errors : "(none)");
            } else {
                t->passed++;
            }
            free(errors);
        }
        te_schema_free(schema);
    }
    json_decref(groups);
}

/* Run every *.json in dir (sorted), recursing into subdirectories when
 * recurse is set; skip names listed in skip. */
static int run_dir(const char *dir, const char *prefix, int recurse, const char *skip, tally *t)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(names, cap * sizeof(*names));
            if (!p)
                abort();
            names = p;
        }
        names[n] = strdup(de->d_name);
        if (!names[n])
            abort();
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), name_cmp);
    for (size_t i = 0; i < n; i++) {
        char path[4096], label[512];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        snprintf(label, sizeof(label), "%s%s", prefix, names[i]);
        size_t len = strlen(names[i]);
        DIR *sub = opendir(path);
        if (sub) {
            closedir(sub);
            if (recurse) {
                char subprefix[520];
                snprintf(subprefix, sizeof(subprefix), "%s/", label);
                run_dir(path, subprefix, recurse, skip, t);
            }
        } else if (len > 5 && strcmp(names[i] + len - 5, ".json") == 0 &&
                   !(skip && strcmp(names[i], skip) == 0)) {
            run_file(path, label, t);
        }
        free(names[i]);
    }
    free(names);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--refusals-allowed") == 0) {
        refusals_allowed = 1;
        argv++;
        argc--;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s [--refusals-allowed] DRAFT-DIR\n", argv[0]);
        return 2;
    }
    tally required = {0, 0, 0}, optional = {0, 0, 0};
    DIR *top = opendir(argv[1]);
    if (!top) {
        /* 77: meson's "skipped" (the suite is a separate Debian package). */
        printf("skipped: %s: %s (install json-schema-test-suite)\n", argv[1], strerror(errno));
        return 77;
    }
    closedir(top);
    if (run_dir(argv[1], "", 0, "refRemote.json", &required) < 0 || required.total == 0) {
        fprintf(stderr, "no test files in %s\n", argv[1]);
        return 1;
    }
    char opt[4096];
    snprintf(opt, sizeof(opt), "%s/optional", argv[1]);
    DIR *d = opendir(opt);
    if (d) {
        closedir(d);
        printf("--- optional (reported, not required) ---\n");
        run_dir(opt, "optional/", 1, NULL, &optional);
        printf("optional: %d/%d cases passed, %d refused at load\n", optional.passed,
               optional.total, optional.refused);
    }
    printf("%d/%d cases passed, %d refused at load as unsupported\n", required.passed,
           required.total, required.refused);
    return required.passed + required.refused == required.total ? 0 : 1;
}
