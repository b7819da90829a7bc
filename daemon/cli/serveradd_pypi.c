/*
 * serveradd_pypi.c - toolexec mcp-add --pypi: an MCP server from PyPI (or a
 * wheel's path) installed into a virtual environment of its own, PREFIX/NAME,
 * and the command that runs it (serveradd.c writes the definition).
 *
 * The environment is made by the system's Python (/usr/bin/python3 unless
 * --python says which), so its interpreter is one the calls' view shows; pip
 * runs here, once, and never at call time. The server's program is the
 * distribution's console script (the one there is, --bin's, or the one named
 * as the distribution is), or --module's `python -m MODULE`.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "serveradd.h"

extern char **environ;

/* What argv wrote on its stdout (at most len - 1 bytes, NUL-ended): 0 when
 * it exited 0, else -1 (said). */
static int capture(char *const argv[], char *out, size_t len)
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

/* The distribution pip installed for spec: the requested one in its
 * report, else (already there: the report lists nothing) the name the spec
 * starts with, a wheel's file name's first field. */
static char *dist_name(const char *report, const char *spec)
{
    json_t *r = json_load_file(report, 0, NULL), *v;
    size_t i;
    char *name = NULL;
    json_array_foreach(json_object_get(r, "install"), i, v)
    {
        const char *n = json_string_value(json_object_get(json_object_get(v, "metadata"), "name"));
        if (n && json_is_true(json_object_get(v, "requested")) && !name)
            name = strdup(n);
    }
    json_decref(r);
    if (name)
        return name;
    const char *base = strrchr(spec, '/') ? strrchr(spec, '/') + 1 : spec;
    size_t n = strcspn(base, strrchr(spec, '/') ? "-" : "=<>!~[;@ ");
    return n ? strndup(base, n) : NULL;
}

/* Its console scripts, one a line (the environment's own Python asks). */
static const char LIST_SCRIPTS[] =
    "import sys, importlib.metadata as m\n"
    "d = m.distribution(sys.argv[1])\n"
    "print('\\n'.join(sorted(e.name for e in d.entry_points if e.group == 'console_scripts')))\n";

/* The script to run: bin when given (and there), else the one there is,
 * else the one named as the distribution is. */
static char *pick_script(const char *root, const char *dist, const char *bin)
{
    char py[PATH_MAX], list[8192];
    snprintf(py, sizeof(py), "%s/bin/python", root);
    char *argv[] = {py, "-c", (char *)LIST_SCRIPTS, (char *)dist, NULL};
    if (capture(argv, list, sizeof(list)) < 0) {
        cli_err("mcp-add: cannot list the console scripts of %s in %s", dist, root);
        return NULL;
    }
    char *pick = NULL, *only = NULL, *save = NULL;
    size_t count = 0;
    for (char *s = strtok_r(list, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) {
        count++;
        only = s;
        if ((bin && strcmp(s, bin) == 0) || (!bin && strcmp(s, dist) == 0))
            pick = s;
    }
    if (!pick && !bin && count == 1)
        pick = only;
    if (!pick) {
        cli_err("mcp-add: %s has %s console script%s%s%s: %s", dist, count ? "no such" : "no",
                bin ? " named '" : "", bin ? bin : "", bin ? "'" : "",
                count ? "--bin NAME says which" : "--module MODULE runs python -m MODULE");
        return NULL;
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/bin/%s", root, pick) >= (int)sizeof(path))
        return NULL;
    return strdup(path);
}

json_t *cli_add_pypi(const struct cli_add_pypi *p, char **interp)
{
    char py[PATH_MAX], pip[PATH_MAX], report[PATH_MAX];
    snprintf(py, sizeof(py), "%s/bin/python", p->root);
    snprintf(pip, sizeof(pip), "%s/bin/pip", p->root);
    snprintf(report, sizeof(report), "%s/.mcp-add-report.json", p->root);
    if (access(py, X_OK) < 0) {
        const char *python = p->python ? p->python : "/usr/bin/python3";
        char *argv[] = {(char *)python, "-m", "venv", (char *)p->root, NULL};
        int rc = cli_add_run(argv);
        if (rc != 0) {
            if (rc > 0)
                cli_err("mcp-add: %s -m venv %s failed (status %d; Debian: apt-get install "
                        "python3-venv)",
                        python, p->root, rc);
            return NULL;
        }
    }
    unlink(report);
    char *argv[] = {pip,          "install",       "--disable-pip-version-check",
                    "--no-input", "--report",      report,
                    "--",         (char *)p->spec, NULL};
    int rc = cli_add_run(argv);
    if (rc != 0) {
        if (rc > 0)
            cli_err("mcp-add: pip install of '%s' into %s failed (status %d)", p->spec, p->root,
                    rc);
        return NULL;
    }
    json_t *cmd = NULL;
    if (p->module) {
        cmd = json_pack("[s,s,s]", py, "-m", p->module);
    } else {
        char *dist = dist_name(report, p->spec);
        char *script = dist ? pick_script(p->root, dist, p->bin) : NULL;
        if (!dist)
            cli_err("mcp-add: which distribution '%s' installed is not known: --module MODULE",
                    p->spec);
        if (script)
            cmd = json_pack("[s]", script);
        free(dist);
        free(script);
    }
    unlink(report);
    /* the interpreter the environment links to must be in the view too */
    if (cmd && !(*interp = realpath(py, NULL))) {
        cli_err("mcp-add: %s: %s", py, strerror(errno));
        json_decref(cmd);
        cmd = NULL;
    }
    return cmd;
}
