/*
 * sandbox.c - `toolexec sandbox [OPTIONS] -- COMMAND [ARGS]`: one command
 * run confined as a tool's call is, without a daemon. The sandbox is the
 * daemon's own code (daemon/sandboxrun/): its module beside
 * toolexecd-sandbox, toolexec-sandbox.so, run in this process with the
 * arguments the program would get (no second exec and start of the
 * loader); where it cannot be loaded, toolexecd-sandbox (or `toolexecd
 * --sandbox-run`) exec'd with them. Either way standard input, output and
 * error, the terminal and the exit status are the command's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef CLI_SBINDIR
#define CLI_SBINDIR "/usr/sbin"
#endif
#ifndef CLI_LIBEXECDIR
#define CLI_LIBEXECDIR "/usr/libexec/toolexecd"
#endif
#ifndef TE_CLI_VERSION
#define TE_CLI_VERSION "unknown"
#endif

#define MODULE "toolexec-sandbox.so"

/* toolexecd: $TOOLEXECD, else beside us in a build tree (daemon/cli/..),
 * installed, or on PATH. */
const char *cli_find_daemon(char *buf, size_t len)
{
    const char *env = getenv("TOOLEXECD");
    if (env && *env)
        return env;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash = n > 0 ? (self[n] = '\0', strrchr(self, '/')) : NULL;
    if (slash) {
        *slash = '\0';
        if (snprintf(buf, len, "%.*s/../toolexecd", (int)(len - 16), self) < (int)len &&
            access(buf, X_OK) == 0)
            return buf;
    }
    snprintf(buf, len, "%s/toolexecd", CLI_SBINDIR);
    if (access(buf, X_OK) == 0)
        return buf;
    return "toolexecd";
}

/* The engine, and whether it takes --sandbox-run first: toolexecd-sandbox
 * (the engine alone, loading a fraction of the daemon's libraries) beside
 * $TOOLEXECD when that names a daemon, else beside us in a build tree
 * (daemon/cli/..) or installed; else the daemon (cli_find_daemon). */
static const char *find_engine(char *buf, size_t len, bool *daemon)
{
    const char *env = getenv("TOOLEXECD");
    char self[PATH_MAX];
    const char *dir = NULL;
    int dirlen = 0;
    if (env && *env) {
        const char *slash = strrchr(env, '/');
        if (slash)
            dir = env, dirlen = (int)(slash - env);
    } else {
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        char *slash = n > 0 ? (self[n] = '\0', strrchr(self, '/')) : NULL;
        if (slash)
            dir = self, dirlen = (int)(slash - self);
    }
    *daemon = false;
    if (dir &&
        snprintf(buf, len, "%.*s%s/toolexecd-sandbox", dirlen, dir, env && *env ? "" : "/..") <
            (int)len &&
        access(buf, X_OK) == 0)
        return buf;
    if (!(env && *env) && snprintf(buf, len, "%s/toolexecd-sandbox", CLI_LIBEXECDIR) < (int)len &&
        access(buf, X_OK) == 0)
        return buf;
    *daemon = true;
    return cli_find_daemon(buf, len);
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

/* The engine's module beside its program, run here as that program with
 * args; returns only when it cannot be loaded, or is of another version
 * than ours (whose options it may read otherwise). */
static int run_module(const char *engine, int argc, char **args)
{
    char path[PATH_MAX];
    const char *slash = strrchr(engine, '/');
    if (!slash || snprintf(path, sizeof(path), "%.*s/" MODULE, (int)(slash - engine), engine) >=
                      (int)sizeof(path))
        return -1;
    /* RTLD_NOW: a symbol it needs and we lack fails here, not mid-run */
    void *h = access(path, R_OK) == 0 ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    const char *version = h ? dlsym(h, "toolexec_sandbox_version") : NULL;
    int (*run)(int, char **) = NULL;
    if (version && strcmp(version, TE_CLI_VERSION) == 0)
        *(void **)&run = dlsym(h, "toolexec_sandbox_main");
    if (!run) {
        if (h)
            dlclose(h);
        return -1;
    }
    /* as the program would start: in the C locale, which main() leaves
     * for sandbox (no cli_term_init) */
    return run(argc, args);
}

int cli_cmd_sandbox(struct cli *cli, int argc, char **argv)
{
    (void)cli;
    if (wants_help(argc, argv))
        return cli_help("sandbox");
    char buf[PATH_MAX];
    bool daemon;
    const char *engine = find_engine(buf, sizeof(buf), &daemon);
    char **args = calloc((size_t)argc + 2, sizeof(char *));
    if (!args)
        return CLI_EXIT_ERROR;
    int k = 0;
    args[k++] = (char *)engine;
    if (daemon)
        args[k++] = "--sandbox-run";
    for (int i = 1; i < argc; i++)
        args[k++] = argv[i];
    int rc = daemon ? -1 : run_module(engine, k, args);
    if (rc >= 0) {
        free(args);
        return rc;
    }
    execvp(engine, args);
    fprintf(stderr, "toolexec sandbox: cannot run %s: %s\n", engine, strerror(errno));
    free(args);
    return 125;
}
