/*
 * sandboxrun_opts.h - toolexec sandbox's options (sandboxrun_opts.c): made
 * into a tool definition and what a definition does not say, for
 * sandboxrun.c.
 */
#ifndef TD_SANDBOXRUN_OPTS_H
#define TD_SANDBOXRUN_OPTS_H

#include <stdint.h>

#include <jansson.h>

/* What the options ask beyond the definition. */
struct td_sbx_opts {
    json_t *def;           /* the tool definition: command, filesystem, network, ... */
    uint64_t timeout_ms;   /* 0: none */
    const char *json_out;  /* --json: "-" for stderr, else a file; NULL: none */
    int log_level;         /* TD_LOG_* */
    const char *learn_out; /* --learn(-refused) FILE: the proposed definition goes there */
    char *run_dir;         /* where the command starts: the caller's directory;
                              NULL: the call's private directory */
};

/* argv from --sandbox-run on (argv[0] is "--sandbox-run"): the options and
 * the command, into o. 0; 125 after a usage message; -1 (help printed) for
 * --help. */
int td_sbx_parse(int argc, char **argv, struct td_sbx_opts *o);

#endif
