/*
 * sandboxrun_module.c - toolexec-sandbox.so: toolexecd-sandbox's engine
 * as a module, which `toolexec sandbox` loads and runs in its own process
 * (daemon/cli/sandbox.c) rather than exec'ing the program: a second exec
 * and a second start of the loader (the C library, jansson and pcre2
 * mapped and relocated again) were a tenth of a run's CPU. The same
 * objects as the program's, with the same two stand-ins
 * (sandboxrun_leaves.c), libtoolexec's included and bound to its own
 * copies (-Bsymbolic): the CLI comes from another package, maybe another
 * build, so nothing here calls the executable's code.
 *
 * The engine's program stays beside it, and this is named by it: argv[0]
 * is that program's path, which is what the engine takes for its own
 * (td_self_exe), with its links resolved as /proc/self/exe's are: its
 * helpers (toolexecd-init) are found beside it, not beside the CLI, and a
 * run set up again probed execs it.
 */
#include <limits.h>
#include <stdlib.h>

#include "proxy_parser.h"
#include "sandboxrun.h"
#include "util.h"

/* The CLI runs this only from its own version: the one interface between
 * them is toolexec_sandbox_main's argv, which another version may read
 * otherwise. */
__attribute__((visibility("default"))) const char toolexec_sandbox_version[] = TD_VERSION;

__attribute__((visibility("default"))) int toolexec_sandbox_main(int argc, char **argv)
{
    static char self[PATH_MAX];
    td_self_exe = realpath(argv[0], self) ? self : argv[0];
#ifdef TD_HTTP_PARSER_SONAME
    td_sbx_proxy_prepare = td_proxy_parser_open;
#endif
    return td_sandboxrun_main(argc, argv);
}
