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
    if (cli_add_capture(argv, list, sizeof(list)) < 0) {
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
        if (cli_add_install(argv, "Debian: apt-get install python3-venv", "%s -m venv %s", python,
                            p->root) < 0)
            return NULL;
    }
    unlink(report);
    char *argv[] = {pip,          "install",       "--disable-pip-version-check",
                    "--no-input", "--report",      report,
                    "--",         (char *)p->spec, NULL};
    if (cli_add_install(argv, NULL, "pip install of '%s' into %s", p->spec, p->root) < 0)
        return NULL;
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
