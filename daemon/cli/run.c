/*
 * run.c - `toolexec run` and `toolexec call`: send one batch on a
 * connection of its own, follow its events, and report what happened.
 *
 * The connection carries only this batch, so every event is ours and the
 * daemon's first assigned id ("b-1") is the batch's when the input names
 * none. The sending side stays open: Ctrl-C needs it to send the cancel op.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Elapsed time on the progress line moves at this pace. */
#define PROGRESS_TICK_MS 100
/* A batch that is over sooner gets no progress line: it would only flicker. */
#define PROGRESS_DELAY_MS 200
/* Events can arrive far faster than a terminal wants redrawing. */
#define PROGRESS_MIN_REDRAW_MS 50

/* What a batch is called before the daemon's id for it is known (compared
 * by address). */
static const char unnamed_batch[] = "(unnamed)";

enum call_phase { CALL_QUEUED, CALL_RUNNING, CALL_DONE };

enum outcome {
    OUTCOME_NONE,
    OUTCOME_OK,
    OUTCOME_ERROR,
    OUTCOME_TOOL_ERROR,
    OUTCOME_ASK_USER,
    OUTCOME_HALT,
    OUTCOME_COUNT
};

static const char *const outcome_names[OUTCOME_COUNT] = {"-",          "ok",       "error",
                                                         "tool_error", "ask_user", "halt"};

/* SGR colours of the outcomes: failures red, halts yellow. */
static const char *const outcome_colors[OUTCOME_COUNT] = {NULL, "32", "31", "31", "33", "33"};

struct call_view {
    const char *id, *name; /* borrowed from the request */
    enum call_phase phase;
    double started, completed; /* monotonic ms, when this client saw them */
    enum outcome outcome;
    char *detail;       /* tool_error reason or halt reason */
    char *preview;      /* the content, or the question of an ask_user */
    json_t *tool_error; /* the tool_error object of a failed call: its cause is shown */
    /* the daemon's duration_ms, < 0 when none: what this client saw is late
     * by as long as an "ask" question waited */
    double took;
};

struct batch_view {
    struct cli *cli;
    te_client *client;
    const char *batch;
    struct call_view *calls;
    size_t ncalls, running, done;
    json_t *index; /* call id -> position in calls */
    double t0, t_end, last_draw;
    bool json;     /* print every event as it comes */
    bool progress; /* draw the progress line on stderr */
    bool cancel_sent;
    json_t *terminal; /* batch_completed or error */
    /* The input named no batch: the daemon's id, unique in its life, is
     * learnt from the first event (the connection carries only this batch). */
    char *assigned;
};

static volatile sig_atomic_t interrupted;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The first Ctrl-C asks the main loop to cancel the batch; the second
 * quits at once, leaving a clean line behind. */
static void on_sigint(int sig)
{
    if (!interrupted) {
        interrupted = 1;
        return;
    }
    if (cli_progress_on_screen) {
        static const char clear[] = "\r\033[K";
        (void)!write(STDERR_FILENO, clear, sizeof(clear) - 1);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void catch_sigint(void)
{
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: poll() must return so the cancel goes out at once. */
    sigaction(SIGINT, &sa, NULL);
}

/* ------------------------------------------------------------------------ */
/* State */

static int view_init(struct batch_view *v, struct cli *cli, json_t *req)
{
    memset(v, 0, sizeof(*v));
    v->cli = cli;
    v->json = cli->json;
    v->progress = !cli->json && isatty(STDERR_FILENO);
    const char *batch = json_string_value(json_object_get(req, "batch"));
    v->batch = batch ? batch : unnamed_batch;
    v->index = json_object();
    json_t *calls = json_object_get(req, "calls");
    v->calls = calloc(json_array_size(calls) + 1, sizeof(*v->calls));
    if (!v->index || !v->calls)
        return -ENOMEM;
    size_t i;
    json_t *call;
    /* Calls the daemon will refuse are left out: an error event follows. */
    json_array_foreach(calls, i, call)
    {
        const char *id, *name;
        cli_call_identity(call, &id, &name);
        if (!id || !name || json_object_get(v->index, id))
            continue;
        json_object_set_new(v->index, id, json_integer((json_int_t)v->ncalls));
        v->calls[v->ncalls++] = (struct call_view){.id = id, .name = name};
    }
    return 0;
}

static void view_free(struct batch_view *v)
{
    for (size_t i = 0; i < v->ncalls; i++) {
        free(v->calls[i].detail);
        free(v->calls[i].preview);
        json_decref(v->calls[i].tool_error);
    }
    free(v->calls);
    free(v->assigned);
    json_decref(v->index);
    json_decref(v->terminal);
}

static struct call_view *find_call(struct batch_view *v, const json_t *ev, const char *key)
{
    const char *id = json_string_value(json_object_get(ev, key));
    json_t *pos = id ? json_object_get(v->index, id) : NULL;
    return pos ? &v->calls[json_integer_value(pos)] : NULL;
}

/* The kind of a call's result, and its reason when it has one (borrowed). */
static enum outcome outcome_of(const json_t *result, const char **detail)
{
    json_t *te = json_object_get(result, "tool_error");
    *detail = NULL;
    if (json_object_get(result, "ok"))
        return OUTCOME_OK;
    if (te) {
        /* a cancelled call says so first, not as the handler_exit it is */
        *detail = json_is_true(json_object_get(json_object_get(te, "cause"), "cancelled"))
                      ? "cancelled"
                      : json_string_value(json_object_get(te, "reason"));
        return OUTCOME_TOOL_ERROR;
    }
    if (json_object_get(result, "error"))
        return OUTCOME_ERROR;
    if (json_object_get(result, "ask_user"))
        return OUTCOME_ASK_USER;
    if (json_object_get(result, "halt")) {
        *detail = json_string_value(json_object_get(result, "halt"));
        return OUTCOME_HALT;
    }
    return OUTCOME_NONE;
}

static void outcome_format(enum outcome o, const char *detail, char *buf, size_t len)
{
    if (detail)
        snprintf(buf, len, "%s %s", outcome_names[o], detail);
    else
        snprintf(buf, len, "%s", outcome_names[o]);
}

void cli_outcome_text(const json_t *result, char *buf, size_t len)
{
    const char *detail;
    enum outcome o = outcome_of(result, &detail);
    outcome_format(o, detail, buf, len);
}

static void set_outcome(struct call_view *cv, const json_t *result)
{
    const char *detail;
    cv->outcome = outcome_of(result, &detail);
    free(cv->detail);
    cv->detail = detail ? strdup(detail) : NULL;
    json_decref(cv->tool_error);
    cv->tool_error = json_incref(json_object_get(result, "tool_error"));
}

static void set_preview(struct call_view *cv, const json_t *text)
{
    if (!json_is_string(text))
        return;
    free(cv->preview);
    cv->preview = strdup(json_string_value(text));
}

static bool is_event(const json_t *ev, const char *kind)
{
    const char *k = json_string_value(json_object_get(ev, "event"));
    return k && strcmp(k, kind) == 0;
}

/* An error answering our own cancel or decide, not the batch's refusal: a
 * run request never gets these reasons. */
static bool is_control_reply(const json_t *ev)
{
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    return is_event(ev, "error") && reason &&
           (strcmp(reason, "unknown_batch") == 0 || strcmp(reason, "no_pending_decision") == 0);
}

static void on_call_event(struct batch_view *v, const json_t *ev)
{
    struct call_view *cv;
    if (is_event(ev, "tool_execution_started") && (cv = find_call(v, ev, "id")) &&
        cv->phase == CALL_QUEUED) {
        cv->phase = CALL_RUNNING;
        cv->started = now_ms();
        v->running++;
    } else if (is_event(ev, "tool_execution_completed") && (cv = find_call(v, ev, "id")) &&
               cv->phase != CALL_DONE) {
        if (cv->phase == CALL_RUNNING)
            v->running--;
        else
            cv->started = now_ms();
        cv->phase = CALL_DONE;
        cv->completed = now_ms();
        json_t *d = json_object_get(ev, "duration_ms");
        cv->took = json_is_number(d) ? json_number_value(d) : -1;
        v->done++;
        set_outcome(cv, json_object_get(ev, "result"));
    } else if (is_event(ev, "tool_result_encoded") && (cv = find_call(v, ev, "id"))) {
        set_preview(cv, json_object_get(ev, "content"));
    } else if (is_event(ev, "ask_user_requested") && (cv = find_call(v, ev, "tool_call_id"))) {
        set_preview(cv, json_object_get(ev, "question"));
    } else if (is_event(ev, "tool_halt") && (cv = find_call(v, ev, "tool_call_id"))) {
        set_preview(cv, json_object_get(ev, "content"));
    }
}

static void on_control_reply(const struct batch_view *v, const json_t *ev)
{
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    /* unknown_batch: our cancel crossed the batch's completion on the wire */
    if (v->json || strcmp(reason, "no_pending_decision") != 0)
        return;
    cli_clear_progress();
    const char *message = json_string_value(json_object_get(ev, "message"));
    char *msg = cli_text_clean(message ? message : "");
    cli_err("the decision came too late: %s", msg ? msg : "");
    free(msg);
}

static void on_event(struct batch_view *v, json_t *ev)
{
    if (v->json)
        cli_print_json(ev);
    const char *id = json_string_value(json_object_get(ev, "batch"));
    if (v->batch == unnamed_batch && id && !is_control_reply(ev) && (v->assigned = strdup(id)))
        v->batch = v->assigned;
    if (is_control_reply(ev)) {
        on_control_reply(v, ev);
    } else if (is_event(ev, "batch_completed") || is_event(ev, "error")) {
        v->terminal = json_incref(ev);
        v->t_end = now_ms();
    } else if (is_event(ev, "tool_error_decision_requested")) {
        struct call_view *cv = find_call(v, ev, "id");
        cli_decide(v->cli, v->client, v->batch, ev, cv ? cv->name : NULL, !v->json);
    } else {
        on_call_event(v, ev);
    }
}

/* ------------------------------------------------------------------------ */
/* The progress line */

static void draw_progress(struct batch_view *v)
{
    double now = now_ms();
    if (!v->progress || now - v->t0 < PROGRESS_DELAY_MS ||
        now - v->last_draw < PROGRESS_MIN_REDRAW_MS)
        return;
    v->last_draw = now;
    const char *sep = cli_term_utf8() ? " \u00b7 " : ", ";
    char elapsed[32], line[512];
    cli_format_ms(elapsed, sizeof(elapsed), now - v->t0);
    snprintf(line, sizeof(line), "%s: %zu/%zu done%s%zu running%s%zu queued%s%s%s", v->batch,
             v->done, v->ncalls, sep, v->running, sep, v->ncalls - v->done - v->running, sep,
             elapsed, v->cancel_sent ? " (cancelling)" : "");
    char *clean = cli_text_clean(line);
    size_t width = cli_term_width(STDERR_FILENO);
    /* One column short of the edge: a full line would wrap on some terminals
     * and \r would then redraw only its second half. */
    char *fit = clean ? cli_text_fit(clean, width > 1 ? width - 1 : 1) : NULL;
    if (fit) {
        fprintf(stderr, "\r\033[K%s", fit);
        cli_progress_on_screen = 1;
    }
    free(fit);
    free(clean);
}

/* ------------------------------------------------------------------------ */
/* Following the batch */

static int send_cancel(struct batch_view *v)
{
    cli_clear_progress();
    cli_err("cancelling batch %s; Ctrl-C again to quit at once", v->batch);
    json_t *req = json_pack("{s:s,s:s}", "op", "cancel", "batch", v->batch);
    int rc = req ? cli_send(v->cli, v->client, req) : CLI_EXIT_ERROR;
    json_decref(req);
    v->cancel_sent = true;
    return rc;
}

/* Wait for the next event, redrawing the progress line meanwhile. Returns
 * 1 when an event can be read, 0 to look again, or an exit code < 0. */
static int wait_readable(struct batch_view *v)
{
    if (te_client_pending(v->client))
        return 1;
    struct pollfd pfd = {.fd = te_client_fd(v->client), .events = POLLIN};
    int n = poll(&pfd, 1, PROGRESS_TICK_MS);
    if (n < 0 && errno != EINTR) {
        cli_clear_progress();
        cli_err("poll: %s", strerror(errno));
        return -CLI_EXIT_ERROR;
    }
    if (n <= 0) {
        draw_progress(v);
        return 0;
    }
    return 1;
}

/* Read events until the batch's terminal event. Returns an exit code for
 * trouble on the connection, else CLI_EXIT_OK. */
static int follow(struct batch_view *v)
{
    while (!v->terminal) {
        /* a cancel names the batch: before its first event, wait for it */
        if (interrupted && !v->cancel_sent && v->batch != unnamed_batch) {
            int rc = send_cancel(v);
            if (rc != CLI_EXIT_OK)
                return rc;
        }
        int r = wait_readable(v);
        if (r < 0)
            return -r;
        if (r == 0)
            continue;
        json_t *ev;
        int rc = te_client_recv(v->client, &ev);
        if (rc < 0) {
            cli_clear_progress();
            return cli_recv_failed(v->cli, rc, "the batch completed");
        }
        on_event(v, ev);
        json_decref(ev);
        draw_progress(v);
    }
    cli_clear_progress();
    return CLI_EXIT_OK;
}

/* Send req on a new connection and follow it to its end. */
static int run_batch(struct batch_view *v, json_t *req)
{
    v->client = cli_connect(v->cli);
    if (!v->client)
        return CLI_EXIT_CONNECT;
    catch_sigint();
    v->t0 = now_ms();
    int rc = cli_send(v->cli, v->client, req);
    if (rc == CLI_EXIT_OK)
        rc = follow(v);
    te_client_close(v->client);
    v->client = NULL;
    return rc;
}

/* 0 when every call was ok, 1 when one failed or the batch halted, 2 for a
 * refused request. */
static int batch_status(const struct batch_view *v)
{
    if (is_event(v->terminal, "error"))
        return CLI_EXIT_ERROR;
    json_t *halt = json_object_get(v->terminal, "halt");
    if (halt && !json_is_null(halt))
        return CLI_EXIT_FAILED;
    for (size_t i = 0; i < v->ncalls; i++)
        if (v->calls[i].outcome != OUTCOME_OK)
            return CLI_EXIT_FAILED;
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------ */
/* Reports for people */

static void report_error(const struct batch_view *v)
{
    const json_t *ev = v->terminal;
    const char *message = json_string_value(json_object_get(ev, "message"));
    char *msg = cli_text_clean(message ? message : "");
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    cli_err("batch %s refused: %s %s: %s", v->batch, type ? type : "error", reason ? reason : "?",
            msg ? msg : "");
    if (reason && strcmp(reason, "unknown_tool") == 0)
        cli_err("'toolexec tools' lists the tools toolexecd has loaded");
    free(msg);
}

static int add_call_row(cli_table *t, const struct call_view *cv)
{
    char outcome[128], took[32] = "-";
    outcome_format(cv->outcome, cv->detail, outcome, sizeof(outcome));
    if (cv->phase == CALL_DONE)
        cli_format_ms(took, sizeof(took), cv->took >= 0 ? cv->took : cv->completed - cv->started);
    const char *cells[] = {cv->id, cv->name, outcome, took, cv->preview ? cv->preview : ""};
    const char *colors[] = {NULL, NULL, outcome_colors[cv->outcome], NULL, NULL};
    return cli_table_add(t, cells, colors);
}

static void print_table(const struct batch_view *v)
{
    static const char *const headers[] = {"ID", "TOOL", "OUTCOME", "TIME", "CONTENT"};
    cli_table *t = cli_table_new(5, headers);
    if (!t)
        return;
    /* Long ids and names are cut so the content keeps some room. */
    cli_table_cap(t, 0, 24);
    cli_table_cap(t, 1, 24);
    cli_table_cap(t, 2, 32);
    cli_table_right(t, 3);
    for (size_t i = 0; i < v->ncalls; i++)
        add_call_row(t, &v->calls[i]);
    cli_table_print(t, stdout, cli_term_width(STDOUT_FILENO), cli_term_color(STDOUT_FILENO));
    cli_table_free(t);
}

/* "3 calls in 1.52s: 2 ok, 1 tool_error" */
static void print_counts(const struct batch_view *v)
{
    size_t counts[OUTCOME_COUNT] = {0};
    for (size_t i = 0; i < v->ncalls; i++)
        counts[v->calls[i].outcome]++;
    char took[32];
    cli_format_ms(took, sizeof(took), v->t_end - v->t0);
    printf("%zu call%s in %s", v->ncalls, v->ncalls == 1 ? "" : "s", took);
    const char *sep = ": ";
    for (int o = OUTCOME_OK; o < OUTCOME_COUNT; o++) {
        if (!counts[o])
            continue;
        printf("%s%zu %s", sep, counts[o], outcome_names[o]);
        sep = ", ";
    }
    putchar('\n');
}

/* "batch b1 halted: tool_error at c2" */
static void print_halt(const struct batch_view *v)
{
    json_t *halt = json_object_get(v->terminal, "halt");
    if (!json_is_object(halt))
        return;
    const char *reason = json_string_value(json_object_get(halt, "halted_reason"));
    const char *at = json_string_value(json_object_get(halt, "halt_tool_call_id"));
    if (!at)
        at = json_string_value(json_object_get(halt, "pending_tool_call_id"));
    char line[512];
    snprintf(line, sizeof(line), "batch %s halted: %s%s%s", v->batch, reason ? reason : "?",
             at ? " at " : "", at ? at : "");
    char *clean = cli_text_clean(line);
    if (clean)
        puts(clean);
    free(clean);
}

static void print_report(const struct batch_view *v)
{
    if (v->ncalls)
        print_table(v);
    print_counts(v);
    print_halt(v);
    fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* toolexec run */

enum { OPT_POLICY = 256, OPT_TIMEOUT, OPT_CONCURRENCY, OPT_FORMAT, OPT_NARROW };

bool cli_parse_positive(const char *s, json_int_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v <= 0)
        return false;
    *out = (json_int_t)v;
    return true;
}

/* The options of run and call that become fields of the request. Returns
 * 1 when handled, 0 when opt is not one of them, an exit code < 0 on a bad
 * value. */
static int request_option(const char *cmd, int opt, const char *arg, json_t *fields)
{
    json_int_t n;
    switch (opt) {
    case 'b':
        json_object_set_new(fields, "batch", json_string(arg));
        return 1;
    case OPT_POLICY:
        if (!cli_one_of(arg, (const char *const[]){"continue", "halt", "ask", NULL}))
            return -cli_usage_error(cmd,
                                    "--on-tool-error: expected continue, halt or ask, "
                                    "not '%s'",
                                    arg);
        json_object_set_new(fields, "on_tool_error", json_string(arg));
        return 1;
    case OPT_FORMAT:
        if (te_format_parse(arg) < 0)
            return -cli_usage_error(cmd,
                                    "--result-format: expected openai, openai_responses "
                                    "or anthropic, not '%s'",
                                    arg);
        json_object_set_new(fields, "result_format", json_string(arg));
        return 1;
    case OPT_NARROW: /* --policy FILE: the batch's "policy" */
        return cli_policy_file(cmd, arg, fields);
    case OPT_TIMEOUT:
    case OPT_CONCURRENCY:
        if (!cli_parse_positive(arg, &n))
            return -cli_usage_error(cmd, "%s: expected a positive integer, not '%s'",
                                    opt == OPT_TIMEOUT ? "--tool-timeout" : "--max-concurrency",
                                    arg);
        json_object_set_new(fields, opt == OPT_TIMEOUT ? "tool_timeout" : "max_concurrency",
                            json_integer(n));
        return 1;
    }
    return 0;
}

/* Parse the options of run or call; fields collects request fields. Returns
 * -1 to go on, else the exit code. */
static int parse_batch_options(struct cli *cli, const char *cmd, int argc, char **argv,
                               const char *shortopts, const struct option *longopts, json_t *fields)
{
    int opt;
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (cli_common_option(cli, opt, optarg))
            continue;
        if (opt == 'h')
            return cli_help(cmd);
        int r = request_option(cmd, opt, optarg, fields);
        if (r < 0)
            return -r;
        if (r == 0)
            return cli_bad_option(cmd, opt, argv);
    }
    return -1;
}

/* Run req and, unless the output is JSON, report it with report (the
 * request's own refusal is reported the same way for run and call).
 * Returns the exit code. */
static int run_and_report(struct cli *cli, json_t *req, void (*report)(const struct batch_view *v))
{
    struct batch_view v;
    int rc = view_init(&v, cli, req);
    if (rc < 0) {
        view_free(&v);
        cli_err("out of memory");
        return CLI_EXIT_ERROR;
    }
    rc = run_batch(&v, req);
    if (rc == CLI_EXIT_OK) {
        rc = batch_status(&v);
        if (!v.json)
            (rc == CLI_EXIT_ERROR ? report_error : report)(&v);
        /* cancelled by Ctrl-C: what a shell reports for SIGINT, so scripts
         * (and `set -e`) see an interruption, not a failed call */
        if (v.cancel_sent)
            rc = CLI_EXIT_INTERRUPTED;
    }
    view_free(&v);
    return rc;
}

int cli_cmd_run(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"batch", required_argument, NULL, 'b'},
        {"on-tool-error", required_argument, NULL, OPT_POLICY},
        {"tool-timeout", required_argument, NULL, OPT_TIMEOUT},
        {"max-concurrency", required_argument, NULL, OPT_CONCURRENCY},
        {"result-format", required_argument, NULL, OPT_FORMAT},
        {"policy", required_argument, NULL, OPT_NARROW},
        {0},
    };
    json_t *fields = json_object();
    int rc = parse_batch_options(cli, "run", argc, argv, ":s:jhb:", opts, fields);
    if (rc >= 0) {
        json_decref(fields);
        return rc;
    }
    if (argc - optind > 1) {
        json_decref(fields);
        return cli_usage_error("run", "one batch at a time: unexpected '%s'", argv[optind + 1]);
    }
    const char *path = optind < argc ? argv[optind] : NULL;
    /* Raw JSON for pipes and files: what a script or jq wants. */
    if (!isatty(STDOUT_FILENO))
        cli->json = true;
    if ((!path || strcmp(path, "-") == 0) && isatty(STDIN_FILENO))
        cli_err("reading the batch from standard input; end it with Ctrl-D");
    char err[1024];
    json_t *req = cli_input_load(path, err, sizeof(err));
    if (!req) {
        json_decref(fields);
        cli_err("%s", err);
        return CLI_EXIT_ERROR;
    }
    json_object_update(req, fields);
    json_decref(fields);
    rc = run_and_report(cli, req, print_report);
    json_decref(req);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* toolexec call */

static json_t *load_arguments(const char *text, char *err, size_t errlen)
{
    json_error_t jerr;
    int flags = JSON_REJECT_DUPLICATES | JSON_DECODE_ANY;
    json_t *args = strcmp(text, "-") == 0 ? cli_json_loadf(stdin, flags, &jerr)
                                          : te_json_loads(text, flags, &jerr);
    if (!args) {
        snprintf(err, errlen, "ARGS-JSON is not valid JSON (column %d): %s", jerr.column,
                 jerr.text);
        return NULL;
    }
    if (!json_is_object(args) && !json_is_null(args)) {
        json_decref(args);
        snprintf(err, errlen, "ARGS-JSON must be a JSON object, such as '{\"x\": 1}'");
        return NULL;
    }
    return args;
}

/* Why a call failed (hidden unless -j before): the error's
 * message, and the traceback or the tool's stderr when the cause has one. */
static void note_cause(const json_t *te)
{
    const char *message = json_string_value(json_object_get(te, "message"));
    json_t *cause = json_object_get(te, "cause");
    static const char *const keys[] = {"exec_error", "stacktrace", "stderr"};
    char *m = message ? cli_text_clean(message) : NULL;
    if (m)
        cli_err("  %s", m);
    free(m);
    json_t *raised = json_object_get(cause, "message");
    if (json_is_string(raised) && (m = cli_text_clean(json_string_value(raised)))) {
        cli_err("  raised %s: %s", json_string_value(json_object_get(cause, "type")) ?: "?", m);
        free(m);
    }
    for (size_t k = 0; k < sizeof(keys) / sizeof(*keys); k++) {
        const char *text = json_string_value(json_object_get(cause, keys[k]));
        if (!text || !*text)
            continue;
        fprintf(stderr, "  %s:\n", keys[k]);
        /* line by line, each cleaned of terminal escapes */
        const char *p = text;
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            char *line = strndup(p, n);
            char *clean = line ? cli_text_clean(line) : NULL;
            fprintf(stderr, "    %s\n", clean ? clean : "");
            free(clean);
            free(line);
            p += n + (nl != NULL);
        }
    }
}

/* What a person should know besides the content, on stderr. */
static void note_outcome(const struct call_view *cv)
{
    char *q = cv->preview ? cli_text_clean(cv->preview) : NULL;
    switch (cv->outcome) {
    case OUTCOME_ERROR:
        cli_err("%s returned an error", cv->name);
        break;
    case OUTCOME_TOOL_ERROR:
        cli_err("%s failed: %s", cv->name, cv->detail ? cv->detail : "tool_error");
        note_cause(cv->tool_error);
        break;
    case OUTCOME_ASK_USER:
        cli_err("%s asks the user: %s", cv->name, q ? q : "");
        break;
    case OUTCOME_HALT:
        cli_err("%s halted the batch: %s", cv->name, cv->detail ? cv->detail : "?");
        break;
    default:
        break;
    }
    free(q);
}

/* The call's content as it goes back to the model, as it is: stdout is data
 * here, like cat's. */
static void print_content(const struct batch_view *v)
{
    json_t *msg = json_array_get(json_object_get(v->terminal, "messages"), 0);
    const char *content = json_string_value(json_object_get(msg, "content"));
    if (!content)
        return;
    size_t n = strlen(content);
    fwrite(content, 1, n, stdout);
    if (n && content[n - 1] != '\n')
        putchar('\n');
    fflush(stdout);
}

static void report_call(const struct batch_view *v)
{
    print_content(v);
    if (v->ncalls)
        note_outcome(&v->calls[0]);
}

int cli_cmd_call(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"tool-timeout", required_argument, NULL, OPT_TIMEOUT},
        {"policy", required_argument, NULL, OPT_NARROW},
        {0},
    };
    json_t *fields = json_object();
    int rc = parse_batch_options(cli, "call", argc, argv, ":s:jh", opts, fields);
    if (rc < 0 && optind >= argc)
        rc = cli_usage_error("call", "which tool? (toolexec tools lists them)");
    if (rc < 0 && argc - optind > 2)
        rc = cli_usage_error("call", "unexpected '%s' after the arguments (quote the JSON)",
                             argv[optind + 2]);
    char err[512];
    json_t *args = NULL;
    if (rc < 0 && optind + 1 < argc && !(args = load_arguments(argv[optind + 1], err, sizeof(err))))
        rc = cli_usage_error("call", "%s", err);
    if (rc >= 0) {
        json_decref(fields);
        return rc;
    }
    json_t *req = json_pack("{s:s,s:[{s:s,s:s,s:o}]}", "op", "run", "calls", "id", "c0", "name",
                            argv[optind], "arguments", args ? args : json_object());
    if (!req) {
        json_decref(fields);
        return cli_usage_error("call", "the tool name is not valid UTF-8");
    }
    json_object_update(req, fields);
    json_decref(fields);
    rc = run_and_report(cli, req, report_call);
    json_decref(req);
    return rc;
}
