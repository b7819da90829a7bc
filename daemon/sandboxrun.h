/*
 * sandboxrun.h - `toolexecd --sandbox-run`, the engine of `toolexec sandbox`
 * (toolexec(1)): one command run as one call of a tool whose definition is
 * made from the options, with the sandbox a daemon's call gets (spawndesc.c,
 * sandbox.c, the egress proxy, the seccomp listener), its standard input,
 * output and error the caller's own, and its exit status ours.
 */
#ifndef TD_SANDBOXRUN_H
#define TD_SANDBOXRUN_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

/* What the options ask beyond the definition. */
struct td_sbx_opts {
    json_t *def;           /* the tool definition: command, filesystem, network, ... */
    uint64_t timeout_ms;   /* 0: none */
    const char *json_out;  /* --json: "-" for stderr, else a file; NULL: none */
    int log_level;         /* TD_LOG_* */
    const char *learn_out; /* --learn FILE: the proposed definition goes there */
};

/* argv from --sandbox-run on (argv[0] is "--sandbox-run"): the options and
 * the command, into o. 0; 125 after a usage message; -1 (help printed) for
 * --help. */
int td_sbx_parse(int argc, char **argv, struct td_sbx_opts *o);
/* The whole one-shot run: main()'s answer to --sandbox-run. */
int td_sandboxrun_main(int argc, char **argv);

#endif
