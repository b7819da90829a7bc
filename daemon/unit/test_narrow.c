/* Unit tests of narrowing by a run request's "policy" (narrow.c,
 * fsview_narrow.c): the pure parts. A path's lexical normalisation; a view
 * narrowed as strings, against views that need not exist (nothing is
 * looked up: the tests name paths that are not there, and root-only ones,
 * and get the same answers); a tool's limits, timeout and network narrowed
 * and never widened, each refusal naming its key. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "fsview.h"
#include "fsview_narrow.h"
#include "narrow.h"
#include "sandbox_spec.h"
#include "registry.h"
#include "tool.h"

/* ---- td_path_lexical ------------------------------------------------------ */

static void normal(const char *in, const char *want)
{
    char out[PATH_MAX];
    const char *why = td_path_lexical(in, out, sizeof(out));
    if (why)
        fail_msg("\"%s\": %s, want \"%s\"", in, why, want);
    if (strcmp(out, want) != 0)
        fail_msg("\"%s\": got \"%s\", want \"%s\"", in, out, want);
}

static void test_lexical(void **state)
{
    (void)state;
    normal("/", "/");
    normal("//", "/");
    normal("/usr", "/usr");
    normal("/usr/", "/usr");
    normal("//usr///lib//", "/usr/lib");
    normal("/usr/./lib/.", "/usr/lib");
    normal("/usr/lib/../share", "/usr/share");
    normal("/usr/lib/..", "/usr");
    normal("/usr/..", "/");
    normal("/..", "/");
    normal("/../../etc", "/etc");
    normal("/a/b/c/../../d", "/a/d");
    normal("/work/w/../../root/secret", "/root/secret");
    /* names that only look like the special ones */
    normal("/a/..b/.c/...", "/a/..b/.c/...");
    normal("/a/b../c.", "/a/b../c.");
}

static void test_lexical_refused(void **state)
{
    (void)state;
    char out[PATH_MAX], small[5];
    assert_string_equal(td_path_lexical("usr", out, sizeof(out)), "not an absolute path");
    assert_string_equal(td_path_lexical("", out, sizeof(out)), "not an absolute path");
    assert_string_equal(td_path_lexical("./usr", out, sizeof(out)), "not an absolute path");
    /* the buffer: "/abc" and its end fit in 5, "/abcd" does not */
    assert_null(td_path_lexical("/abc", small, sizeof(small)));
    assert_string_equal(small, "/abc");
    assert_string_equal(td_path_lexical("/abcd", small, sizeof(small)), "too long");
    /* on the way too (as the kernel would, ENAMETOOLONG) */
    assert_string_equal(td_path_lexical("/abcdefgh/..", small, sizeof(small)), "too long");
    char *big = malloc(2 * PATH_MAX);
    assert_non_null(big);
    for (size_t i = 0; i < 2 * PATH_MAX - 1; i++)
        big[i] = i % 8 ? 'x' : '/';
    big[2 * PATH_MAX - 1] = '\0';
    assert_string_equal(td_path_lexical(big, out, sizeof(out)), "too long");
    /* long, but mostly "/./": fine */
    for (size_t i = 0; i < 2 * PATH_MAX - 1; i++)
        big[i] = i % 2 ? '.' : '/';
    assert_null(td_path_lexical(big, out, sizeof(out)));
    assert_string_equal(out, "/");
    free(big);
}

/* ---- td_fsview_narrow ------------------------------------------------------ */

static struct td_fsview *view(const char *text)
{
    json_error_t jerr;
    json_t *v = strcmp(text, "null") == 0 ? NULL : json_loads(text, JSON_DECODE_ANY, &jerr);
    assert_true(v || strcmp(text, "null") == 0);
    struct td_fsview *f = NULL;
    char err[512] = "";
    if (td_fsview_parse_lexical("t.json", v, &f, err, sizeof(err)) < 0)
        fail_msg("%s: %s", text, err);
    json_decref(v);
    return f;
}

/* The tool "t"'s view narrowed by the policy's "filesystem" (text): NULL
 * with its refusal in err. */
static struct td_fsview *narrow(const struct td_fsview *v, const char *text, char *err, size_t len)
{
    json_error_t jerr;
    json_t *pol = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!pol)
        fail_msg("%s: %s", text, jerr.text);
    struct td_fsview *out = NULL;
    int rc = td_fsview_narrow(v, "t", "/srv/tools", pol, "policy", &out, err, len);
    json_decref(pol);
    assert_true(rc == 0 ? out != NULL : out == NULL);
    return out;
}

static void refused(const struct td_fsview *v, const char *text, const char *want)
{
    char err[512] = "";
    struct td_fsview *out = narrow(v, text, err, sizeof(err));
    if (out) {
        td_fsview_free(out);
        fail_msg("%s: accepted, want \"%s\"", text, want);
    }
    if (!strstr(err, want))
        fail_msg("%s: got \"%s\", want \"%s\"", text, err, want);
}

static void strv_is(char **got, const char *const *want)
{
    size_t n = 0;
    for (; got && got[n]; n++)
        if (!want[n] || strcmp(got[n], want[n]) != 0)
            fail_msg("entry %zu: got \"%s\", want \"%s\"", n, got[n], want[n] ? want[n] : "(end)");
    if (want[n])
        fail_msg("entry %zu: got the end, want \"%s\"", n, want[n]);
}

static int cfg_setup(void **state)
{
    (void)state;
    td_cfg.work_dir = "/var/spool/td-work";
    td_cfg.socket_path = "/run/td.sock";
    td_cfg.events_socket_path = NULL;
    td_fs_default = TD_FS_VIEW;
    return 0;
}

#define VIEW "{\"write\": [\"/w\", \"/srv\"], \"read\": [\"/w/ro\"], \"hide\": [\"/w/secret\"]}"

static void test_write_narrowed(void **state)
{
    (void)state;
    struct td_fsview *v = view(VIEW);
    char err[512] = "";
    struct td_fsview *n = narrow(v, "{\"write\": [\"/w//sub/./x/..\"]}", err, sizeof(err));
    if (!n)
        fail_msg("%s", err);
    strv_is(n->write, (const char *const[]){"/w/sub", NULL});
    /* the tool's read paths, and its writable ones no longer writable */
    strv_is(n->read, (const char *const[]){"/w/ro", "/w", "/srv", NULL});
    strv_is(n->hide, (const char *const[]){"/w/secret", NULL});
    assert_false(n->minimal);
    td_fsview_free(n);
    /* none at all */
    n = narrow(v, "{\"write\": []}", err, sizeof(err));
    assert_non_null(n);
    strv_is(n->write, (const char *const[]){NULL});
    td_fsview_free(n);
    td_fsview_free(v);
}

static void test_write_widening_refused(void **state)
{
    (void)state;
    struct td_fsview *v = view(VIEW);
    refused(v, "{\"write\": [\"/etc\"]}",
            "policy.filesystem.write[0]: \"/etc\" is not writable by tool t");
    /* below a writable path, but read-only or hidden there */
    refused(v, "{\"write\": [\"/w/ro\"]}", "\"/w/ro\" is not writable");
    refused(v, "{\"write\": [\"/w/ro/deeper\"]}", "is not writable");
    refused(v, "{\"write\": [\"/w/secret\"]}", "is not writable");
    /* ".." is string work: the client's text echoed, never a resolved one */
    refused(v, "{\"write\": [\"/w/sub\", \"/w/../etc\"]}",
            "policy.filesystem.write[1]: \"/w/../etc\" is not writable by tool t");
    refused(v, "{\"write\": [\"/w/../w/ro\"]}", "\"/w/../w/ro\" is not writable");
    /* what every view hides: the tools directory, the work directory, the
     * daemon's socket, the defaults, a call's own /tmp */
    refused(v, "{\"write\": [\"/srv/tools/x\"]}", "is not writable");
    refused(v, "{\"write\": [\"/srv/tools\"]}", "is not writable");
    refused(v, "{\"write\": [\"/var/spool/td-work\"]}", "is not writable");
    refused(v, "{\"write\": [\"/run/td.sock\"]}", "is not writable");
    refused(v, "{\"write\": [\"/root/secret\"]}", "is not writable");
    refused(v, "{\"write\": [\"/tmp/x\"]}", "is not writable");
    /* the tools directory beside it: a name that merely starts alike is not in it */
    char err[512];
    struct td_fsview *n = narrow(v, "{\"write\": [\"/srv/toolsmith\"]}", err, sizeof(err));
    assert_non_null(n);
    td_fsview_free(n);
    td_fsview_free(v);
}

static void test_same_answer_whatever_exists(void **state)
{
    (void)state;
    /* /root/.bashrc-like names, there or not, readable by the daemon or
     * not: the answer is the view's alone */
    struct td_fsview *v = view(VIEW);
    const char *const names[] = {"/root", "/root/secret", "/root/no-such-file-td", "/etc/shadow",
                                 "/etc/shadow/td-none"};
    for (int key = 0; key < 2; key++)
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            char text[256], want[256];
            snprintf(text, sizeof(text), "{\"%s\": [\"%s\"]}", key ? "hide" : "write", names[i]);
            snprintf(want, sizeof(want), "policy.filesystem.%s[0]: \"%s\" is not %s by tool t",
                     key ? "hide" : "write", names[i], key ? "seen" : "writable");
            char err[512] = "";
            struct td_fsview *n = narrow(v, text, err, sizeof(err));
            if (n)
                fail_msg("%s: accepted", text);
            assert_string_equal(err, want);
        }
    td_fsview_free(v);
}

static void test_hide_added(void **state)
{
    (void)state;
    struct td_fsview *v = view(VIEW);
    char err[512] = "";
    /* anything the tool sees: its own paths, the host's read-only */
    struct td_fsview *n =
        narrow(v, "{\"hide\": [\"/w/sub\", \"/usr/share/doc/\", \"/no/such\"]}", err, sizeof(err));
    if (!n)
        fail_msg("%s", err);
    strv_is(n->hide,
            (const char *const[]){"/w/secret", "/w/sub", "/usr/share/doc", "/no/such", NULL});
    strv_is(n->write, (const char *const[]){"/w", "/srv", NULL});
    td_fsview_free(n);
    refused(v, "{\"hide\": [\"/w/secret/x\"]}", "\"/w/secret/x\" is not seen by tool t");
    refused(v, "{\"hide\": [\"/\"]}", "policy.filesystem.hide[0]: \"/\": the whole root");
    refused(v, "{\"hide\": [\"/usr/..\"]}", "\"/usr/..\": the whole root");
    td_fsview_free(v);
}

static void test_read_narrowed(void **state)
{
    (void)state;
    struct td_fsview *v = view(VIEW);
    refused(v, "{\"read\": [\"/w\"]}", "not a minimal root");
    td_fsview_free(v);
    v = view("{\"root\": \"minimal\", \"read\": [\"/opt/a\", \"/w/ro\"], \"write\": [\"/w\"]}");
    char err[512] = "";
    struct td_fsview *n = narrow(v, "{\"read\": [\"/opt/a/b/\"]}", err, sizeof(err));
    if (!n)
        fail_msg("%s", err);
    assert_true(n->minimal);
    /* what the tool kept read-only below a path still writable stays so */
    strv_is(n->read, (const char *const[]){"/opt/a/b", "/w/ro", NULL});
    strv_is(n->write, (const char *const[]){"/w", NULL});
    td_fsview_free(n);
    refused(v, "{\"read\": [\"/opt/b\"]}", "policy.filesystem.read[0]: \"/opt/b\" is not readable");
    refused(v, "{\"read\": [\"/opt/a/../b\"]}", "\"/opt/a/../b\" is not readable");
    /* the daemon's default: the minimal root too */
    td_fsview_free(v);
    td_fs_default = TD_FS_MINIMAL;
    v = view("null");
    refused(v, "{\"read\": [\"/usr\"]}", "is not readable");
    td_fsview_free(v);
    td_fs_default = TD_FS_VIEW;
}

static void test_shape_refused(void **state)
{
    (void)state;
    struct td_fsview *v = view(VIEW);
    refused(v, "[]", "policy.filesystem: expected an object (read, write, hide)");
    refused(v, "{\"root\": \"host\"}", "policy.filesystem.root: not a key a policy narrows");
    refused(v, "{\"write\": \"/w\"}", "policy.filesystem.write: expected an array of paths");
    refused(v, "{\"hide\": [1]}", "policy.filesystem.hide[0]: expected a path");
    refused(v, "{\"write\": [\"/w/a\\u0000b\"]}", "policy.filesystem.write[0]: expected a path");
    refused(v, "{\"write\": [\"w/a\"]}", "\"w/a\": not an absolute path");
    refused(v, "{\"write\": [\"\"]}", "\"\": not an absolute path");
    /* more read and write paths than a view takes */
    char text[2048] = "{\"write\": [";
    for (int i = 0; i < 40; i++)
        snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s\"/w/%d\"", i ? "," : "", i);
    strcat(text, "]}");
    refused(v, text, "at most 32 read and write paths");
    td_fsview_free(v);
    struct td_fsview *host = view("\"host\"");
    refused(host, "{\"write\": []}", "tool t sees the host's file system");
    td_fsview_free(host);
}

static void test_proxy_ca_kept(void **state)
{
    (void)state;
    struct td_fsview *v = view(VIEW);
    v->proxy_ca = true;
    char err[512] = "";
    struct td_fsview *n = narrow(v, "{\"hide\": [\"/w/x\"]}", err, sizeof(err));
    assert_non_null(n);
    assert_true(n->proxy_ca);
    td_fsview_free(n);
    td_fsview_free(v);
}

/* A narrowed view's plan looks its paths up no more than the narrowing
 * did: what each is (a file, a directory, nothing, a link) the child sees
 * when it makes the view. */
static void test_plan_looks_nothing_up(void **state)
{
    (void)state;
    struct td_fsview *v = view("{\"write\": [\"/srv/data\"]}");
    char err[512] = "";
    /* a file, a directory and nothing, all the same to the plan; /srv over
     * a writable path below it: a veil, with the way down made as what
     * /srv/data is */
    struct td_fsview *n =
        narrow(v, "{\"hide\": [\"/etc/passwd\", \"/usr/share\", \"/no/such/td\", \"/srv\"]}", err,
               sizeof(err));
    if (!n)
        fail_msg("%s", err);
    const struct td_fsplan *plan;
    const char *const *ll;
    assert_int_equal(td_fsview_plan(n, NULL, NULL, true, &plan, &ll), 0);
    assert_non_null(plan);
    int covers = 0, chains = 0;
    for (size_t i = 0; i < plan->n; i++) {
        const struct td_fs_op *op = &plan->ops[i];
        const char *path = op->path ? op->path : "";
        bool named = strcmp(path, "/etc/passwd") == 0 || strcmp(path, "/usr/share") == 0 ||
                     strcmp(path, "/no/such/td") == 0;
        if (named) {
            assert_int_equal(op->kind, TD_FS_COVER);
            assert_true(op->optional);
            covers++;
        }
        if (strcmp(path, "/srv") == 0)
            assert_int_equal(op->kind, TD_FS_TMPFS); /* the veil */
        if (op->kind == TD_FS_CHAIN && strcmp(path, "/srv/data") == 0) {
            assert_int_equal(op->mode, 2);
            assert_true(op->slot > TD_FS_SLOT_HFILE);
            chains++;
        }
    }
    assert_int_equal(covers, 3);
    assert_int_equal(chains, 1);
    td_fsview_free(n);
    td_fsview_free(v);
}

/* ---- td_narrow_tool ---------------------------------------------------------- */

static struct td_tool *tool(const char *text)
{
    json_error_t jerr;
    json_t *def = json_loads(text, 0, &jerr);
    if (!def)
        fail_msg("%s: %s", text, jerr.text);
    struct td_tool *t = NULL;
    char err[512] = "";
    if (td_registry_parse_def("/etc/td-tools", "/etc/td-tools/t.json", def, &t, err, sizeof(err)) <
        0)
        fail_msg("%s", err);
    json_decref(def);
    return t;
}

#define TOOL                                                                                       \
    "{\"name\": \"t\", \"description\": \"d\", \"schema\": {\"type\": \"object\"}, "               \
    "\"command\": [\"/bin/true\"], \"timeout_ms\": 5000, \"limits\": {\"memory_mb\": 256, "        \
    "\"processes\": 16}, \"network\": {\"allow\": [\"a.example:443\", \"b.example:443\"]}}"

static struct td_tool *narrowed(struct td_tool *t, const char *pol_text, uint64_t *timeout,
                                char *err, size_t len)
{
    json_error_t jerr;
    json_t *pol = json_loads(pol_text, JSON_DECODE_ANY, &jerr);
    if (!pol)
        fail_msg("%s: %s", pol_text, jerr.text);
    struct td_tool *out = NULL;
    int rc = td_narrow_tool(t, pol, "calls[0].policy", &out, timeout, err, len);
    json_decref(pol);
    assert_true(rc == 0 ? out != NULL : out == NULL);
    return out;
}

static void tool_refused(struct td_tool *t, const char *pol, const char *want)
{
    char err[512] = "";
    uint64_t ms = 0;
    struct td_tool *out = narrowed(t, pol, &ms, err, sizeof(err));
    if (out) {
        td_tool_unref(out);
        fail_msg("%s: accepted, want \"%s\"", pol, want);
    }
    if (!strstr(err, want))
        fail_msg("%s: got \"%s\", want \"%s\"", pol, err, want);
}

static void test_tool_narrowed(void **state)
{
    (void)state;
    struct td_tool *t = tool(TOOL);
    char err[512] = "";
    uint64_t ms = 0;
    /* nothing, or only the timeout: the tool itself */
    struct td_tool *n = narrowed(t, "null", &ms, err, sizeof(err));
    assert_ptr_equal(n, t);
    td_tool_unref(n);
    n = narrowed(t, "{\"timeout_ms\": 100}", &ms, err, sizeof(err));
    assert_ptr_equal(n, t);
    assert_int_equal(ms, 100);
    td_tool_unref(n);
    ms = 0;
    n = narrowed(t, "{}", &ms, err, sizeof(err));
    assert_ptr_equal(n, t);
    assert_int_equal(ms, 5000); /* the tool's, as the ceiling */
    td_tool_unref(n);
    /* a tool of its own */
    n = narrowed(t,
                 "{\"memory_mb\": 128, \"limits\": {\"processes\": 4}, "
                 "\"network\": {\"allow\": [\"b.example:443\"]}}",
                 &ms, err, sizeof(err));
    if (!n)
        fail_msg("%s", err);
    assert_ptr_not_equal(n, t);
    assert_ptr_equal(n->parent, t);
    assert_int_equal(n->limits.memory_mb, 128);
    assert_int_equal(n->limits.processes, 4);
    assert_false(n->warm);
    assert_int_equal(t->limits.memory_mb, 256); /* the tool's own untouched */
    td_tool_unref(n);
    n = narrowed(t, "{\"network\": false}", &ms, err, sizeof(err));
    assert_non_null(n);
    assert_null(n->egress);
    assert_int_equal(n->network, 0);
    assert_non_null(t->egress);
    td_tool_unref(n);
    td_tool_unref(t);
}

static void test_tool_widening_refused(void **state)
{
    (void)state;
    struct td_tool *t = tool(TOOL);
    tool_refused(t, "[]", "calls[0].policy: expected an object");
    tool_refused(t, "{\"user\": \"root\"}", "calls[0].policy.user: not a key a policy narrows");
    tool_refused(t, "{\"timeout_ms\": 5001}", "calls[0].policy.timeout_ms: 5001 is above tool t's");
    tool_refused(t, "{\"timeout_ms\": 0}", "timeout_ms: expected a positive integer");
    tool_refused(t, "{\"timeout_ms\": \"1\"}", "timeout_ms: expected a positive integer");
    tool_refused(t, "{\"memory_mb\": 257}", "calls[0].policy.memory_mb: 257 is above tool t's 256");
    tool_refused(t, "{\"limits\": {\"processes\": 17}}", "limits.processes: 17 is above");
    tool_refused(t, "{\"limits\": {\"swap\": 1}}", "limits.swap: unknown limit");
    tool_refused(t, "{\"limits\": []}", "calls[0].policy.limits: expected an object");
    tool_refused(t, "{\"processes\": -1}", "processes: expected a positive integer");
    tool_refused(t, "{\"network\": true}",
                 "calls[0].policy.network: true: tool t has an allow-list");
    tool_refused(t, "{\"network\": {\"allow\": [\"c.example:443\"]}}",
                 "calls[0].policy.network.allow[0]: \"c.example:443\" is not in tool t's");
    tool_refused(t, "{\"network\": {\"allow\": [], \"max\": 1}}",
                 "network.max: not a key a policy narrows");
    tool_refused(t, "{\"network\": {\"allow\": \"a\"}}", "network.allow: expected an array");
    tool_refused(t, "{\"network\": 1}", "network: expected false, true or");
    tool_refused(t, "{\"filesystem\": {\"write\": [\"/etc\"]}}",
                 "calls[0].policy.filesystem.write[0]: \"/etc\" is not writable by tool t");
    /* the message echoes the client's text, cut where err ends: never in
     * the middle of a character */
    for (size_t len = 40; len < 60; len++) {
        char err[64];
        uint64_t ms = 0;
        assert_null(narrowed(t,
                             "{\"filesystem\": {\"write\": [\"/\u00e9\u00e9\u00e9\u00e9\u00e9"
                             "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\"]}}",
                             &ms, err, len));
        json_t *s = json_string(err);
        if (!s)
            fail_msg("errlen %zu: not UTF-8: %s", len, err);
        json_decref(s);
    }
    td_tool_unref(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lexical),
        cmocka_unit_test(test_lexical_refused),
        cmocka_unit_test_setup(test_write_narrowed, cfg_setup),
        cmocka_unit_test_setup(test_write_widening_refused, cfg_setup),
        cmocka_unit_test_setup(test_same_answer_whatever_exists, cfg_setup),
        cmocka_unit_test_setup(test_hide_added, cfg_setup),
        cmocka_unit_test_setup(test_read_narrowed, cfg_setup),
        cmocka_unit_test_setup(test_shape_refused, cfg_setup),
        cmocka_unit_test_setup(test_proxy_ca_kept, cfg_setup),
        cmocka_unit_test_setup(test_plan_looks_nothing_up, cfg_setup),
        cmocka_unit_test_setup(test_tool_narrowed, cfg_setup),
        cmocka_unit_test_setup(test_tool_widening_refused, cfg_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
