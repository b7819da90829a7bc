/*
 * common.c - what every toolexec command shares: messages and usage
 * errors, the common options, and finding, reaching and talking to the
 * daemon's socket. Below the commands; the help texts come from above
 * (toolexec.c) through cli_set_help.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static char socket_buf[PATH_MAX];

void cli_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("toolexec: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static const char *(*help_of)(const char *cmd);

void cli_set_help(const char *(*fn)(const char *cmd))
{
    help_of = fn;
}

int cli_help(const char *cmd)
{
    const char *h = help_of ? help_of(cmd) : NULL;
    if (h)
        fputs(h, stdout);
    return CLI_EXIT_OK;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("toolexec: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'toolexec%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    va_end(ap);
    return CLI_EXIT_ERROR;
}

int cli_bad_option(const char *cmd, int opt, char **argv)
{
    if (opt == ':')
        return cli_usage_error(cmd, "option %s needs a value", argv[optind - 1]);
    if (optopt) /* an unknown short option, perhaps inside a cluster */
        return cli_usage_error(cmd, "unknown option -%c", optopt);
    return cli_usage_error(cmd, "unknown option %s", argv[optind - 1]);
}

bool cli_common_option(struct cli *cli, int opt, const char *arg)
{
    if (opt == 's')
        cli->socket_path = arg;
    else if (opt == 'j')
        cli->json = true;
    else
        return false;
    return true;
}

int cli_only_common_options(struct cli *cli, const char *cmd, int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS, {0}};
    int opt;
    while ((opt = getopt_long(argc, argv, ":s:jh", opts, NULL)) != -1) {
        if (cli_common_option(cli, opt, optarg))
            continue;
        if (opt == 'h')
            return cli_help(cmd);
        return cli_bad_option(cmd, opt, argv);
    }
    return -1;
}

json_t *cli_json_loadf(FILE *f, size_t flags, json_error_t *err)
{
    /* Read it all, then te_json_loadb(): jansson's json_loadf() would refuse
     * integers beyond 64 bits and round reals. */
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (len == cap) {
            char *p = realloc(buf, cap = cap ? cap * 2 : 4096);
            if (!p) {
                free(buf);
                snprintf(err->text, sizeof(err->text), "out of memory");
                err->line = err->column = -1;
                return NULL;
            }
            buf = p;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    json_t *v = te_json_loadb(buf ? buf : "", len, flags, err);
    free(buf);
    return v;
}

void cli_print_json(const json_t *ev)
{
    char *s = te_json_dumps(ev, 0, NULL);
    if (s) {
        puts(s);
        free(s);
    }
    fflush(stdout); /* a consumer such as jq sees each event as it comes */
}

/* The socket: --socket, then $TOOLEXECD_SOCKET, then the daemon's own
 * default, so that a toolexec and a toolexecd started alike meet. */
static bool socket_fallback; /* no XDG_RUNTIME_DIR: a guessed default */

/* contrib/quickstart.sh's socket where XDG_RUNTIME_DIR is not set:
 * ${TMPDIR:-/tmp}/toolexecd-UID/toolexecd.sock. Taken only when the
 * directory is ours and no one else may write to it: under a shared /tmp,
 * another user could have made it first to catch our calls. */
static bool quickstart_socket(char *buf, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    char dir[PATH_MAX];
    int n = snprintf(dir, sizeof(dir), "%s/toolexecd-%u", tmp, (unsigned)geteuid());
    struct stat st;
    if (n < 0 || (size_t)n >= sizeof(dir) || lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid() || (st.st_mode & 022))
        return false;
    n = snprintf(buf, len, "%s/toolexecd.sock", dir);
    return n > 0 && (size_t)n < len && access(buf, F_OK) == 0;
}

static const char *resolve_socket(struct cli *cli)
{
    if (cli->socket_path)
        return cli->socket_path;
    const char *env = getenv("TOOLEXECD_SOCKET");
    if (env && *env)
        return cli->socket_path = env;
    int rc = te_default_socket_path(socket_buf, sizeof(socket_buf));
    if (rc == -ENOENT) {
        /* An MCP host starts its servers with a bare environment: the
         * user's runtime directory where logind makes it, then the
         * quickstart's directory (su -, ssh without pam_systemd,
         * containers), then the system service's socket. */
        snprintf(socket_buf, sizeof(socket_buf), "/run/user/%u/toolexecd.sock",
                 (unsigned)geteuid());
        if (access(socket_buf, F_OK) != 0 && !quickstart_socket(socket_buf, sizeof(socket_buf)))
            snprintf(socket_buf, sizeof(socket_buf), "%s", CLI_SYSTEM_SOCKET);
        socket_fallback = true;
        return cli->socket_path = socket_buf;
    }
    if (rc < 0) {
        cli_err("cannot work out the default socket: %s; pass --socket PATH", strerror(-rc));
        return NULL;
    }
    return cli->socket_path = socket_buf;
}

static const char *dash(void)
{
    return cli_term_utf8() ? "\u2014" : "--";
}

static void explain_connect_error(const char *path, int err)
{
    if (socket_fallback)
        cli_err("XDG_RUNTIME_DIR is not set: tried /run/user/%u/toolexecd.sock, "
                "%s/toolexecd-%u/toolexecd.sock (contrib/quickstart.sh's), then "
                "%s; pass --socket PATH or set TOOLEXECD_SOCKET",
                (unsigned)geteuid(),
                getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                (unsigned)geteuid(), path);
    if (err == EACCES || err == EPERM) {
        cli_err("cannot connect to %s: %s %s is your user in the socket's group? "
                "(ls -l %s; toolexecd --socket-group) Set --socket or TOOLEXECD_SOCKET.",
                path, strerror(err), dash(), path);
        return;
    }
    if (err == EAGAIN) {
        cli_err("cannot connect to %s: toolexecd is not accepting connections now (its listen "
                "backlog is full)",
                path);
        return;
    }
    if (err == ENAMETOOLONG) {
        cli_err("cannot connect to %s: the path is longer than a Unix socket allows "
                "(107 bytes)",
                path);
        return;
    }
    cli_err("cannot connect to %s: %s %s is toolexecd running? (systemctl status "
            "toolexecd.socket) Set --socket or TOOLEXECD_SOCKET.",
            path, strerror(err), dash());
    /* A user whose default is under XDG_RUNTIME_DIR while the system
     * service listens elsewhere: point at it. */
    if (strcmp(path, CLI_SYSTEM_SOCKET) != 0 && access(CLI_SYSTEM_SOCKET, F_OK) == 0)
        cli_err("the system service's socket exists: try --socket " CLI_SYSTEM_SOCKET);
}

te_client *cli_connect(struct cli *cli)
{
    return cli_connect_nb(cli, 0);
}

te_client *cli_connect_nb(struct cli *cli, size_t queue_max)
{
    const char *path = resolve_socket(cli);
    if (!path)
        return NULL;
    te_client *c;
    int rc = queue_max ? te_client_connect_nb(path, queue_max, &c) : te_client_connect(path, &c);
    if (rc < 0) {
        explain_connect_error(path, -rc);
        return NULL;
    }
    return c;
}

int cli_recv_failed(const struct cli *cli, int rc, const char *what)
{
    if (rc == -EBADMSG) {
        cli_err("%s sent a line that is not a JSON object %s is it a toolexecd socket?",
                cli->socket_path, dash());
        return CLI_EXIT_ERROR;
    }
    if (rc == -ENODATA)
        cli_err("toolexecd at %s closed the connection before %s (check its log: "
                "journalctl -u toolexecd)",
                cli->socket_path, what);
    else
        cli_err("lost the connection to %s before %s: %s", cli->socket_path, what, strerror(-rc));
    return CLI_EXIT_CONNECT;
}

int cli_send_failed(const struct cli *cli, int rc)
{
    cli_err("cannot send to %s: %s (check toolexecd's log: journalctl -u toolexecd)",
            cli->socket_path, strerror(-rc));
    return CLI_EXIT_CONNECT;
}

int cli_send(const struct cli *cli, te_client *c, const json_t *req)
{
    int rc = te_client_send(c, req);
    return rc < 0 ? cli_send_failed(cli, rc) : CLI_EXIT_OK;
}

bool cli_one_of(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(s, *set) == 0)
            return true;
    return false;
}

int cli_policy_file(const char *cmd, const char *path, json_t *fields)
{
    json_error_t je;
    json_t *pol = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(pol)) {
        int rc = pol ? cli_usage_error(cmd, "--policy %s: expected a JSON object", path)
                     : cli_usage_error(cmd, "--policy %s: %s", path, je.text);
        json_decref(pol);
        return -rc;
    }
    json_object_set_new(fields, "policy", pol);
    return 1;
}
