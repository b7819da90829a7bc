/* Unit tests of toolexecd's option table (main/options.c): each kind of
 * argument lands in its field, a bad one is refused with its message and
 * status 2, and --help is printed from the same table. */
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "credentials.h"
#include "fsview.h"
#include "options.h"
#include "spares.h"

/* td_options_parse on argv (NULL-terminated, "toolexecd" put first); what
 * it wrote to stderr in err. */
static int parse(char *err, size_t errlen, const char *const *args)
{
    char *argv[64] = {"toolexecd"};
    int argc = 1;
    while (args[argc - 1])
        argv[argc] = (char *)args[argc - 1], argc++;
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    dup2(fileno(tmp), 2);
    optind = 0; /* getopt_long from the start again */
    int rc = td_options_parse(argc, argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(err, 1, errlen - 1, tmp);
    err[n] = '\0';
    fclose(tmp);
    return rc;
}

#define PARSE(err, ...) parse(err, sizeof(err), (const char *const[]){__VA_ARGS__, NULL})

static void test_values_land(void **state)
{
    char err[4096];
    int rc =
        PARSE(err, "-s", "/s.sock", "-t", "/tools", "--work-dir", "/w", "--max-frame-bytes", "4096",
              "--max-request-buffer", "70000", "--max-workers", "7", "--max-batch-calls", "9",
              "--idle-timeout", "0", "--metrics-timeout", "3600", "--spill-max-age", "31536000",
              "--tool-timeout", "4294967295", "--containment", "pgroup", "--spawner", "no",
              "--default-network", "no", "--filesystem", "minimal", "--disable-layer", "seccomp",
              "--disable-layer", "landlock", "--audit-arguments", "--check", "--spares", "16",
              "--socket-mode", "0600", "--credentials-dir", "/creds", "--default-user", "nobody");
    assert_int_equal(rc, -1);
    assert_string_equal(err, "");
    assert_string_equal(td_cfg.socket_path, "/s.sock");
    assert_string_equal(td_cfg.tools_dir, "/tools");
    assert_true(td_opts.tools_given);
    assert_string_equal(td_opts.work_dir, "/w");
    assert_int_equal(td_cfg.max_frame, 4096);
    assert_int_equal(td_cfg.max_request_buffer, 70000);
    assert_int_equal(td_cfg.max_workers, 7);
    assert_int_equal(td_cfg.max_batch_calls, 9);
    assert_int_equal(td_cfg.idle_timeout_s, 0);
    assert_int_equal(td_opts.metrics_timeout, 3600);
    assert_int_equal(td_cfg.spill_max_age_s, 31536000);
    assert_int_equal(td_cfg.tool_timeout_ms, 4294967295u);
    assert_string_equal(td_opts.containment, "pgroup");
    assert_false(td_opts.use_spawner);
    assert_int_equal(td_cfg.network, 0);
    assert_int_equal(td_fs_default, TD_FS_MINIMAL);
    assert_int_equal(td_cfg.layers_off, TD_LAYER_SECCOMP | TD_LAYER_LANDLOCK);
    assert_true(td_opts.audit_arguments);
    assert_true(td_opts.check);
    assert_int_equal(td_spares_per_tool, 16);
    assert_int_equal(td_cfg.socket_mode, 0600);
    assert_string_equal(td_credentials_dir, "/creds");
    assert_string_equal(td_cfg.user, "nobody");

    assert_int_equal(PARSE(err, "--spawner", "yes", "--default-network", "yes"), -1);
    assert_true(td_opts.use_spawner);
    assert_int_equal(td_cfg.network, 1);
}

static void test_refused(void **state)
{
    static const struct {
        const char *opt, *arg, *message;
    } cases[] = {
        {"--max-frame-bytes", "1073741825",
         "--max-frame-bytes: expected a size in bytes (1 to 1073741824)"},
        {"--max-content-bytes", "0",
         "--max-content-bytes: expected a size in bytes (1 to 4294967295)"},
        {"--max-clients-per-uid", "x",
         "--max-clients-per-uid: expected a number from 1 to 1000000"},
        {"--idle-timeout", "00", "--idle-timeout: expected seconds (0 to 86400)"},
        {"--metrics-timeout", "0", "--metrics-timeout: expected seconds (1 to 3600)"},
        {"--tool-timeout", "-1", "--tool-timeout: expected milliseconds"},
        {"--containment", "none", "--containment: expected auto, pidns, cgroup or pgroup"},
        {"--spawner", "on", "--spawner: expected yes or no"},
        {"--filesystem", "all", "--filesystem: expected default, minimal or host"},
        {"--disable-layer", "view", "--disable-layer: expected landlock or seccomp"},
        {"--log-level", "loud", "--log-level: expected error, warn, info or debug"},
        {"--default-user", "root",
         "--default-user: workers run as root only when a tool "
         "definition says \"user\": \"root\""},
        {"--spares", "17", "--spares: expected 0 to 16"},
        {"--socket-mode", "8", "--socket-mode: expected octal permissions"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[4096], want[512];
        assert_int_equal(PARSE(err, cases[i].opt, cases[i].arg), 2);
        snprintf(want, sizeof(want), "toolexecd: %s\n", cases[i].message);
        assert_string_equal(err, want);
    }
    char err[4096];
    assert_int_equal(PARSE(err, "--default-limits", "cpu_ms=x"), 2);
    assert_non_null(strstr(err, "toolexecd: --default-limits: \"cpu_ms\""));
    assert_int_equal(PARSE(err, "--call-uids", "5-1"), 2);
    assert_non_null(strstr(err, "toolexecd: --call-uids: \"5-1\""));
    /* after a word, after an unknown option: the usage, from the table */
    assert_int_equal(PARSE(err, "stray"), 2);
    assert_true(strncmp(err, "toolexecd: unexpected argument: stray\nusage: toolexecd", 52) == 0);
    assert_int_equal(PARSE(err, "--no-such-option"), 2);
    assert_non_null(strstr(err, "usage: toolexecd [options]\n"));
}

/* --help: a line per option name, its argument's name, and the text in one
 * column, continued lines under it. */
static void test_help(void **state)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    td_usage(f);
    fclose(f);
    assert_true(strncmp(text, "usage: toolexecd [options]\n", 27) == 0);
    assert_non_null(strstr(text, "\n  -s, --socket PATH          Unix socket to listen on\n"
                                 "                             (default $XDG_RUNTIME_DIR"));
    assert_non_null(strstr(text, "\n      --max-client-batches N unfinished batches"));
    assert_non_null(strstr(text, "\n      --call-uids FIRST-LAST|no  root: each call"));
    assert_non_null(strstr(text, "\n      --check                print what isolation"));
    assert_non_null(strstr(text, "\n  -V, --version              the version\n"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_land),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
