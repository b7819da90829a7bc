/*
 * options.c - toolexecd's options (options.h): one table, in --help's
 * order, of each option's names, its argument (none, text, a word of a
 * list, a number within bounds, or a function of its own), where it goes,
 * and its --help lines. The parse and --help are both read from it, as
 * server_ops.c's table is for requests.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <uv.h>

#include "config.h"
#include "credentials.h"
#include "fsview.h"
#include "identity.h"
#include "log.h"
#include "notify.h"
#include "options.h"
#include "proxy_tls.h"
#include "spares.h"
#include "subject.h"
#include "toolexec.h"

struct td_main_opts td_opts = {
    .containment = "auto",
    .log_format = "text",
    .metrics_timeout = 10,
    .mcp_relist_s = 2,
    .use_spawner = true,
    .fs_refusals = true,
};

enum opt_arg {
    OPT_FLAG,    /* no argument: the bool becomes true */
    OPT_TEXT,    /* the argument itself; one of .words when it has some */
    OPT_WORD,    /* one of .words: the value it stands for (OR'd in if .add) */
    OPT_BYTES,   /* a size in bytes, 1 to .most */
    OPT_COUNT,   /* a number, 1 to .most */
    OPT_SECONDS, /* .least (0 or 1) to .most */
    OPT_MILLIS,  /* 1 to .most */
    OPT_CALL,    /* a function of its own */
};

struct opt_word {
    const char *word;
    unsigned value;
};

/* An option's own function: 0, or -1 with err set (printed after
 * "--name: "), or 1 when main has nothing more to do (--help). */
typedef int (*opt_fn)(const char *arg, char *err, size_t errlen);

struct opt {
    const char *name;
    char letter;          /* 0: a long name only */
    const char *arg_name; /* in --help; NULL: it takes no argument */
    enum opt_arg arg;
    void *field; /* where the value goes */
    size_t size; /* its size: a bool, 32 or 64 bits, or a pointer */
    uint64_t least, most;
    const struct opt_word *words; /* ends with a NULL word */
    bool add;
    opt_fn call;
    const char *help; /* its lines, "\n" between them */
};

#define FIELD(f) .field = &(f), .size = sizeof(f)
#define WORDS(...) ((const struct opt_word[]){__VA_ARGS__, {0}})
#define FLAG(f) .arg = OPT_FLAG, FIELD(f)
#define TEXT(f) .arg = OPT_TEXT, FIELD(f)
#define ONE_OF(f, ...) .arg = OPT_TEXT, FIELD(f), .words = WORDS(__VA_ARGS__)
#define WORD(f, ...) .arg = OPT_WORD, FIELD(f), .words = WORDS(__VA_ARGS__)
#define WORD_ADD(f, ...) WORD(f, __VA_ARGS__), .add = true
#define BYTES(f, m) .arg = OPT_BYTES, FIELD(f), .least = 1, .most = (m)
#define COUNT(f, m) .arg = OPT_COUNT, FIELD(f), .least = 1, .most = (m)
#define SECONDS(f, l, m) .arg = OPT_SECONDS, FIELD(f), .least = (l), .most = (m)
#define MILLIS(f, m) .arg = OPT_MILLIS, FIELD(f), .least = 1, .most = (m)
#define CALL(fn) .arg = OPT_CALL, .call = (fn)

static int set_tools(const char *arg, char *err, size_t errlen)
{
    td_cfg.tools_dir = arg;
    td_opts.tools_given = true;
    return 0;
}

static int set_log_level(const char *arg, char *err, size_t errlen)
{
    int level = td_log_level_parse(arg);
    if (level < 0) {
        snprintf(err, errlen, "expected error, warn, info or debug");
        return -1;
    }
    td_log_set_level(level);
    return 0;
}

static int set_limits(const char *arg, char *err, size_t errlen)
{
    return td_limits_parse(arg, &td_cfg.limits, err, errlen) < 0 ? -1 : 0;
}

static int set_user(const char *arg, char *err, size_t errlen)
{
    if (strcmp(arg, "root") == 0) {
        snprintf(err, errlen,
                 "workers run as root only when a tool definition says \"user\": \"root\"");
        return -1;
    }
    td_cfg.user = arg;
    return 0;
}

static int set_call_uids(const char *arg, char *err, size_t errlen)
{
    return td_identity_parse(arg, err, errlen) < 0 ? -1 : 0;
}

/* strtoul's reading of arg in base, whole and at most most, into out;
 * else -1 with "expected what" (--spares and --socket-mode: their own
 * readings from before the table, kept). */
static int whole_ul(const char *arg, int base, unsigned long most, unsigned *out, const char *what,
                    char *err, size_t errlen)
{
    char *end;
    unsigned long n = strtoul(arg, &end, base);
    if (!*arg || *end || n > most) {
        snprintf(err, errlen, "expected %s", what);
        return -1;
    }
    *out = (unsigned)n;
    return 0;
}

static int set_spares(const char *arg, char *err, size_t errlen)
{
    return whole_ul(arg, 10, 16, &td_spares_per_tool, "0 to 16", err, errlen);
}

static int set_subject_from(const char *arg, char *err, size_t errlen)
{
    return td_subject_from_add(arg, err, errlen) < 0 ? -1 : 0;
}

static int set_socket_mode(const char *arg, char *err, size_t errlen)
{
    return whole_ul(arg, 8, 0777, &td_cfg.socket_mode, "octal permissions", err, errlen);
}

static int help(const char *arg, char *err, size_t errlen)
{
    td_usage(stdout);
    return 1;
}

static int version(const char *arg, char *err, size_t errlen)
{
    printf("toolexecd %s (libuv %s, jansson %s, %s)\n", TD_VERSION, uv_version_string(),
           JANSSON_VERSION,
           td_notify_built() ? "systemd: notify and socket activation"
                             : "built without libsystemd: no notify, no socket activation");
    return 1;
}

static const struct opt options[] = {
    {"socket", 's', "PATH", TEXT(td_cfg.socket_path),
     .help = "Unix socket to listen on\n"
             "(default $XDG_RUNTIME_DIR/toolexecd.sock, else\n"
             "${TMPDIR:-/tmp}/toolexecd-UID/toolexecd.sock;\n"
             "/run/toolexecd/toolexecd.sock for root)"},
    {"tools", 't', "DIR", CALL(set_tools),
     .help = "tool definitions, one *.json per tool\n"
             "(default " TD_DEFAULT_TOOLS_DIR ")"},
    {"work-dir", 0, "DIR", TEXT(td_opts.work_dir),
     .help = "where per-call private directories are made\n"
             "(default: a fresh one under /run/toolexecd\n"
             "or $XDG_RUNTIME_DIR/toolexecd)"},
    /* a frame is held whole: no more than a decoder takes */
    {"max-frame-bytes", 0, "N", BYTES(td_cfg.max_frame, TE_FRAME_MAX_LIMIT),
     .help = "largest worker response (default 16777216,\n"
             "at most 1073741824)"},
    {"max-content-bytes", 0, "N", BYTES(td_cfg.max_content, UINT32_MAX),
     .help = "largest encoded content (default 16777216)"},
    {"max-request-bytes", 0, "N", BYTES(td_cfg.max_request, UINT32_MAX),
     .help = "longest request line (default 16777216)"},
    {"log-level", 0, "LEVEL", CALL(set_log_level),
     .help = "error, warn, info or debug (default info)"},
    {"containment", 0, "MODE",
     ONE_OF(td_opts.containment, {"auto", 0}, {"pidns", 0}, {"cgroup", 0}, {"pgroup", 0}),
     .help = "auto, pidns, cgroup or pgroup (default auto)"},
    {"spawner", 0, "yes|no", WORD(td_opts.use_spawner, {"yes", 1}, {"no", 0}),
     .help = "calls started by a process of their own, off\n"
             "the loop (default yes; no: by the loop)"},
    {"fs-refusals", 0, "yes|no", WORD(td_opts.fs_refusals, {"yes", 1}, {"no", 0}),
     .help = "report calls' file-system refusals (a root\n"
             "daemon: a BPF program that costs every system\n"
             "call of the host ~0.1 us; default yes)"},
    {"spares", 0, "N", CALL(set_spares),
     .help = "sandboxes the spawner keeps ready per tool\n"
             "called lately, made while it starts no call\n"
             "(0-16, default 0: none; 2 halves a serial call)"},
    {"cgroup", 0, "DIR", TEXT(td_opts.cgroup_dir),
     .help = "make the calls' cgroups under DIR (cgroup v2)\n"
             "(default: our own cgroup if it is delegated)"},
    {"default-limits", 0, "K=N[,K=N...]", CALL(set_limits),
     .help = "limits for tools that set none:\n"
             "cpu_ms, memory_mb, processes, open_files,\n"
             "file_size_mb, output_mb"},
    {"default-user", 0, "NAME", CALL(set_user),
     .help = "workers' user when running as root\n"
             "(default: toolexec if it exists, else nobody)"},
    {"default-group", 0, "NAME", TEXT(td_cfg.group),
     .help = "workers' group (default: the user's)"},
    {"call-uids", 0, "FIRST-LAST|no", CALL(set_call_uids),
     .help = "root: each call of a tool without a \"user\"\n"
             "runs as a uid of its own from this range\n"
             "(default " TD_CALL_UIDS_DEFAULT ")"},
    {"default-network", 0, "yes|no", WORD(td_cfg.network, {"yes", 1}, {"no", 0}),
     .help = "network for tools that do not say"},
    {"max-workers", 0, "N", COUNT(td_cfg.max_workers, 1000000),
     .help = "worker processes at once (default 4 x CPUs, >= 16)"},
    {"max-clients", 0, "N", COUNT(td_cfg.max_clients, 1000000),
     .help = "connections at once (default 512)"},
    {"max-batch-calls", 0, "N", COUNT(td_cfg.max_batch_calls, 1000000),
     .help = "calls in one batch (default 1024)"},
    {"max-queued-calls", 0, "N", COUNT(td_cfg.max_queued_calls, 1000000),
     .help = "calls in one uid's (or subject's) unfinished\n"
             "batches (default 4096, at least 4 times\n"
             "the calls in one batch)"},
    {"max-client-batches", 0, "N", COUNT(td_cfg.max_client_batches, 1000000),
     .help = "unfinished batches on one connection (default 64)"},
    {"max-clients-per-uid", 0, "N", COUNT(td_cfg.max_clients_per_uid, 1000000),
     .help = "connections of one uid\n"
             "(default --max-clients/4, at least 16)"},
    {"max-request-buffer", 0, "N", BYTES(td_cfg.max_request_buffer, UINT32_MAX),
     .help = "bytes of unfinished request lines, all clients\n"
             "(default 67108864, at least 4 x --max-request-bytes)"},
    {"tool-timeout", 0, "MS", MILLIS(td_cfg.tool_timeout_ms, UINT32_MAX),
     .help = "a call's timeout when neither its batch's\n"
             "tool_timeout nor its tool's timeout_ms sets one\n"
             "(default 30000)"},
    {"idle-timeout", 0, "S", SECONDS(td_cfg.idle_timeout_s, 0, 86400),
     .help = "close a connection with no batch that sends nothing\n"
             "for S seconds, 0 never (default 600)"},
    {"socket-mode", 0, "MODE", CALL(set_socket_mode),
     .help = "octal permissions of the socket (default 0660)"},
    {"socket-group", 0, "NAME", TEXT(td_cfg.socket_group), .help = "group of the socket file"},
    {"events-socket", 0, "PATH", TEXT(td_cfg.events_socket_path),
     .help = "also listen here; connecting subscribes to every\n"
             "event (socat -u UNIX-CONNECT:PATH -)"},
    {"tail-group", 0, "NAME", TEXT(td_cfg.tail_group),
     .help = "subscribers in this group see every client's\n"
             "events (others: their own uid's)"},
    {"subject-from", 0, "USER", CALL(set_subject_from),
     .help = "trust this user's connections (a name or uid;\n"
             "the MCP HTTP front) to run batches for a\n"
             "\"subject\", each a share of slots and limits of\n"
             "its own (repeatable)"},
    {"shutdown-timeout", 0, "S", SECONDS(td_cfg.shutdown_timeout_s, 0, 86400),
     .help = "on SIGTERM, seconds in-flight calls get to finish\n"
             "before they are cancelled (default 10)"},
    {"log-format", 0, "FORMAT", TEXT(td_opts.log_format), .help = "text or json (default text)"},
    {"spill-max-age", 0, "S", SECONDS(td_cfg.spill_max_age_s, 0, 365 * 86400),
     .help = "spill files are removed when their client\n"
             "disconnects or S seconds after they are written\n"
             "(default 3600; 0: only when it disconnects)"},
    {"mcp-relist-interval", 0, "S", SECONDS(td_opts.mcp_relist_s, 1, 86400),
     .help = "an MCP server whose tools changed (its\n"
             "notifications/tools/list_changed) is listed\n"
             "again at most once per S seconds (default 2)"},
    {"metrics-listen", 0, "ADDR:PORT", TEXT(td_opts.metrics_listen),
     .help = "serve Prometheus metrics at\n"
             "http://ADDR:PORT/metrics (default: off)"},
    {"metrics-timeout", 0, "S", SECONDS(td_opts.metrics_timeout, 1, 3600),
     .help = "close a metrics connection idle S seconds\n"
             "(default 10)"},
    {"audit-arguments", 0, NULL, FLAG(td_opts.audit_arguments),
     .help = "audit records carry each call's arguments, not\n"
             "only their SHA-256"},
    {"audit-file", 0, "FILE", TEXT(td_opts.audit_file),
     .help = "also append each record to FILE, hash-chained\n"
             "(prev_sha256; SIGHUP reopens it)"},
    {"check", 0, NULL, FLAG(td_opts.check),
     .help = "print what isolation the host offers and exit;\n"
             "with --tools DIR, every problem of every\n"
             "definition in DIR instead (status 1 if any)"},
    {"filesystem", 0, "VIEW",
     WORD(td_fs_default, {"default", TD_FS_VIEW}, {"minimal", TD_FS_MINIMAL}, {"host", TD_FS_HOST}),
     .help = "what tools without a \"filesystem\" key see:\n"
             "default (the host read-only, secrets hidden),\n"
             "minimal (/usr, /etc, /lib* only) or host"},
    {"require-confinement", 0, NULL, FLAG(td_opts.require_confinement),
     .help = "refuse to start without every confinement layer"},
    {"disable-layer", 0, "L",
     WORD_ADD(td_cfg.layers_off, {"landlock", TD_LAYER_LANDLOCK}, {"seccomp", TD_LAYER_SECCOMP}),
     .help = "run calls without layer L: landlock or seccomp\n"
             "(tests; hosts where it misbehaves); repeatable"},
    {"credentials-dir", 0, "DIR", TEXT(td_credentials_dir),
     .help = "the files of the credentials that \"network\".\"headers\"\n"
             "name (default $CREDENTIALS_DIRECTORY, else\n" TD_CREDENTIALS_DEFAULT ")"},
    {"upstream-ca", 0, "FILE", TEXT(td_upstream_ca),
     .help = "PEM roots the egress proxy also trusts for hosts\n"
             "whose TLS it ends (with credential headers)"},
    {"help", 'h', NULL, CALL(help), .help = "this text"},
    {"version", 'V', NULL, CALL(version), .help = "the version"},
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))
/* getopt_long's value for options[i]: past every letter */
#define OPT_VAL0 256
/* where --help's text starts */
#define HELP_COLUMN 29

/* v into the option's field, whatever its width. */
static void store(const struct opt *o, uint64_t v)
{
    if (o->size == sizeof(bool)) {
        bool b = v != 0;
        memcpy(o->field, &b, sizeof(b));
    } else if (o->size == sizeof(uint32_t)) {
        uint32_t x;
        memcpy(&x, o->field, sizeof(x));
        x = o->add ? x | (uint32_t)v : (uint32_t)v;
        memcpy(o->field, &x, sizeof(x));
    } else {
        uint64_t x;
        memcpy(&x, o->field, sizeof(x));
        x = o->add ? x | v : v;
        memcpy(o->field, &x, sizeof(x));
    }
}

/* "expected a, b or c" */
static void expected_words(const struct opt_word *w, char *err, size_t errlen)
{
    size_t n = 0, len = 0;
    while (w[n].word)
        n++;
    len += snprintf(err, errlen, "expected");
    for (size_t i = 0; i < n && len < errlen; i++)
        len += snprintf(err + len, errlen - len, "%s%s",
                        i == 0       ? " "
                        : i + 1 == n ? " or "
                                     : ", ",
                        w[i].word);
}

static const struct opt_word *find_word(const struct opt_word *w, const char *arg)
{
    for (; w->word; w++)
        if (strcmp(w->word, arg) == 0)
            return w;
    return NULL;
}

/* One option's argument taken: 0, 1 (nothing more to do) or -1 with err. */
static int take(const struct opt *o, const char *arg, char *err, size_t errlen)
{
    uint64_t v;
    const struct opt_word *w;
    switch (o->arg) {
    case OPT_FLAG:
        store(o, 1);
        return 0;
    case OPT_TEXT:
        if (o->words && !find_word(o->words, arg)) {
            expected_words(o->words, err, errlen);
            return -1;
        }
        memcpy(o->field, &arg, sizeof(arg));
        return 0;
    case OPT_WORD:
        if (!(w = find_word(o->words, arg))) {
            expected_words(o->words, err, errlen);
            return -1;
        }
        store(o, w->value);
        return 0;
    case OPT_CALL:
        return o->call(arg, err, errlen);
    default:
        break;
    }
    /* a number: only a bare "0" where zero is allowed */
    if (o->least == 0 && strcmp(arg, "0") == 0)
        v = 0;
    else if (!td_config_parse_size(arg, o->most, &v)) {
        unsigned long long least = o->least, most = o->most;
        if (o->arg == OPT_BYTES)
            snprintf(err, errlen, "expected a size in bytes (1 to %llu)", most);
        else if (o->arg == OPT_COUNT)
            snprintf(err, errlen, "expected a number from 1 to %llu", most);
        else if (o->arg == OPT_SECONDS)
            snprintf(err, errlen, "expected seconds (%llu to %llu)", least, most);
        else
            snprintf(err, errlen, "expected milliseconds");
        return -1;
    }
    store(o, v);
    return 0;
}

static const struct opt *by_val(int val)
{
    if (val >= OPT_VAL0 && val < OPT_VAL0 + (int)N_OPTIONS)
        return &options[val - OPT_VAL0];
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (options[i].letter && options[i].letter == val)
            return &options[i];
    return NULL;
}

int td_options_parse(int argc, char **argv)
{
    struct option longs[N_OPTIONS + 1];
    char shorts[2 * N_OPTIONS + 1], *s = shorts;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct opt *o = &options[i];
        longs[i] = (struct option){o->name, o->arg_name ? required_argument : no_argument, NULL,
                                   OPT_VAL0 + (int)i};
        if (o->letter) {
            *s++ = o->letter;
            if (o->arg_name)
                *s++ = ':';
        }
    }
    *s = '\0';
    longs[N_OPTIONS] = (struct option){0};
    int val;
    while ((val = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        const struct opt *o = by_val(val);
        if (!o) { /* getopt_long has said what */
            td_usage(stderr);
            return 2;
        }
        char err[256];
        int rc = take(o, optarg, err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "toolexecd: --%s: %s\n", o->name, err);
            return 2;
        }
        if (rc > 0)
            return 0;
    }
    if (optind < argc) {
        fprintf(stderr, "toolexecd: unexpected argument: %s\n", argv[optind]);
        td_usage(stderr);
        return 2;
    }
    return -1;
}

void td_usage(FILE *f)
{
    fputs("usage: toolexecd [options]\n", f);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct opt *o = &options[i];
        char head[80];
        int n = o->letter ? snprintf(head, sizeof(head), "  -%c, --%s", o->letter, o->name)
                          : snprintf(head, sizeof(head), "      --%s", o->name);
        if (o->arg_name)
            n += snprintf(head + n, sizeof(head) - n, " %s", o->arg_name);
        fprintf(f, "%-*s", n < HELP_COLUMN ? HELP_COLUMN : n + 2, head);
        for (const char *h = o->help; *h; h++) {
            fputc(*h, f);
            if (*h == '\n')
                fprintf(f, "%*s", HELP_COLUMN, "");
        }
        fputc('\n', f);
    }
}
