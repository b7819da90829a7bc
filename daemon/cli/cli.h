/*
 * cli.h - the toolexec command-line client: shared declarations.
 *
 *   toolexec.c  options, the socket, connecting, exit codes, dispatch
 *   input.c     reading a batch: a run request, a calls array or LLM tool calls
 *   run.c       run and call: send a batch, follow it, report it
 *   decide.c    on_tool_error "ask": the person at the terminal decides
 *   info.c      tools, stats and tail
 *   audit.c     audit verify: the audit file's hash chain
 *   info.c      tools, stats, tail and learn
 *   term.c      terminal text: widths, sanitising, tables, durations
 *   mcp.c       toolexec mcp: a Model Context Protocol server over stdio
 *               (its parts: mcp_int.h)
 *   serveradd.c mcp-add: an MCP server installed, its definition written
 *   mcp_auth*.c the MCP HTTP front's authorization: bearer tokens (JWTs
 *               checked against the issuer's keys, static tokens), RFC 9728
 *               metadata, 401/403 answers (its parts and API: mcp_auth.h)
 */
#ifndef CLI_H
#define CLI_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "toolexec.h"

/* Exit codes, documented in toolexec(1). */
/* Where the packaged service listens (contrib/systemd/toolexecd.socket). */
#define CLI_SYSTEM_SOCKET "/run/toolexecd/toolexecd.sock"

enum {
    CLI_EXIT_OK = 0,            /* every call ok */
    CLI_EXIT_FAILED = 1,        /* a call failed, or the batch halted */
    CLI_EXIT_ERROR = 2,         /* usage, bad input, a request or engine error */
    CLI_EXIT_CONNECT = 3,       /* the daemon cannot be reached */
    CLI_EXIT_INTERRUPTED = 130, /* Ctrl-C cancelled the batch (128 + SIGINT, as shells report) */
};

/* Settings shared by every command. */
struct cli {
    const char *socket_path; /* NULL until resolved by cli_connect() */
    bool json;               /* --json: raw JSON lines, whatever stdout is */
};

/* "toolexec: MESSAGE\n" on stderr. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Connect to the daemon; on failure explain what to check and return NULL
 * (the caller exits CLI_EXIT_CONNECT). */
te_client *cli_connect(struct cli *cli);
/* The same, non-blocking (te_client_connect_nb) with a send queue of
 * queue_max bytes; 0: blocking. */
te_client *cli_connect_nb(struct cli *cli, size_t queue_max);
/* Long options every command accepts; their short forms are "s:jh". */
/* clang-format off */
#define CLI_COMMON_OPTIONS                                                  \
    {"socket", required_argument, NULL, 's'},                                  \
    {"json", no_argument, NULL, 'j'},                                          \
    {"help", no_argument, NULL, 'h'}
/* clang-format on */
/* Options every command accepts: --socket, --json. True when handled. */
bool cli_common_option(struct cli *cli, int opt, const char *arg);
/* The options of a command that takes only the common ones (getopt_long
 * over argv, optind left at its first operand): -1 to go on, else the
 * exit code (--help, a bad option). */
int cli_only_common_options(struct cli *cli, const char *cmd, int argc, char **argv);
/* Print a command's help on stdout; returns CLI_EXIT_OK. */
int cli_help(const char *cmd);
/* Where cli_help finds a command's help text (toolexec.c's table). */
void cli_set_help(const char *(*fn)(const char *cmd));
/* "toolexec: MESSAGE" and a pointer to --help on stderr; returns
 * CLI_EXIT_ERROR. cmd is NULL for the global options. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Is s one of set's (NULL-terminated)? */
bool cli_one_of(const char *s, const char *const *set);
/* --policy FILE: its JSON object as the request's "policy" (the daemon
 * checks its keys); 1, or minus an exit code after a usage error. */
int cli_policy_file(const char *cmd, const char *path, json_t *fields);
/* The complaint for getopt's '?' or ':' (opterr is off). */
int cli_bad_option(const char *cmd, int opt, char **argv);
/* Send a request; on failure say so and return CLI_EXIT_CONNECT. */
int cli_send(const struct cli *cli, te_client *c, const json_t *req);
/* Say that sending failed (rc: minus errno); returns CLI_EXIT_CONNECT. */
int cli_send_failed(const struct cli *cli, int rc);
/* Say that the daemon hung up or sent garbage; returns CLI_EXIT_ERROR. */
int cli_recv_failed(const struct cli *cli, int rc, const char *what);
/* Print one event as a compact JSON line and flush it (for jq and pipes). */
void cli_print_json(const json_t *ev);
/* json_loadf() that keeps numbers as written (te_json_loadb()). */
json_t *cli_json_loadf(FILE *f, size_t flags, json_error_t *err);

/* Commands: each parses its own arguments (argv[0] is the command name) and
 * returns the process exit code. */
/* A whole decimal number above 0 (option values). */
bool cli_parse_positive(const char *s, json_int_t *out);
int cli_cmd_run(struct cli *cli, int argc, char **argv);
int cli_cmd_call(struct cli *cli, int argc, char **argv);
int cli_cmd_tools(struct cli *cli, int argc, char **argv);
/* mcp.c: a Model Context Protocol server over stdio, forwarding to the daemon */
int cli_cmd_mcp(struct cli *cli, int argc, char **argv);
int cli_cmd_stats(struct cli *cli, int argc, char **argv);
int cli_cmd_tail(struct cli *cli, int argc, char **argv);
/* audit.c: audit verify FILE... */
int cli_cmd_audit(struct cli *cli, int argc, char **argv);
/* info.c: a learning tool's proposal (toolexecd.tools(5), LEARN MODE) */
int cli_cmd_learn(struct cli *cli, int argc, char **argv);
/* sandbox.c: execs toolexecd --sandbox-run; returns only when it cannot */
int cli_cmd_sandbox(struct cli *cli, int argc, char **argv);
/* sandbox.c: the daemon's program: $TOOLEXECD, else beside us in a build
 * tree (daemon/cli/..), else installed, else on PATH (in buf or not) */
const char *cli_find_daemon(char *buf, size_t len);
/* serveradd.c: mcp-add, an MCP server installed with npm and its
 * definition written (toolexecd.tools(5), MCP SERVERS) */
int cli_cmd_mcp_add(struct cli *cli, int argc, char **argv);

/* run.c: "ok", "error", "tool_error timeout", "ask_user", "halt REASON"
 * for a call's result object. */
void cli_outcome_text(const json_t *result, char *buf, size_t len);

/* term.c: erase the progress line, if one is on the screen (before other
 * output); cli_progress_on_screen is set while one is (also read in a
 * signal handler). */
void cli_clear_progress(void);
extern volatile sig_atomic_t cli_progress_on_screen;

/* decide.c: answer a tool_error_decision_requested event of batch (the
 * run request's on_tool_error is "ask") about a call of tool. With ask
 * false, or without a terminal to ask on, nobody answers and the call's
 * timeout decides. */
void cli_decide(const struct cli *cli, te_client *c, const char *batch, const json_t *ev,
                const char *tool, bool ask);

/* input.c */
/* Read a batch from path ("-" or NULL: stdin) and return a run request
 * object ({"op": "run", "calls": [...], ...}); NULL with a message in err. */
json_t *cli_input_load(const char *path, char *err, size_t errlen);
/* A call's id and name, whatever its shape (NULL when it has none). */
void cli_call_identity(const json_t *call, const char **id, const char **name);
/* Turn a run request, a calls array or LLM-shaped tool calls into a run
 * request (new reference); NULL with a message in err. */
json_t *cli_input_to_request(json_t *in, char *err, size_t errlen);

/* term.c */
void cli_term_init(void);
/* Whether the locale's character set is UTF-8 (else output stays ASCII). */
bool cli_term_utf8(void);
/* Columns of the terminal on fd, or 0 when fd is not a terminal. */
size_t cli_term_width(int fd);
/* Whether to colour output on fd: a terminal, NO_COLOR unset, TERM not dumb. */
bool cli_term_color(int fd);
/* A copy of s fit for one terminal line: control characters (escape
 * sequences included) and runs of white space become one space, text that
 * is not valid or not displayable becomes '?'. */
char *cli_text_clean(const char *s);
/* Display width of a string returned by cli_text_clean(). */
size_t cli_text_width(const char *s);
/* A copy of clean text cut to at most width columns, with an ellipsis when
 * it had to be cut. */
char *cli_text_fit(const char *s, size_t width);
/* A duration for people: "2.5ms", "12ms", "1.52s", "2m03s", "3h07m", "2d04h". */
void cli_format_ms(char *buf, size_t len, double ms);

/* A table of text cells printed with aligned columns. The last column takes
 * what is left of the line and is cut to fit. */
typedef struct cli_table cli_table;
cli_table *cli_table_new(size_t ncols, const char *const *headers);
/* Right-align a column (numbers). */
void cli_table_right(cli_table *t, size_t col);
/* Cut a column's cells to at most max columns (0: no limit). */
void cli_table_cap(cli_table *t, size_t col, size_t max);
/* Add a row of ncols cells (copied, cleaned); color[i] is an SGR parameter
 * such as "32" or NULL. Returns -ENOMEM on failure. */
int cli_table_add(cli_table *t, const char *const *cells, const char *const *color);
/* width 0: no line limit (not a terminal). */
void cli_table_print(const cli_table *t, FILE *f, size_t width, bool color);
void cli_table_free(cli_table *t);

#endif
