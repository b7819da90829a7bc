/*
 * mcppy.h - an "mcp_server" that is a Python module (mcppy.c): its
 * command, and its tools kept warm.
 */
#ifndef TD_MCPPY_H
#define TD_MCPPY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* where a warm tool's argv names the bridge its calls exec (toolpaths.c
 * checks that the view shows it): PYTHON -m toolexec.mcpwarm BRIDGE ... */
#define TD_MCPPY_BRIDGE_ARG 3

/* key is one of mcp_server's Python keys. */
bool td_mcppy_key(const char *key);
/* m's Python keys checked (file names the definition in err). *command:
 * [PYTHON, "-m", MODULE, ARGS...] (a new reference) for a python_module,
 * else NULL (m has "command"); *warm: "start": "warm"; *max_forks: m's
 * (borrowed) or NULL. 0, or -1 with err said. */
int td_mcppy_parse(const char *file, json_t *m, json_t **command, bool *warm, json_t **max_forks,
                   char *err, size_t errlen);
/* The command of each tool of the warm server named server (a new
 * reference; NULL: no memory): the SDK's template program, which imports
 * the module once and, in each call's fresh fork, starts the server and
 * execs bridge attached to it, calling the tool the request frame names. */
json_t *td_mcppy_warm_command(json_t *command, const char *bridge, const char *server);
/* The warm template t's calls share (run/template_tools.c): for a tool of
 * a warm server, the server's name (one template serves all its tools);
 * NULL for any other tool (a warm tool has its own). */
struct td_tool;
const char *td_mcppy_template_key(const struct td_tool *t);

#endif
