/*
 * info.c - the commands that ask the daemon about itself: tools, stats and
 * tail. Each uses a connection of its own and one request.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ------------------------------------------------------------------------ */
/* Shared */

/* Parse the options of a command that has only the common ones. Returns -1
 * to go on, else the exit code. */
static int parse_common(struct cli *cli, const char *cmd, int argc, char **argv)
{
    int rc = cli_only_common_options(cli, cmd, argc, argv);
    if (rc >= 0)
        return rc;
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected '%s'", argv[optind]);
    return -1;
}

static bool is_event(const json_t *ev, const char *kind)
{
    const char *k = json_string_value(json_object_get(ev, "event"));
    return k && strcmp(k, kind) == 0;
}

/* Tell why the daemon refused op; returns CLI_EXIT_ERROR. */
static int refused(const struct cli *cli, const char *op, const json_t *ev)
{
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    const char *message = json_string_value(json_object_get(ev, "message"));
    char *msg = cli_text_clean(message ? message : "");
    if (reason && strcmp(reason, "unknown_op") == 0)
        cli_err("toolexecd at %s does not know the %s request: it is older than this "
                "toolexec (it said: %s)",
                cli->socket_path, op, msg ? msg : "");
    else
        cli_err("toolexecd refused the %s request: %s: %s", op, reason ? reason : "?",
                msg ? msg : "");
    free(msg);
    return CLI_EXIT_ERROR;
}

/* Connect, send req and wait for the event answering it (want) or an
 * error. Returns the exit code; on success *out holds the answer and *cp
 * the connection (NULL cp: closed here). */
static int ask(struct cli *cli, const json_t *req, const char *want, json_t **out, te_client **cp)
{
    *out = NULL;
    te_client *c = cli_connect(cli);
    if (!c)
        return CLI_EXIT_CONNECT;
    const char *op = json_string_value(json_object_get(req, "op"));
    int rc = cli_send(cli, c, req);
    while (rc == CLI_EXIT_OK && !*out) {
        json_t *ev;
        int r = te_client_recv(c, &ev);
        if (r < 0) {
            char what[64];
            snprintf(what, sizeof(what), "answering the %s request", op);
            rc = cli_recv_failed(cli, r, what);
        } else if (is_event(ev, want)) {
            *out = ev;
            continue;
        } else if (is_event(ev, "error")) {
            rc = refused(cli, op, ev);
        }
        json_decref(ev);
    }
    if (rc == CLI_EXIT_OK && cp)
        *cp = c;
    else
        te_client_close(c);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* toolexec tools */

static void print_tools(const json_t *tools)
{
    static const char *const headers[] = {"NAME", "MANUAL", "DESCRIPTION"};
    cli_table *t = cli_table_new(3, headers);
    if (!t)
        return;
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        const char *cells[] = {json_string_value(json_object_get(tool, "name")),
                               json_is_true(json_object_get(tool, "manual")) ? "yes" : "no",
                               json_string_value(json_object_get(tool, "description"))};
        cli_table_add(t, cells, NULL);
    }
    cli_table_print(t, stdout, cli_term_width(STDOUT_FILENO), cli_term_color(STDOUT_FILENO));
    cli_table_free(t);
}

int cli_cmd_tools(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"format", required_argument, NULL, 'f'},
        {0},
    };
    json_t *req = json_pack("{s:s}", "op", "tools"), *ev;
    int opt;
    while ((opt = getopt_long(argc, argv, ":s:jhf:", opts, NULL)) != -1) {
        if (cli_common_option(cli, opt, optarg))
            continue;
        /* The daemon checks the name: it knows which APIs it can shape for. */
        if (opt == 'f' && json_object_set_new(req, "format", json_string(optarg)) == 0) {
            cli->json = true; /* an API's tool list is for programs, not a table */
            continue;
        }
        json_decref(req);
        if (opt == 'h')
            return cli_help("tools");
        if (opt == 'f')
            return cli_usage_error("tools", "--format: not valid UTF-8");
        return cli_bad_option("tools", opt, argv);
    }
    if (optind < argc) {
        json_decref(req);
        return cli_usage_error("tools", "unexpected '%s'", argv[optind]);
    }
    int rc = ask(cli, req, "tools", &ev, NULL);
    json_decref(req);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *tools = json_object_get(ev, "tools");
    if (cli->json)
        cli_print_json(tools);
    else
        print_tools(tools);
    json_decref(ev);
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------ */
/* toolexec stats */

static json_int_t int_at(const json_t *obj, const char *key)
{
    return json_integer_value(json_object_get(obj, key));
}

/* A latency in milliseconds, "-" when there is none yet. */
static void format_latency(char *buf, size_t len, const json_t *ms)
{
    if (json_is_number(ms))
        cli_format_ms(buf, len, json_number_value(ms));
    else
        snprintf(buf, len, "-");
}

static void format_spawn(char *buf, size_t len, const json_t *us)
{
    if (!json_is_number(us))
        snprintf(buf, len, "-");
    else if (json_number_value(us) < 1000)
        snprintf(buf, len, "%.0fus", json_number_value(us));
    else
        cli_format_ms(buf, len, json_number_value(us) / 1000);
}

static json_int_t tool_error_total(const json_t *tool)
{
    json_int_t n = 0;
    const char *reason;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(tool, "tool_errors"), reason, v)
    {
        n += json_integer_value(v);
    }
    return n;
}

static void print_stats_head(const json_t *st)
{
    char up[32];
    cli_format_ms(up, sizeof(up), json_number_value(json_object_get(st, "uptime_ms")));
    json_t *w = json_object_get(st, "workers"), *b = json_object_get(st, "batches");
    const char *version = json_string_value(json_object_get(st, "version"));
    printf("toolexecd %s, up %s\n", version ? version : "?", up);
    printf("workers  %lld running, %lld queued, at most %lld\n", (long long)int_at(w, "running"),
           (long long)int_at(w, "queued"), (long long)int_at(w, "max"));
    printf("clients  %lld\n", (long long)int_at(st, "clients"));
    printf("batches  %lld running, %lld served\n", (long long)int_at(b, "running"),
           (long long)int_at(b, "served"));
    printf("calls    %lld\n", (long long)int_at(st, "calls"));
}

static int add_tool_row(cli_table *t, const char *name, const json_t *tool)
{
    char n[7][24], lat[3][24], spawn[24];
    static const char *const keys[] = {"calls", "ok", "handler_errors", "asks", "halts"};
    for (size_t i = 0; i < 5; i++)
        snprintf(n[i], sizeof(n[i]), "%lld", (long long)int_at(tool, keys[i]));
    snprintf(n[5], sizeof(n[5]), "%lld", (long long)tool_error_total(tool));
    json_t *l = json_object_get(tool, "latency_ms");
    format_latency(lat[0], sizeof(lat[0]), json_object_get(l, "p50"));
    format_latency(lat[1], sizeof(lat[1]), json_object_get(l, "p90"));
    format_latency(lat[2], sizeof(lat[2]), json_object_get(l, "p99"));
    format_spawn(spawn, sizeof(spawn), json_object_get(tool, "spawn_us_mean"));
    const char *cells[] = {name, n[0], n[1], n[2], n[5], n[3], n[4], lat[0], lat[1], lat[2], spawn};
    return cli_table_add(t, cells, NULL);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The tool names, sorted (the object's order is the daemon's business). */
static const char **sorted_names(const json_t *tools, size_t *n)
{
    *n = json_object_size(tools);
    const char **names = calloc(*n + 1, sizeof(*names));
    if (!names)
        return NULL;
    size_t i = 0;
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)tools, name, v)
    {
        names[i++] = name;
    }
    qsort(names, *n, sizeof(*names), compare_names);
    return names;
}

static void print_tool_errors(const char *name, const json_t *tool)
{
    const char *sep = "";
    const char *reason;
    json_t *v;
    if (!tool_error_total(tool))
        return;
    printf("  %s:", name);
    json_object_foreach((json_t *)json_object_get(tool, "tool_errors"), reason, v)
    {
        if (!json_integer_value(v))
            continue;
        printf("%s %s %lld", sep, reason, (long long)json_integer_value(v));
        sep = ",";
    }
    putchar('\n');
}

static void print_stats(const json_t *st)
{
    static const char *const headers[] = {"TOOL",  "CALLS", "OK",  "ERRORS", "TOOL ERRORS", "ASKS",
                                          "HALTS", "P50",   "P90", "P99",    "SPAWN"};
    print_stats_head(st);
    json_t *tools = json_object_get(st, "tools");
    size_t n;
    const char **names = sorted_names(tools, &n);
    if (!names || !n) {
        free(names);
        return;
    }
    cli_table *t = cli_table_new(11, headers);
    for (size_t c = 1; t && c < 11; c++)
        cli_table_right(t, c);
    for (size_t i = 0; t && i < n; i++)
        add_tool_row(t, names[i], json_object_get(tools, names[i]));
    putchar('\n');
    if (t)
        cli_table_print(t, stdout, cli_term_width(STDOUT_FILENO), cli_term_color(STDOUT_FILENO));
    cli_table_free(t);
    bool any = false;
    for (size_t i = 0; i < n; i++)
        any |= tool_error_total(json_object_get(tools, names[i])) > 0;
    if (any)
        printf("\ntool errors by reason:\n");
    for (size_t i = 0; any && i < n; i++)
        print_tool_errors(names[i], json_object_get(tools, names[i]));
    free(names);
}

int cli_cmd_stats(struct cli *cli, int argc, char **argv)
{
    int rc = parse_common(cli, "stats", argc, argv);
    if (rc >= 0)
        return rc;
    json_t *req = json_pack("{s:s}", "op", "stats"), *ev;
    rc = ask(cli, req, "stats", &ev, NULL);
    json_decref(req);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli->json)
        cli_print_json(ev);
    else
        print_stats(ev);
    json_decref(ev);
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------ */
/* toolexec learn */

/* def as FILE, whole or not at all (written beside it, then renamed). */
static int write_definition(const char *file, const json_t *def)
{
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp.%ld", file, (long)getpid()) < 0)
        return -1;
    FILE *f = fopen(tmp, "w");
    int rc =
        f && json_dumpf(def, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 && fputc('\n', f) != EOF
            ? 0
            : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, file) < 0)
        rc = -1;
    if (rc < 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

int cli_cmd_learn(struct cli *cli, int argc, char **argv)
{
    int done = cli_only_common_options(cli, "learn", argc, argv);
    if (done >= 0)
        return done;
    if (optind >= argc)
        return cli_usage_error("learn", "expected the name of a tool in learn mode");
    if (argc - optind > 2)
        return cli_usage_error("learn", "unexpected '%s'", argv[optind + 2]);
    const char *tool = argv[optind], *file = argc - optind == 2 ? argv[optind + 1] : NULL;
    json_t *req = json_pack("{s:s,s:s}", "op", "learned", "tool", tool), *ev;
    int rc = ask(cli, req, "learned", &ev, NULL);
    json_decref(req);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_int_t calls = json_integer_value(json_object_get(ev, "calls"));
    if (file) {
        if (write_definition(file, json_object_get(ev, "definition")) < 0) {
            cli_err("%s: %s", file, strerror(errno));
            rc = CLI_EXIT_ERROR;
        } else
            fprintf(stderr, "toolexec: %s: the definition of %s learnt from %lld calls\n", file,
                    tool, (long long)calls);
    } else if (cli->json)
        cli_print_json(ev);
    else {
        json_dumpf(json_object_get(ev, "learned"), stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("\n");
        fprintf(stderr, "toolexec: learnt from %lld calls of %s\n", (long long)calls, tool);
    }
    json_decref(ev);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* toolexec tail */

/* "a,b,,c" -> ["a", "b", "c"]; NULL for a value that is not UTF-8. */
static json_t *split_list(const char *s)
{
    json_t *arr = json_array();
    const char *p = s;
    while (arr && *p) {
        size_t n = strcspn(p, ",");
        if (n && json_array_append_new(arr, json_stringn(p, n)) < 0) {
            json_decref(arr);
            return NULL;
        }
        p += n + (p[n] == ',');
    }
    return arr;
}

static void stamp(FILE *m)
{
    struct timespec ts;
    struct tm tm;
    char buf[16];
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
    fprintf(m, "%s.%03ld ", buf, ts.tv_nsec / 1000000);
}

static const char *str_at(const json_t *ev, const char *key)
{
    const char *s = json_string_value(json_object_get(ev, key));
    return s ? s : "?";
}

/* The value as compact JSON, or "" (freed by the caller). */
static char *compact(const json_t *v)
{
    char *s = v ? te_json_dumps(v, JSON_ENCODE_ANY, NULL) : NULL;
    return s ? s : strdup("");
}

static void describe_batch_started(FILE *m, const json_t *ev)
{
    json_t *calls = json_object_get(ev, "calls"), *client = json_object_get(ev, "client");
    size_t i;
    json_t *call;
    fprintf(m, "batch started: %zu call%s", json_array_size(calls),
            json_array_size(calls) == 1 ? "" : "s");
    json_array_foreach(calls, i, call)
    {
        fprintf(m, "%s%s", i ? ", " : " (", str_at(call, "name"));
    }
    fputs(json_array_size(calls) ? ")" : "", m);
    if (json_is_object(client))
        fprintf(m, " from pid %lld uid %lld", (long long)int_at(client, "pid"),
                (long long)int_at(client, "uid"));
}

static void describe_completed(FILE *m, const json_t *ev)
{
    json_t *halt = json_object_get(ev, "halt");
    size_t n = json_array_size(json_object_get(ev, "messages"));
    fprintf(m, "batch completed: %zu call%s", n, n == 1 ? "" : "s");
    if (json_is_object(halt))
        fprintf(m, ", halted: %s", str_at(halt, "halted_reason"));
}

/* One event in words (after the time and batch). */
static void describe(FILE *m, const json_t *ev, const char *kind)
{
    char outcome[128];
    char *v = NULL;
    if (strcmp(kind, "tool_execution_started") == 0) {
        v = compact(json_object_get(ev, "arguments"));
        fprintf(m, "%s %s started %s", str_at(ev, "id"), str_at(ev, "name"), v);
    } else if (strcmp(kind, "tool_execution_completed") == 0 && !json_object_get(ev, "result")) {
        /* a summary: the event's line was too long for subscribers */
        fprintf(m, "%s %s completed (%lld bytes; result left out)", str_at(ev, "id"),
                str_at(ev, "name"),
                (long long)int_at(json_object_get(ev, "tail_omitted"), "bytes"));
    } else if (strcmp(kind, "tool_execution_completed") == 0) {
        cli_outcome_text(json_object_get(ev, "result"), outcome, sizeof(outcome));
        fprintf(m, "%s %s %s", str_at(ev, "id"), str_at(ev, "name"), outcome);
    } else if (strcmp(kind, "tool_result_encoded") == 0) {
        fprintf(m, "%s content %s", str_at(ev, "id"), str_at(ev, "content"));
    } else if (strcmp(kind, "ask_user_requested") == 0) {
        fprintf(m, "%s %s asks: %s", str_at(ev, "tool_call_id"), str_at(ev, "tool_name"),
                str_at(ev, "question"));
    } else if (strcmp(kind, "tool_halt") == 0) {
        fprintf(m, "%s halt %s: %s", str_at(ev, "tool_call_id"), str_at(ev, "reason"),
                str_at(ev, "content"));
    } else if (strcmp(kind, "batch_started") == 0) {
        describe_batch_started(m, ev);
    } else if (strcmp(kind, "batch_completed") == 0) {
        describe_completed(m, ev);
    } else if (strcmp(kind, "error") == 0) {
        fprintf(m, "error %s %s: %s", str_at(ev, "type"), str_at(ev, "reason"),
                str_at(ev, "message"));
    } else {
        v = compact(ev);
        fprintf(m, "%s %s", kind, v);
    }
    free(v);
}

/* One line per event, cut to the terminal's width. */
static void print_tail_line(const json_t *ev, size_t width)
{
    const char *kind = json_string_value(json_object_get(ev, "event"));
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        return;
    stamp(m);
    if (kind && strcmp(kind, "lagged") == 0) {
        fprintf(m, "lagged: %lld events dropped (toolexec did not keep up)",
                (long long)int_at(ev, "dropped"));
    } else {
        const char *batch = json_string_value(json_object_get(ev, "batch"));
        fprintf(m, "%s ", batch ? batch : "-");
        describe(m, ev, kind ? kind : "?");
    }
    fclose(m);
    char *clean = cli_text_clean(text);
    char *fit = clean && width ? cli_text_fit(clean, width - 1) : NULL;
    if (clean)
        puts(fit ? fit : clean);
    fflush(stdout);
    free(fit);
    free(clean);
    free(text);
}

enum { OPT_TOOLS = 't', OPT_BATCHES = 'b' };

/* Build the tail request from the options; NULL after reporting a usage
 * error (*rc set) or when --help was answered. */
static json_t *tail_request(struct cli *cli, int argc, char **argv, int *rc)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"tools", required_argument, NULL, OPT_TOOLS},
        {"batches", required_argument, NULL, OPT_BATCHES},
        {0},
    };
    json_t *req = json_pack("{s:s}", "op", "tail");
    int opt;
    while (req && (opt = getopt_long(argc, argv, ":s:jht:b:", opts, NULL)) != -1) {
        json_t *list;
        if (cli_common_option(cli, opt, optarg))
            continue;
        if (opt == 'h')
            *rc = cli_help("tail");
        else if (opt != OPT_TOOLS && opt != OPT_BATCHES)
            *rc = cli_bad_option("tail", opt, argv);
        else if (!(list = split_list(optarg)))
            *rc = cli_usage_error("tail", "%s is not valid UTF-8", optarg);
        else
            json_object_set_new(req, opt == OPT_TOOLS ? "tools" : "batches", list);
        if (*rc >= 0) {
            json_decref(req);
            return NULL;
        }
    }
    if (req && optind < argc) {
        *rc = cli_usage_error("tail", "unexpected '%s'", argv[optind]);
        json_decref(req);
        return NULL;
    }
    return req;
}

static void say_tailing(const struct cli *cli, const json_t *req)
{
    if (!isatty(STDERR_FILENO))
        return;
    char *tools = compact(json_object_get(req, "tools"));
    char *batches = compact(json_object_get(req, "batches"));
    cli_err("following %s%s%s%s%s; Ctrl-C to stop", cli->socket_path, *tools ? ", tools " : "",
            tools, *batches ? ", batches " : "", batches);
    free(tools);
    free(batches);
}

int cli_cmd_tail(struct cli *cli, int argc, char **argv)
{
    int rc = -1;
    json_t *req = tail_request(cli, argc, argv, &rc), *ev;
    if (!req)
        return rc >= 0 ? rc : CLI_EXIT_ERROR;
    te_client *c;
    rc = ask(cli, req, "tailing", &ev, &c);
    if (rc != CLI_EXIT_OK) {
        json_decref(req);
        return rc;
    }
    say_tailing(cli, req);
    json_decref(req);
    size_t width = cli_term_width(STDOUT_FILENO);
    for (;;) {
        if (cli->json)
            cli_print_json(ev);
        else if (!is_event(ev, "tailing"))
            print_tail_line(ev, width);
        json_decref(ev);
        int r = te_client_recv(c, &ev);
        if (r == -ENODATA) {
            cli_err("toolexecd at %s closed the connection", cli->socket_path);
            break;
        }
        if (r < 0) {
            rc = cli_recv_failed(cli, r, "the end of the stream");
            break;
        }
    }
    te_client_close(c);
    return rc;
}
