/*
 * serveradd.h - toolexec mcp-add's pieces: serveradd.c (the command, npm,
 * a URL, the definition written and checked), serveradd_pypi.c (PyPI) and
 * serveradd_run.c (the programs they run).
 */
#ifndef CLI_SERVERADD_H
#define CLI_SERVERADD_H

#include <jansson.h>

#include <stddef.h>

/* Run argv (PATH searched), its output ours; its exit status, -1 when it
 * could not be started (said). */
int cli_add_run(char *const argv[]);

/* Run an installer (npm, python -m venv, pip) as cli_add_run does: 0 when it
 * exited 0, else -1, said as "mcp-add: WHAT failed (status N[; HINT])" with
 * WHAT from fmt (not said again when it could not be started). */
int cli_add_install(char *const argv[], const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Run argv (a path) and keep what it wrote on its stdout (at most len - 1
 * bytes, NUL-ended): 0 when it exited 0, else -1 (said when not started). */
int cli_add_capture(char *const argv[], char *out, size_t len);

struct cli_add_pypi {
    const char *root;   /* the environment: PREFIX/NAME */
    const char *spec;   /* what pip installs: NAME[==VERSION], a wheel's path */
    const char *module; /* NULL, or run as python -m MODULE */
    const char *bin;    /* NULL, or the console script to run */
    const char *python; /* NULL (/usr/bin/python3), or the environment's maker */
};

/* The environment made (unless there) and the package installed into it:
 * the server's command (a new reference), *interp the interpreter it runs
 * on (malloc'd), or NULL with the reason said. */
json_t *cli_add_pypi(const struct cli_add_pypi *p, char **interp);

#endif
