/* Unit tests of tool definition parsing (registry.c), on definitions
 * written to a fresh directory: loading reads files, nothing else. */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "calldir.h"
#include "config.h"
#include "declare.h"
#include "registry.h"
#include "util.h"

static char dir[PATH_MAX];

/* Remove the tree at path (absolute): td_remove_tree_at() takes a directory
 * descriptor, the parent's, and the name in it. */
static int remove_path(const char *path)
{
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", path);
    char *slash = strrchr(parent, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    int fd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = td_remove_tree_at(fd, slash + 1);
    close(fd);
    return rc;
}

static int dir_setup(void **state)
{
    snprintf(dir, sizeof(dir), "%s/td-registry-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    return chmod(dir, 0755);
}

static int dir_teardown(void **state)
{
    return remove_path(dir);
}

static void put(const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, 0644), 0);
}

/* Load the directory expecting err to contain want (NULL: success). */
static struct td_registry *load(const char *want)
{
    struct td_registry *r = NULL;
    char err[512] = "";
    int rc = td_registry_load(dir, &r, err, sizeof(err));
    if (!want) {
        if (rc < 0)
            fail_msg("load failed: %s", err);
        return r;
    }
    assert_true(rc < 0);
    assert_null(r);
    if (!strstr(err, want))
        fail_msg("error \"%s\" does not contain \"%s\"", err, want);
    return NULL;
}

static void test_full_definition(void **state)
{
    put("echo.json",
        "{\"name\":\"echo\",\"description\":\"says it\",\"command\":[\"/bin/echo\","
        "\"hi\"],\"protocol\":\"plain\",\"timeout_ms\":2500,\"limits\":{\"cpu_ms\":"
        "100,\"memory_mb\":32},\"env\":{\"A\":\"1\"},\"allow_uids\":[0,1000],"
        "\"max_content_bytes\":4096,\"spill\":true,\"coerce\":true,\"network\":false,"
        "\"schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}}");
    put("manual.json", "{\"name\":\"manual\"}");
    put("README", "not a definition: not *.json");
    struct td_registry *r = load(NULL);
    assert_int_equal(r->n, 2);
    struct td_tool *t = td_registry_find(r, "echo");
    assert_non_null(t);
    assert_string_equal(t->description, "says it");
    assert_string_equal(t->argv[0], "/bin/echo");
    assert_string_equal(t->argv[1], "hi");
    assert_null(t->argv[2]);
    assert_int_equal(t->protocol, TD_PROTO_PLAIN);
    assert_int_equal(t->timeout_ms, 2500);
    assert_int_equal(t->limits.cpu_ms, 100);
    assert_int_equal(t->limits.memory_mb, 32);
    assert_int_equal(t->nenv, 1);
    assert_string_equal(t->env[0], "A=1");
    assert_int_equal(json_array_size(t->allow_uids), 2);
    assert_int_equal(t->max_content_bytes, 4096);
    assert_true(t->spill && t->coerce);
    assert_int_equal(t->network, 0);
    assert_non_null(t->validator);
    struct td_tool *m = td_registry_find(r, "manual");
    assert_non_null(m);
    assert_null(m->argv); /* manual mode */
    assert_int_equal(m->protocol, TD_PROTO_FRAMED);
    assert_int_equal(m->network, -1);
    assert_null(td_registry_find(r, "README"));
    assert_null(td_registry_find(r, "nope"));
    td_registry_free(r);
}

static void test_errors(void **state)
{
    static const struct {
        const char *text, *err;
    } cases[] = {
        {"{\"name\":\"x\",\"comand\":[\"/bin/true\"]}",
         "x.json: comand: unknown key (did you mean command?)"},
        {"{\"name\":\"x\",\"timeout\":5}",
         "x.json: timeout: unknown key (did you mean timeout_ms?)"},
        {"{\"name\":\"x\",\"Network\":false}",
         "x.json: Network: unknown key (did you mean network?)"},
        {"{\"name\":\"x\",\"deny_syscall\":[]}",
         "x.json: deny_syscall: unknown key (did you mean deny_syscalls?)"},
        {"{\"name\":\"x y\"}", "x.json: name: required, [A-Za-z0-9_.-]{1,64}"},
        {"{\"name\":\"x\",\"protocol\":\"raw\"}",
         "x.json: protocol: expected \"framed\" or \"plain\""},
        {"{\"name\":\"x\",\"command\":[]}",
         "x.json: command: expected a non-empty array of strings"},
        {"{\"name\":\"x\",\"timeout_ms\":0}", "x.json: timeout_ms: expected a positive integer"},
        {"{\"name\":\"x\",\"limits\":{\"stack\":1}}", "x.json: limits.stack: unknown limit"},
        {"{\"name\":\"x\",\"env\":{\"TOOLEXEC_X\":\"1\"}}",
         "x.json: env.TOOLEXEC_X: TOOLEXEC_* variables are set by the daemon"},
        {"{\"name\":\"x\",\"allow_uids\":[-1]}",
         "x.json: allow_uids[0]: expected a non-negative integer"},
        {"{\"name\":\"x\",\"schema\":{\"type\":7}}", "x.json: schema"},
        {"{\"name\":\"x\",", "x.json: line 1: "},
        /* where the token starts, not its last character */
        {"{\"name\": \"x\" \"command\": []}", "x.json: line 1 column 14: '}' expected"},
        {"{\n  \"name\": \"\u00e9\u00e9\" \"command\": []}",
         "x.json: line 2 column 16: '}' expected"},
        {"[1]", "x.json: expected a JSON object"},
        {"{\"name\":\"x\",\"scopes\":[]}", "x.json: scopes: expected a non-empty array"},
        {"{\"name\":\"x\",\"scopes\":[\"files:read\",\"a b\"]}",
         "x.json: scopes[1]: expected an OAuth scope"},
        {"{\"name\":\"x\",\"scopes\":\"files:read\"}", "x.json: scopes: expected a non-empty"},
        {"{\"name\":\"x\",\"mcp\":\"blocks\"}", "x.json: mcp: expected an object"},
        {"{\"name\":\"x\",\"mcp\":{\"content\":\"images\"}}",
         "x.json: mcp.content: expected \"value\" or \"blocks\""},
        {"{\"name\":\"x\",\"mcp\":{\"contents\":\"blocks\"}}", "x.json: mcp.contents: unknown key"},
        {"{\"name\":\"x\",\"mcp\":{\"task_support\":true}}",
         "x.json: mcp.task_support: expected \"forbidden\", \"optional\" or \"required\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        put("x.json", cases[i].text);
        load(cases[i].err);
    }
    char path[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/x.json", dir);
    assert_int_equal(unlink(path), 0);
}

/* The "did you mean" of an unknown key: close ones only, and only one. */
static void test_near_word(void **state)
{
    (void)state;
    static const char *const w[] = {"timeout_ms", "network", "command", "read", "user"};
    assert_string_equal(td_near_word("timeout", w, 5), "timeout_ms");
    assert_string_equal(td_near_word("netwrok", w, 5), "network");
    assert_string_equal(td_near_word("commands", w, 5), "command");
    assert_string_equal(td_near_word("USER", w, 5), "user");
    assert_null(td_near_word("colour", w, 5));
    assert_null(td_near_word("rea", w, 5)); /* too short to guess */
    assert_null(td_near_word("time", w, 5));
    static const char *const two[] = {"reads", "ready"};
    assert_null(td_near_word("readx", two, 2)); /* both are one edit away */
}

/* "scopes": declared to MCP in the tool's _meta, where the HTTP front
 * (daemon/cli/mcp_auth.h) reads it, and "mcp": {"content": "blocks"} too
 * (daemon/cli/mcp_content.c); absent (or "value"), no _meta. */
static void test_scopes_declared(void **state)
{
    (void)state;
    put("s.json", "{\"name\":\"s\",\"scopes\":[\"files:write\",\"admin\"],\"mcp\":{\"content\":"
                  "\"blocks\"}}");
    put("n.json", "{\"name\":\"n\",\"mcp\":{\"content\":\"value\"}}");
    put("t.json", "{\"name\":\"t\",\"mcp\":{\"task_support\":\"required\"}}");
    struct td_registry *r = load(NULL);
    json_t *d = td_declare_tool(td_registry_find(r, "s"), "mcp");
    json_t *sc = json_object_get(json_object_get(d, "_meta"), "toolexecd/scopes");
    assert_int_equal(json_array_size(sc), 2);
    assert_string_equal(json_string_value(json_array_get(sc, 0)), "files:write");
    /* "mcp": {"content": "blocks"} beside it, which toolexec mcp reads */
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(d, "_meta"), "toolexecd/content")),
        "blocks");
    assert_null(json_object_get(json_object_get(d, "_meta"), "toolexecd/taskSupport"));
    json_decref(d);
    d = td_declare_tool(td_registry_find(r, "s"), "openai");
    assert_null(json_object_get(d, "_meta")); /* MCP's alone */
    json_decref(d);
    d = td_declare_tool(td_registry_find(r, "n"), "mcp");
    assert_null(json_object_get(d, "_meta"));
    json_decref(d);
    d = td_declare_tool(td_registry_find(r, "t"), "mcp");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(d, "_meta"), "toolexecd/taskSupport")),
        "required");
    json_decref(d);
    td_registry_free(r);
    char path[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/s.json", dir);
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof(path), "%s/n.json", dir);
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof(path), "%s/t.json", dir);
    assert_int_equal(unlink(path), 0);
}

static void test_duplicate_name(void **state)
{
    put("a.json", "{\"name\":\"same\"}");
    put("b.json", "{\"name\":\"same\"}");
    load("name: \"same\" is already defined in");
    put("b.json", "{\"name\":\"other\"}");
    td_registry_free(load(NULL));
}

/* A definition others may write is refused alone; the rest still load. */
static void test_unsafe_file(void **state)
{
    put("c.json", "{\"name\":\"c\"}");
    char path[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/c.json", dir);
    assert_int_equal(chmod(path, 0666), 0);
    struct td_registry *r = load(NULL);
    assert_null(td_registry_find(r, "c"));
    assert_non_null(td_registry_find(r, "same"));
    td_registry_free(r);
}

/* A call without a tool (unknown_tool "error", custom calls) refs and
 * unrefs NULL: both are no-ops, as free(NULL) is. */
static void test_ref_null(void **state)
{
    (void)state;
    assert_null(td_tool_ref(NULL));
    td_tool_unref(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_null),        cmocka_unit_test(test_full_definition),
        cmocka_unit_test(test_errors),          cmocka_unit_test(test_near_word),
        cmocka_unit_test(test_duplicate_name),  cmocka_unit_test(test_unsafe_file),
        cmocka_unit_test(test_scopes_declared),
    };
    return cmocka_run_group_tests(tests, dir_setup, dir_teardown);
}
