/*
 * mcplist.h - the MCP servers' tools found and registered (mcplist.c).
 */
#ifndef TD_MCPLIST_H
#define TD_MCPLIST_H

/* List the tools of each MCP server in the registry in force, each as a
 * batch of the daemon's own; changed is called each time a server's tools
 * are registered. */
void td_mcplist_start(void (*changed)(void));

#endif
