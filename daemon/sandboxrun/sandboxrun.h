/*
 * sandboxrun.h - `toolexecd --sandbox-run`, the engine of `toolexec sandbox`
 * (toolexec(1)): one command run as one call of a tool whose definition is
 * made from the options, with the sandbox a daemon's call gets (spawndesc.c,
 * sandbox.c, the egress proxy, the seccomp listener), its standard input,
 * output and error the caller's own, and its exit status ours.
 */
#ifndef TD_SANDBOXRUN_H
#define TD_SANDBOXRUN_H

#include <stddef.h>

#include "sandboxrun_opts.h"

/* The whole one-shot run: main()'s answer to --sandbox-run. */
int td_sandboxrun_main(int argc, char **argv);

/* What a run with an egress proxy needs before its call starts, or NULL:
 * toolexecd-sandbox and its module, which do not link http-parser, open
 * it (confine/proxy_parser.c); -1 with a message in err when they cannot. */
extern int (*td_sbx_proxy_prepare)(char *err, size_t errlen);

#endif
