/*
 * mcplist.h - the MCP servers' tools found and registered (mcplist.c).
 */
#ifndef TD_MCPLIST_H
#define TD_MCPLIST_H

#include "tool.h"

/* List the tools of each MCP server in the registry in force, each as a
 * batch of the daemon's own; changed is called each time a server's tools
 * are registered. */
void td_mcplist_start(void (*changed)(void));
/* fresh (a reload's registry) with the tools of old that its MCP servers
 * listed before, until they are listed again: a reload does not make them
 * vanish meanwhile. */
struct td_registry *td_mcplist_carry(const struct td_registry *old, struct td_registry *fresh);
/* tool's worker said its MCP server's tools changed (run/worker.h's
 * td_worker_on_tools_changed, which td_mcplist_start sets): the server is
 * listed again, coalesced and no more often than --mcp-relist-interval. */
void td_mcplist_changed(const struct td_tool *tool);
/* Cancel the listings in flight (shutdown): their calls killed, nothing
 * registered. */
void td_mcplist_stop(void);

#endif
