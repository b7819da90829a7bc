/*
 * sandboxrun_opts.c - `toolexec sandbox`'s options made into a tool
 * definition (sandboxrun.h), which the registry then parses as it does a
 * file in tools.d: the keys mean what they mean there.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "sandboxrun_opts.h"

/* The whole text is toolexec(1)'s (toolexec sandbox --help). */
#define SBX_USAGE                                                                                  \
    "usage: toolexecd --sandbox-run [OPTIONS] -- COMMAND [ARGS]\n"                                 \
    "The engine of toolexec sandbox: see toolexec sandbox --help.\n"

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "toolexec sandbox: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'toolexec sandbox --help'.\n");
    return 125;
}

/* A path the view names: absolute and resolved (fsview.c wants both). */
static int add_path(json_t *fs, const char *key, const char *path)
{
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        fprintf(stderr, "toolexec sandbox: --%s %s: %s\n", key, path, strerror(errno));
        return 125;
    }
    json_t *a = json_object_get(fs, key);
    if (!a) {
        a = json_array();
        json_object_set_new(fs, key, a);
    }
    json_array_append_new(a, json_string_nocheck(real));
    return 0;
}

/* --net: off, host, or a comma-separated allow-list. */
static json_t *net_value(const char *s)
{
    if (strcmp(s, "off") == 0)
        return json_false();
    if (strcmp(s, "host") == 0)
        return json_true();
    json_t *allow = json_array();
    char *copy = strdup(s), *save = NULL;
    for (char *h = strtok_r(copy, ",", &save); h; h = strtok_r(NULL, ",", &save))
        json_array_append_new(allow, json_string(h));
    free(copy);
    if (!json_array_size(allow)) {
        json_decref(allow);
        return NULL;
    }
    return json_pack("{s:o}", "allow", allow);
}

static int parse_memory(const char *s, uint64_t *mb)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || v == 0)
        return -1;
    if (!*end || strcasecmp(end, "m") == 0)
        *mb = v;
    else if (strcasecmp(end, "g") == 0)
        *mb = v << 10;
    else if (strcasecmp(end, "k") == 0)
        *mb = (v + 1023) >> 10;
    else
        return -1;
    return *mb && *mb < (1ull << 32) ? 0 : -1;
}

static int parse_seconds(const char *s, uint64_t *ms)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 31536000)
        return -1;
    *ms = (uint64_t)(v * 1000 + 0.5);
    return *ms ? 0 : -1;
}

/* p is a or below it (both resolved). */
static bool covers(const char *a, const char *p)
{
    size_t n = strlen(a);
    return strcmp(a, "/") == 0 || (strncmp(a, p, n) == 0 && (p[n] == '\0' || p[n] == '/'));
}

static bool any_covers(json_t *fs, const char *key, const char *p)
{
    json_t *v;
    size_t i;
    json_array_foreach(json_object_get(fs, key), i,
                       v) if (covers(json_string_value(v), p)) return true;
    return false;
}

/* The command starts where the caller stands, as under bwrap --chdir: the
 * directory shown read-only (even in a hidden tree such as /root or /home)
 * unless a --write path makes it writable. A --hide over it wins: then
 * the private directory. "/" needs no showing. */
static void where_it_runs(json_t *fs, struct td_sbx_opts *o)
{
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)) || any_covers(fs, "hide", cwd))
        return;
    o->run_dir = strdup(cwd);
    /* what the view makes its own (/tmp, /dev, /proc) is started in as it is */
    static const char *const own[] = {"/", "/tmp", "/dev", "/proc"};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcmp(cwd, own[i]) == 0 || (i >= 2 && covers(own[i], cwd)))
            return;
    if (any_covers(fs, "write", cwd) || any_covers(fs, "read", cwd))
        return;
    json_t *a = json_object_get(fs, "read");
    if (!a) {
        a = json_array();
        json_object_set_new(fs, "read", a);
    }
    json_array_append_new(a, json_string_nocheck(cwd));
}

int td_sbx_parse(int argc, char **argv, struct td_sbx_opts *o)
{
    enum {
        O_READ = 256,
        O_WRITE,
        O_HIDE,
        O_NET,
        O_TIMEOUT,
        O_MEMORY,
        O_SYSCALLS,
        O_DENY,
        O_USER,
        O_JSON,
        O_LEARN,
        O_LEARN_REFUSED
    };
    static const struct option opts[] = {
        {"read", required_argument, NULL, O_READ},
        {"write", required_argument, NULL, O_WRITE},
        {"hide", required_argument, NULL, O_HIDE},
        {"net", required_argument, NULL, O_NET},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"memory", required_argument, NULL, O_MEMORY},
        {"syscalls", required_argument, NULL, O_SYSCALLS},
        {"deny-syscall", required_argument, NULL, O_DENY},
        {"user", required_argument, NULL, O_USER},
        {"json", optional_argument, NULL, O_JSON},
        {"learn", required_argument, NULL, O_LEARN},
        {"learn-refused", required_argument, NULL, O_LEARN_REFUSED},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    memset(o, 0, sizeof(*o));
    o->log_level = TD_LOG_WARN; /* a confinement layer this host lacks is said */
    json_t *def = json_pack("{s:s,s:s,s:b}", "name", "sandbox", "protocol", "plain", "network", 0);
    json_t *fs = json_object();
    o->def = def;
    int opt, rc = 0;
    uint64_t v;
    optind = 1;
    opterr = 0;
    /* "+": the command's own options are its own */
    while (rc == 0 && (opt = getopt_long(argc, argv, "+vh", opts, NULL)) != -1) {
        switch (opt) {
        case O_READ:
        case O_WRITE:
        case O_HIDE:
            rc = add_path(fs, opt == O_READ ? "read" : opt == O_WRITE ? "write" : "hide", optarg);
            break;
        case O_NET: {
            json_t *n = net_value(optarg);
            if (!n)
                rc = bad("--net: expected off, host or HOST[:PORT],...", NULL);
            else
                json_object_set_new(def, "network", n);
            break;
        }
        case O_TIMEOUT:
            if (parse_seconds(optarg, &o->timeout_ms) < 0)
                rc = bad("--timeout: expected seconds, not '%s'", optarg);
            break;
        case O_MEMORY:
            if (parse_memory(optarg, &v) < 0)
                rc = bad("--memory: expected a size (MiB, or with K, M or G), not '%s'", optarg);
            else
                json_object_set_new(
                    def, "limits",
                    json_pack("{s:I}", td_limit_names[TD_LIMIT_MEMORY_MB], (json_int_t)v));
            break;
        case O_SYSCALLS:
            json_object_set_new(def, "syscalls", json_string(optarg));
            break;
        case O_DENY: {
            json_t *a = json_object_get(def, "deny_syscalls");
            if (!a) {
                a = json_array();
                json_object_set_new(def, "deny_syscalls", a);
            }
            json_array_append_new(a, json_string(optarg));
            break;
        }
        case O_USER:
            json_object_set_new(def, "user", json_string(optarg));
            break;
        case O_JSON:
            o->json_out = optarg ? optarg : "-";
            break;
        case O_LEARN: /* learn mode (learndef.c): permissive, every touch recorded */
            o->learn_out = optarg;
            json_object_set_new(def, "learn", json_true());
            break;
        case O_LEARN_REFUSED: /* confined as the options say, its refusals recorded */
            o->learn_out = optarg;
            json_object_set_new(def, "learn", json_string("refused"));
            break;
        case 'v':
            o->log_level = o->log_level == TD_LOG_WARN ? TD_LOG_INFO : TD_LOG_DEBUG;
            break;
        case 'h':
            fputs(SBX_USAGE, stdout);
            rc = -1;
            break;
        case ':':
            rc = bad("%s: needs a value", argv[optind - 1]);
            break;
        default:
            rc = bad("unknown option '%s'", argv[optind - 1]);
            break;
        }
    }
    if (rc == 0 && optind >= argc)
        rc = bad("no command given (toolexec sandbox [OPTIONS] -- COMMAND [ARGS])%s", "");
    if (rc == 0) {
        json_t *cmd = json_array();
        for (int i = optind; i < argc; i++)
            json_array_append_new(cmd, json_string_nocheck(argv[i]));
        json_object_set_new(def, "command", cmd);
        where_it_runs(fs, o);
        if (json_object_size(fs))
            json_object_set(def, "filesystem", fs);
    }
    json_decref(fs);
    return rc;
}
