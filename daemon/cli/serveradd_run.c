/*
 * serveradd_run.c - the programs toolexec mcp-add runs (npm, python -m venv,
 * pip, the daemon's --check), started with posix_spawn and waited for:
 * serveradd.c and serveradd_pypi.c call these, and nothing here calls them.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "serveradd.h"

extern char **environ;

int cli_add_run(char *const argv[])
{
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
    if (rc != 0) {
        cli_err("mcp-add: cannot run %s: %s", argv[0], strerror(rc));
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int cli_add_install(char *const argv[], const char *hint, const char *fmt, ...)
{
    int rc = cli_add_run(argv);
    if (rc > 0) {
        char what[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        cli_err("mcp-add: %s failed (status %d%s%s)", what, rc, hint ? "; " : "", hint ? hint : "");
    }
    return rc == 0 ? 0 : -1;
}

/* What argv wrote on its stdout (at most len - 1 bytes, NUL-ended): 0 when
 * it exited 0, else -1 (said). */
int cli_add_capture(char *const argv[], char *out, size_t len)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        cli_err("mcp-add: cannot run %s: %s", argv[0], strerror(rc));
        return -1;
    }
    size_t n = 0;
    for (;;) {
        char sink[512];
        ssize_t r = n + 1 < len ? read(p[0], out + n, len - 1 - n) : read(p[0], sink, sizeof(sink));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (n + 1 < len)
            n += (size_t)r;
    }
    out[n] = '\0';
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}
