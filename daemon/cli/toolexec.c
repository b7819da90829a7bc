/*
 * toolexec.c - the toolexec command-line client: global options, finding and
 * reaching the daemon's socket, help texts, and dispatch to the commands.
 *
 *   toolexec [--socket PATH] COMMAND [OPTIONS] [ARGS]
 *
 * Global options may come before the command; every command also accepts
 * them after it, and options may follow operands (toolexec run b.json --json).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef TE_CLI_VERSION
#define TE_CLI_VERSION "unknown"
#endif

/* Where the packaged service listens (contrib/systemd/toolexecd.socket). */
struct cli_command {
    const char *name;
    int (*run)(struct cli *cli, int argc, char **argv);
    const char *help;
};

static const struct cli_command commands[] = {
    {"run", cli_cmd_run,
     "usage: toolexec run [OPTIONS] [FILE|-]\n"
     "\n"
     "Send the batch in FILE (default: standard input) and show what it did: on\n"
     "a terminal a live progress line, then a table of results; otherwise the raw\n"
     "JSON lines of every event. FILE holds a run request, an array of calls, or\n"
     "tool calls as an LLM API emits them (OpenAI, Anthropic, Gemini).\n"
     "\n"
     "  -j, --json                 JSON lines even on a terminal\n"
     "  -b, --batch ID             the batch id (replaces the input's)\n"
     "      --on-tool-error continue|halt|ask\n"
     "                             what an error does to the batch (ask: you\n"
     "                             decide each one at the terminal)\n"
     "      --tool-timeout MS      timeout of each call, in milliseconds\n"
     "      --max-concurrency N    most workers of this batch at once\n"
     "      --result-format openai|openai_responses|anthropic\n"
     "                             the shape of the batch's messages (default:\n"
     "                             that of the input's LLM tool calls)\n"
     "  -s, --socket PATH          the daemon's socket\n"
     "  -h, --help                 this text\n"
     "\n"
     "Ctrl-C cancels the batch and waits for it to complete; a second Ctrl-C\n"
     "quits at once.\n"},
    {"call", cli_cmd_call,
     "usage: toolexec call [OPTIONS] NAME [ARGS-JSON|-]\n"
     "\n"
     "Run the tool NAME once with the arguments ARGS-JSON (a JSON object; default\n"
     "{}; - reads it from standard input) and print the call's content: what\n"
     "would go back to the model.\n"
     "\n"
     "  -j, --json                 print the batch's raw JSON events instead\n"
     "      --tool-timeout MS      timeout of the call, in milliseconds\n"
     "  -s, --socket PATH          the daemon's socket\n"
     "  -h, --help                 this text\n"},
    {"tools", cli_cmd_tools,
     "usage: toolexec tools [OPTIONS]\n"
     "\n"
     "List the tools the daemon has loaded.\n"
     "\n"
     "  -j, --json                 print the tools array as JSON\n"
     "  -f, --format API           print them as JSON for an LLM API: openai,\n"
     "                             openai_responses, anthropic or mcp\n"
     "  -s, --socket PATH          the daemon's socket\n"
     "  -h, --help                 this text\n"},
    {"stats", cli_cmd_stats,
     "usage: toolexec stats [OPTIONS]\n"
     "\n"
     "Show the daemon's uptime, workers, clients and per-tool counters and\n"
     "latencies.\n"
     "\n"
     "  -j, --json                 print the stats event as JSON\n"
     "  -s, --socket PATH          the daemon's socket\n"
     "  -h, --help                 this text\n"},
    {"tail", cli_cmd_tail,
     "usage: toolexec tail [OPTIONS]\n"
     "\n"
     "Follow the events of every batch on the daemon, one line each, until\n"
     "interrupted.\n"
     "\n"
     "  -t, --tools NAME[,NAME...]   only calls of these tools\n"
     "  -b, --batches ID[,ID...]     only these batches\n"
     "  -j, --json                   the raw JSON lines\n"
     "  -s, --socket PATH            the daemon's socket\n"
     "  -h, --help                   this text\n"},
    {"audit", cli_cmd_audit,
     "usage: toolexec audit verify [--head HASH] FILE...\n"
     "\n"
     "Check the hash chain of toolexecd's audit file (--audit-file): each\n"
     "record's prev_sha256 must be the SHA-256 of the line before it. Give\n"
     "rotated files oldest first; they chain across. Prints each place the\n"
     "chain breaks or is cut (FILE:LINE and what was expected); exits 0 only\n"
     "when every chain is intact, 1 when one is not, 2 when a file cannot be\n"
     "read. A chain_break record (the daemon found records cut off the tail\n"
     "when it reopened the file) is a problem. Needs no daemon.\n"
     "\n"
     "      --head HASH            a chain head the daemon logged (\"audit file\n"
     "                             ...: chain head HASH\"): some line must hash\n"
     "                             to it, else records were cut off the tail\n"
     "  -h, --help                 this text\n"},
    {"learn", cli_cmd_learn,
     "usage: toolexec learn [OPTIONS] TOOL [FILE]\n"
     "\n"
     "What the calls of TOOL, a tool in learn mode (\"learn\": true), touched\n"
     "since it was loaded, as a proposed definition fragment: its \"filesystem\"\n"
     "read and write paths, its \"network\" allow-list and, when it made system\n"
     "calls the default filter refuses, \"syscalls\" and \"deny_syscalls\". With\n"
     "FILE: the tool's whole definition, \"learn\" removed and the proposal\n"
     "applied, written there (a tools directory's file loads as it is).\n"
     "\n"
     "  -j, --json                 print the daemon's answer as JSON\n"
     "  -s, --socket PATH          the daemon's socket\n"
     "  -h, --help                 this text\n"},
    {"mcp", cli_cmd_mcp,
     "usage: toolexec mcp [OPTIONS]\n"
     "\n"
     "Serve the daemon's tools to an MCP host: a Model Context Protocol server\n"
     "on standard input and output (JSON-RPC 2.0, one message per line). Calls\n"
     "run concurrently; a tool that fails answers with \"isError\": true. The\n"
     "end of standard input cancels the calls still running and exits 0.\n"
     "\n"
     "  -s, --socket PATH          the daemon's socket\n"
     "      --tool-timeout MS      timeout of each call, in milliseconds\n"
     "      --listen HOST:PORT     serve MCP over HTTP at http://HOST:PORT/mcp instead\n"
     "                             (Streamable HTTP; loopback only without --resource)\n"
     "      --listen-remote        let --listen take another address: no client\n"
     "                             is authenticated\n"
     "      --resource URL         this server's URL: bearer tokens issued for it\n"
     "                             are needed (an OAuth 2.1 resource server)\n"
     "      --oauth-issuer URL     accept the JWTs of this authorization server\n"
     "      --oauth-ca FILE        CA certificates for the issuer's HTTPS\n"
     "      --bearer-tokens DIR    static tokens: one file each, named by its subject\n"
     "      --allow-origin ORIGIN  a browser page's origin that may reach it\n"
     "      --max-body, --max-header, --connections, --http-timeout, --sessions,\n"
     "      --session-idle, --keepalive   limits of --listen (toolexec(1))\n"
     "      --drain-timeout S      SIGTERM: running calls may finish for S seconds\n"
     "                             (default 30; 0: exit at once); /ready, /healthz\n"
     "      --daemon-batches N     calls run at once on one daemon connection, more\n"
     "                             wait (default: the daemon's --max-client-batches\n"
     "                             as its capacity answer says with --listen; 64)\n"
     "      --tools-wait S         a call waits this long for the daemon's tool\n"
     "                             listing, then fails (default 30)\n"
     "  -h, --help                 this text\n"
     "\n"
     "In an MCP host's configuration: {\"command\": \"toolexec\", \"args\": [\"mcp\"]}\n"},
    {"mcp-add", cli_cmd_mcp_add,
     "usage: toolexec mcp-add NAME --npm PACKAGE[@VERSION] [OPTIONS] [-- ARGS]\n"
     "       toolexec mcp-add NAME --pypi PACKAGE[==VERSION] [OPTIONS] [-- ARGS]\n"
     "       toolexec mcp-add NAME --url URL [--header NAME=CREDENTIAL]... [OPTIONS]\n"
     "\n"
     "Install an MCP server (stdio) from the npm registry, or from a package\n"
     "tarball's path, into PREFIX/NAME with npm install --prefix (or from PyPI, or\n"
     "a wheel's path, into a virtual environment PREFIX/NAME with pip), and write\n"
     "the \"mcp_server\" definition that runs it (node and the package's bin, or\n"
     "the distribution's console script; ARGS after them, instance call, the\n"
     "install directory in its view) to DIR/NAME.json once the daemon's --check\n"
     "takes it. Its tools are NAME.TOOL after the daemon's next reload. npm and\n"
     "pip run here only: its calls never do.\n"
     "\n"
     "      --npm PACKAGE[@VERSION]  what npm installs (a name, or a .tgz path)\n"
     "      --pypi PACKAGE[==VERSION]  what pip installs (a name, or a .whl path)\n"
     "      --prefix PREFIX     where it goes (default /opt/toolexecd/mcp)\n"
     "      --dir DIR           the tools directory (default /etc/toolexecd/tools.d)\n"
     "      --node PATH         the node that runs it (default: node on PATH)\n"
     "      --python PATH       the Python that makes the environment (default\n"
     "                          /usr/bin/python3)\n"
     "      --module MODULE     run python -m MODULE, not a console script\n"
     "      --bin NAME          which of the package's programs, when it has several\n"
     "      --read PATH         also visible to its calls, read-only (repeatable)\n"
     "      --write PATH        writable by its calls (repeatable)\n"
     "      --scripts           let npm run the packages' install scripts\n"
     "      --force             replace DIR/NAME.json\n"
     "  -h, --help              this text\n"
     "\n"
     "With --url, a server at a URL (Streamable HTTP): nothing installed; its\n"
     "definition names the URL (the daemon allows its host), and each --header\n"
     "a credential the egress proxy adds to each request to that host.\n"
     "      --url URL           https://, or http:// to a loopback address\n"
     "      --header NAME=CREDENTIAL  the header NAME, its value the file\n"
     "                          CREDENTIAL of the daemon's credentials directory\n"
     "      --credentials-dir DIR  that directory, for --check (default the\n"
     "                          daemon's)\n"
     "\n"
     "Exit status: 0 written; 2 bad usage, npm or pip failed or --check refused it\n"
     "(nothing written then). See toolexec(1).\n"},
    {"sandbox", cli_cmd_sandbox,
     "usage: toolexec sandbox [OPTIONS] -- COMMAND [ARGS]\n"
     "\n"
     "Run one command with the confinement a tool's call gets, without a daemon:\n"
     "the default view (the host read-only, secrets hidden, a private /tmp and\n"
     "directory, its HOME), no network, the system-call filter, a PID namespace.\n"
     "It starts in the current directory, which it sees read-only unless --write\n"
     "names it; relative paths name what is there. Standard input, output and\n"
     "error (a terminal too) are the command's.\n"
     "\n"
     "      --read PATH        also visible, read-only (repeatable)\n"
     "      --write PATH       writable (repeatable)\n"
     "      --hide PATH        not visible (repeatable)\n"
     "      --net off|host|HOST[:PORT],...\n"
     "                         no network (default), the host's, or only these\n"
     "                         hosts through the egress proxy (HTTP_PROXY)\n"
     "      --timeout SECONDS  kill the command after this long\n"
     "      --memory SIZE      memory limit: MiB, or with K, M or G\n"
     "      --syscalls default|off  the system-call filter\n"
     "      --deny-syscall NAME     also deny this system call (repeatable)\n"
     "      --user NAME        as root: run as NAME (default toolexec, else nobody)\n"
     "      --json[=FILE]      a JSON summary (status, denials, usage) on stderr\n"
     "      --learn FILE       learn mode: run permissively, record what it\n"
     "                         touches, write the definition it needs to FILE\n"
     "      --learn-refused FILE  run confined as the options say; write them to\n"
     "                         FILE widened by what was refused (as root)\n"
     "  -v, --verbose          say how the sandbox is built\n"
     "  -h, --help             this text\n"
     "\n"
     "What it denied (system calls, network) is listed on stderr at the end.\n"
     "Exit status: the command's; 128+N when signal N killed it; 124 after\n"
     "--timeout; 125 for a bad option or a sandbox that could not be set up;\n"
     "126 or 127 when COMMAND cannot be run. See toolexec(1).\n"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: toolexec [OPTIONS] COMMAND [ARGS]\n"
               "\n"
               "Send tool calls to toolexecd and show what they did.\n"
               "\n"
               "Commands:\n"
               "  run [FILE|-]           run a batch and show its results\n"
               "  call NAME [ARGS-JSON]  run one call and print its content\n"
               "  tools                  list the daemon's tools\n"
               "  stats                  show the daemon's counters\n"
               "  tail                   follow the events of every batch\n"
               "  learn TOOL [FILE]      what a tool in learn mode proposes\n"
               "  mcp                    serve the tools to an MCP host on stdin/stdout\n"
               "  mcp-add NAME --npm PKG install an MCP server (or --pypi), write its definition\n"
               "  audit verify FILE...   check the audit file's hash chain\n"
               "  sandbox -- CMD [ARGS]  run one command confined, without a daemon\n"
               "  help [COMMAND]         show help for a command\n"
               "\n"
               "Options:\n"
               "  -s, --socket PATH      the daemon's socket (default $TOOLEXECD_SOCKET, else\n"
               "                         $XDG_RUNTIME_DIR/toolexecd.sock; for root\n"
               "                         " CLI_SYSTEM_SOCKET "; without XDG_RUNTIME_DIR,\n"
               "                         /run/user/UID, then the quickstart's\n"
               "                         ${TMPDIR:-/tmp}/toolexecd-UID)\n"
               "  -j, --json             JSON output\n"
               "  -h, --help             this text\n"
               "  -V, --version          the version\n"
               "\n"
               "Exit status: 0 every call ok; 1 a call failed or the batch halted;\n"
               "2 bad usage or input, or a request or engine error; 3 toolexecd could\n"
               "not be reached. See toolexec(1).\n");
}

static const struct cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* What cli_help prints for a command (common.c asks, through
 * cli_set_help). */
static const char *help_of(const char *cmd)
{
    const struct cli_command *c = find_command(cmd);
    return c ? c->help : NULL;
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!find_command(argv[1]))
        return cli_usage_error(NULL, "no command '%s'", argv[1]);
    return cli_help(argv[1]);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {0},
    };
    struct cli cli = {0};
    int opt;

    cli_set_help(help_of);
    opterr = 0; /* our own messages, which say what to try */
    /* "+": stop at the command; its own options are parsed by it. */
    while ((opt = getopt_long(argc, argv, "+:s:jhV", opts, NULL)) != -1) {
        if (cli_common_option(&cli, opt, optarg))
            continue;
        switch (opt) {
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        case 'V':
            printf("toolexec %s (jansson %s)\n", TE_CLI_VERSION, jansson_version_str());
            return CLI_EXIT_OK;
        default:
            return cli_bad_option(NULL, opt, argv);
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return CLI_EXIT_ERROR;
    }
    const char *name = argv[optind];
    if (strcmp(name, "help") == 0)
        return cmd_help(argc - optind, argv + optind);
    const struct cli_command *cmd = find_command(name);
    if (!cmd)
        return cli_usage_error(NULL, "unknown command '%s'", name);
    argc -= optind;
    argv += optind;
    optind = 0; /* glibc: start afresh on the command's own arguments */
    /* sandbox shows no text of ours: its locale files would be loaded for
     * nothing at each run (the engine runs in the C locale) */
    if (cmd->run != cli_cmd_sandbox)
        cli_term_init();
    return cmd->run(&cli, argc, argv);
}
