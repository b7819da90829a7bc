/* Unit tests of the "filesystem" key and of the plan made from it
 * (fsview.c): path validation, and what the plan does with hidden,
 * exposed and private paths. The plan is only built here, never run (the
 * integration test test_confine_fs runs it). */
#include <errno.h>
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

#include "config.h"
#include "fsview.h"

static int parse(const char *text, struct td_fsview **out, char *err, size_t len)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    assert_non_null(v);
    int rc = td_fsview_parse("t.json", v, out, err, len);
    json_decref(v);
    return rc;
}

static void refused(const char *text, const char *want)
{
    struct td_fsview *f = NULL;
    char err[512] = "";
    assert_int_equal(parse(text, &f, err, sizeof(err)), -EINVAL);
    assert_null(f);
    if (!strstr(err, want))
        fail_msg("%s: got \"%s\", want \"%s\"", text, err, want);
}

static void test_paths_refused(void **state)
{
    (void)state;
    refused("{\"read\": [\"usr\"]}", "t.json: filesystem.read[0]: \"usr\": not an absolute path");
    refused("{\"write\": [\"/usr/\"]}", "filesystem.write[0]: \"/usr/\": not normalised");
    refused("{\"hide\": [\"/usr//lib\"]}", "filesystem.hide[0]");
    refused("{\"read\": [\"/usr/./lib\"]}", "not normalised");
    refused("{\"read\": [\"/usr/../etc\"]}", "not normalised");
    refused("{\"read\": [\"/usr/..\"]}", "not normalised");
    refused("{\"read\": [\"/\"]}", "the whole root");
    refused("{\"read\": [\"/no-such-dir-td-fsview\"]}", "No such file or directory");
    refused("{\"read\": [1]}", "filesystem.read[0]: expected a path");
    refused("{\"read\": \"/usr\"}", "filesystem.read: expected an array of paths");
    refused("{\"root\": \"tiny\"}", "filesystem.root: expected \"host\" or \"minimal\"");
    refused("{\"mounts\": []}", "filesystem.mounts: unknown key");
    refused("\"guest\"", "filesystem: expected \"host\" or an object");
    refused("true", "filesystem: expected");
}

static void test_symlink_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/td-fsview-XXXXXX", link[PATH_MAX], text[PATH_MAX + 32];
    assert_non_null(mkdtemp(dir));
    snprintf(link, sizeof(link), "%s/l", dir);
    assert_int_equal(symlink("/usr", link), 0);
    snprintf(text, sizeof(text), "{\"read\": [\"%s\"]}", link);
    refused(text, "it resolves to /usr");
    unlink(link);
    rmdir(dir);
}

static void test_accepted(void **state)
{
    (void)state;
    struct td_fsview *f;
    char err[256];
    assert_int_equal(parse("\"host\"", &f, err, sizeof(err)), 0);
    assert_true(f->host);
    td_fsview_free(f);
    assert_int_equal(parse("{\"root\": \"minimal\", \"read\": [\"/usr/lib\"], \"write\": "
                           "[\"/tmp\"], \"hide\": [\"/etc/hostname\"]}",
                           &f, err, sizeof(err)),
                     0);
    assert_true(f->minimal && !f->host && !f->dflt);
    assert_string_equal(f->read[0], "/usr/lib");
    assert_null(f->read[1]);
    assert_string_equal(f->write[0], "/tmp");
    assert_string_equal(f->hide[0], "/etc/hostname");
    td_fsview_free(f);
    /* no key: the daemon's default */
    assert_int_equal(td_fsview_parse("t.json", NULL, &f, err, sizeof(err)), 0);
    assert_true(f->dflt);
    td_fsview_free(f);
}

static const struct td_fs_op *find(const struct td_fsplan *p, int kind, const char *path)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ops[i].kind == kind &&
            (path ? p->ops[i].path && strcmp(p->ops[i].path, path) == 0 : !p->ops[i].path))
            return &p->ops[i];
    return NULL;
}

static void test_default_plan(void **state)
{
    (void)state;
    char work[] = "/tmp/td-fsview-work-XXXXXX", tools[] = "/tmp/td-fsview-tools-XXXXXX";
    assert_non_null(mkdtemp(work));
    assert_non_null(mkdtemp(tools));
    td_cfg.work_dir = work;
    td_cfg.tools_dir = tools;
    struct td_fsview *f;
    char err[256];
    assert_int_equal(
        parse("{\"read\": [\"/var/lib\"], \"write\": [\"/usr/share\"]}", &f, err, sizeof(err)), 0);
    const struct td_fsplan *plan;
    const char *const *ll;
    assert_int_equal(td_fsview_plan(f, NULL, NULL, true, &plan, &ll), 0);
    assert_non_null(plan);
    /* private /tmp and /dev */
    assert_non_null(find(plan, TD_FS_TMPFS, "/tmp"));
    assert_non_null(find(plan, TD_FS_TMPFS, "/dev"));
    /* hidden: covered by the empty directory (where the host has them) */
    struct stat st;
    if (stat("/root", &st) == 0)
        assert_int_equal(find(plan, TD_FS_BIND, "/root")->slot, TD_FS_SLOT_HDIR);
    if (stat("/etc/shadow", &st) == 0)
        assert_int_equal(find(plan, TD_FS_BIND, "/etc/shadow")->slot, TD_FS_SLOT_HFILE);
    /* "read" wins over the default hidden set: /var/lib is not covered */
    assert_null(find(plan, TD_FS_BIND, "/var/lib"));
    /* the tools and work directories are in /tmp, a fresh tmpfs: nothing
     * to cover; the call's directory is made below /tmp */
    assert_null(find(plan, TD_FS_BIND, tools));
    const struct td_fs_op *call = find(plan, TD_FS_CALLDIR, NULL);
    assert_non_null(call);
    assert_string_equal(call->arg, "/tmp");
    /* a write path: bound, and writable again after everything went
     * read-only; Landlock lets the call write there too */
    assert_non_null(find(plan, TD_FS_BIND, "/usr/share"));
    const struct td_fs_op *ro = find(plan, TD_FS_RDONLY, NULL);
    const struct td_fs_op *rw = find(plan, TD_FS_RDWR, "/usr/share");
    assert_true(ro && rw && rw > ro);
    if (td_fsview_landlock_abi() > 0) {
        bool listed = false;
        for (const char *const *p = ll; p && *p; p++)
            listed |= strcmp(*p, "/usr/share") == 0;
        assert_true(listed);
    } else {
        assert_null(ll);
    }
    /* made once, kept */
    const struct td_fsplan *again;
    assert_int_equal(td_fsview_plan(f, NULL, NULL, true, &again, &ll), 0);
    assert_ptr_equal(plan, again);
    td_fsview_free(f);
    /* a program beside the definitions is shown in the hidden tools
     * directory, named as a relative command names it ("DIR/./x") */
    char prog[PATH_MAX], named[PATH_MAX];
    snprintf(prog, sizeof(prog), "%s/x", tools);
    snprintf(named, sizeof(named), "%s/./x", tools);
    FILE *pf = fopen(prog, "w");
    assert_non_null(pf);
    fclose(pf);
    assert_int_equal(parse("{}", &f, err, sizeof(err)), 0);
    assert_int_equal(td_fsview_plan(f, named, NULL, true, &plan, &ll), 0);
    const struct td_fs_op *open_prog = find(plan, TD_FS_OPEN, prog);
    assert_non_null(open_prog);
    assert_int_equal(find(plan, TD_FS_BIND, prog)->slot, open_prog->slot);
    td_fsview_free(f);
    unlink(prog);
    /* "host": no plan */
    assert_int_equal(parse("\"host\"", &f, err, sizeof(err)), 0);
    assert_int_equal(td_fsview_plan(f, NULL, NULL, true, &plan, &ll), 0);
    assert_null(plan);
    assert_null(ll);
    td_fsview_free(f);
    rmdir(work);
    rmdir(tools);
}

/* Which rule hides a path (fswatch asks it of each refusal of a call):
 * the tools directory as the view's plan hid it, resolved once when the
 * plan was made, not looked up again for each path; before a plan, as it
 * resolves now. */
static void test_hides_as_planned(void **state)
{
    (void)state;
    char a[] = "/tmp/td-fsview-a-XXXXXX", b[] = "/tmp/td-fsview-b-XXXXXX", link[64];
    char in_a[PATH_MAX], in_b[PATH_MAX];
    assert_non_null(mkdtemp(a));
    assert_non_null(mkdtemp(b));
    snprintf(link, sizeof(link), "/tmp/td-fsview-link-%d", (int)getpid());
    snprintf(in_a, sizeof(in_a), "%s/x.json", a);
    snprintf(in_b, sizeof(in_b), "%s/x.json", b);
    unlink(link);
    assert_int_equal(symlink(a, link), 0);
    td_cfg.work_dir = "/var/td-fsview-no-work";
    td_cfg.tools_dir = link;
    struct td_fsview *f, *g;
    char err[256];
    bool known;
    assert_int_equal(parse("{}", &f, err, sizeof(err)), 0);
    assert_int_equal(parse("{}", &g, err, sizeof(err)), 0);
    assert_null(td_fsview_planned_tools(f, &known));
    assert_false(known);
    assert_string_equal(td_fsview_hides(f, in_a), a);
    const struct td_fsplan *plan;
    const char *const *ll;
    assert_int_equal(td_fsview_plan(f, NULL, NULL, true, &plan, &ll), 0);
    assert_string_equal(td_fsview_planned_tools(f, &known), a);
    assert_true(known);
    /* the link moved: the plan made still hides a, and says so; a view
     * with no plan yet follows the link */
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink(b, link), 0);
    assert_string_equal(td_fsview_hides(f, in_a), a);
    assert_string_equal(td_fsview_hides(f, in_b), "/tmp");
    assert_string_equal(td_fsview_hides(g, in_b), b);
    td_fsview_free(f);
    td_fsview_free(g);
    unlink(link);
    rmdir(a);
    rmdir(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_refused),    cmocka_unit_test(test_symlink_refused),
        cmocka_unit_test(test_accepted),         cmocka_unit_test(test_default_plan),
        cmocka_unit_test(test_hides_as_planned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
