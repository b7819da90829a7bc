/*
 * mcpdef.h - "mcp_server" definitions (mcpdef.c): parsed into a listing
 * tool; each tool the server lists made a definition of its own.
 */
#ifndef TD_MCPDEF_H
#define TD_MCPDEF_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "tool.h"

/* Where the tool's "env" object is: mcp_server.env for a server. */
json_t *td_mcpdef_env(json_t *def);
/* def's "mcp_server", "instance" and "instances" checked into t (t->mcp, t->argv: the
 * bridge in list mode); 0 for a definition without them, -errno with err
 * said. Run after the name is parsed and before "command" would be. */
int td_mcpdef_parse(const char *dir, const char *file, json_t *def, struct td_tool *t, char *err,
                    size_t errlen);
/* The definition (a new reference) of tool listed by server (its entry of
 * tools/list), to parse as any; NULL with why when it cannot be one. */
json_t *td_mcpdef_tool_def(const struct td_tool *server, json_t *listed, char *why, size_t whylen);
/* t, parsed from td_mcpdef_tool_def()'s definition, made server's tool:
 * its command's place in argv, its env_credentials. */
void td_mcpdef_tool_made(const struct td_tool *server, struct td_tool *t);
/* The directory server's definition was read from. */
const char *td_mcpdef_dir(const struct td_tool *server);
/* t (or what it narrows) is an MCP server's listing tool. */
bool td_mcpdef_is_server(const struct td_tool *t);
void td_mcpdef_free(struct td_mcp *m);

#endif
