/*
 * options.h - toolexecd's options (options.c): one table that says, for
 * each, its names, its argument, where it goes and its --help lines; the
 * parse over argv and --help are both read from it.
 */
#ifndef TD_OPTIONS_H
#define TD_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

/* What the options set that is main's to act on (the rest goes straight
 * to td_cfg and the layers' own settings). */
struct td_main_opts {
    const char *work_dir;       /* --work-dir; NULL: a fresh one */
    const char *containment;    /* --containment */
    const char *cgroup_dir;     /* --cgroup */
    const char *log_format;     /* --log-format, checked by td_log_setup */
    const char *metrics_listen; /* --metrics-listen; NULL: off */
    unsigned metrics_timeout;   /* --metrics-timeout */
    unsigned mcp_relist_s;      /* --mcp-relist-interval */
    const char *audit_file;     /* --audit-file */
    bool audit_arguments;       /* --audit-arguments */
    bool check;                 /* --check */
    bool tools_given;           /* --tools: --check checks the definitions */
    bool require_confinement;   /* --require-confinement */
    bool use_spawner;           /* --spawner */
    bool fs_refusals;           /* --fs-refusals */
};
extern struct td_main_opts td_opts;

/* argv's options into td_cfg, the layers' settings and td_opts. -1: go on
 * and start; otherwise main's exit status: 0 after --help or --version, 2
 * after a message on stderr. */
int td_options_parse(int argc, char **argv);

/* toolexecd --help: every option's lines, from the table. */
void td_usage(FILE *f);

#endif
