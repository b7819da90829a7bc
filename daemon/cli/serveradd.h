/*
 * serveradd.h - toolexec mcp-add's pieces: serveradd.c (the command, npm,
 * the definition written and checked) and serveradd_pypi.c (PyPI).
 */
#ifndef CLI_SERVERADD_H
#define CLI_SERVERADD_H

#include <jansson.h>

/* Run argv (PATH searched), its output ours; its exit status, -1 when it
 * could not be started (said). */
int cli_add_run(char *const argv[]);

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
