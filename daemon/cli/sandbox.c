/*
 * sandbox.c - `toolexec sandbox [OPTIONS] -- COMMAND [ARGS]`: one command
 * run confined as a tool's call is, without a daemon. The sandbox is the
 * daemon's own code: this execs `toolexecd --sandbox-run` with the same
 * arguments (daemon/sandboxrun/), so standard input, output and error,
 * the terminal and the exit status are the command's.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef CLI_SBINDIR
#define CLI_SBINDIR "/usr/sbin"
#endif

const char *cli_find_daemon(char *buf, size_t len)
{
    const char *env = getenv("TOOLEXECD");
    if (env && *env)
        return env;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            if (snprintf(buf, len, "%.*s/../toolexecd", (int)(len - 16), self) < (int)len &&
                access(buf, X_OK) == 0)
                return buf;
        }
    }
    snprintf(buf, len, "%s/toolexecd", CLI_SBINDIR);
    if (access(buf, X_OK) == 0)
        return buf;
    return "toolexecd";
}

/* --help before the command is ours (the engine's is a pointer here). */
static bool wants_help(int argc, char **argv)
{
    static const char *const valued[] = {"--read",     "--write",        "--hide",
                                         "--net",      "--timeout",      "--memory",
                                         "--syscalls", "--deny-syscall", "--user"};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0 || argv[i][0] != '-')
            return false;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return true;
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
            if (strcmp(argv[i], valued[k]) == 0)
                i++;
    }
    return false;
}

int cli_cmd_sandbox(struct cli *cli, int argc, char **argv)
{
    (void)cli;
    if (wants_help(argc, argv))
        return cli_help("sandbox");
    char buf[PATH_MAX];
    const char *daemon = cli_find_daemon(buf, sizeof(buf));
    char **args = calloc((size_t)argc + 2, sizeof(char *));
    if (!args)
        return CLI_EXIT_ERROR;
    args[0] = (char *)daemon;
    args[1] = "--sandbox-run";
    for (int i = 1; i < argc; i++)
        args[i + 1] = argv[i];
    execvp(daemon, args);
    fprintf(stderr, "toolexec sandbox: cannot run %s: %s\n", daemon, strerror(errno));
    free(args);
    return 125;
}
