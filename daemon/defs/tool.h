/*
 * tool.h - a loaded tool definition (struct td_tool) and the set of them
 * (struct td_registry): what registry.c parses, and what the modules that
 * read a definition's parts (declare.c, batch.c, worker.c, ...) see,
 * without the registry's functions.
 */
#ifndef TD_TOOL_H
#define TD_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "config.h"
#include "toolexec.h"

struct td_egress;
struct td_mcp;

/* The only PATH a worker sees (plus what its definition's env says). */
#define TD_WORKER_PATH "/usr/local/bin:/usr/bin:/bin"

enum td_protocol { TD_PROTO_FRAMED, TD_PROTO_PLAIN };
struct td_tool {
    int refs;
    char *name, *description, *file;
    mode_t file_mode; /* of file, when loaded: who may read its env (defwarn.c) */
    json_t *schema;
    char **argv; /* NULL: manual-mode tool */
    char **env;  /* "K=V", NULL-terminated */
    size_t nenv;
    enum td_protocol protocol;
    bool context;
    uint64_t timeout_ms; /* 0: no ceiling of its own */
    struct td_limits limits;
    int network;                     /* -1: daemon default, 0 no network, 1 network */
    char *user, *group;              /* NULL: daemon default */
    json_t *allow_uids, *allow_gids; /* integer arrays; NULL: any client */
    uint64_t max_content_bytes;      /* 0: the batch's or the default */
    te_schema *validator;            /* the compiled schema */
    bool coerce;                     /* "42" -> 42 where the schema wants a number */
    bool spill;                      /* cut content also written to a file */
    bool stderr_hidden;              /* "stderr_to_model": false */
    bool switch_user;                /* root daemon: run workers as uid/gid */
    uid_t uid;
    gid_t gid;
    /* "syscalls", "deny_syscalls" (sysfilter.c); NULL: the default */
    struct td_sysfilter_conf *sysfilter;
    /* its file-system view (fsview.c) */
    struct td_fsview *fs; /* "filesystem" (or the daemon's default) */
    /* egress: "network": {"allow": [...]}; network is then 0 */
    struct td_egress *egress;
    /* "mcp_server" (mcpdef.c): the server's listing tool has mcp; it and
     * each of its tools (NAME.TOOL, mcp_tool) have the server's command
     * at argv[mcp_cmd] (0: not a server's) */
    struct td_mcp *mcp;
    bool mcp_tool;
    size_t mcp_cmd;
    /* "instance" (mcpdef.c), the server's and its tools': a fresh server
     * per call, one per batch or a pool (run/instance.c); "instances": at
     * most this many of the server at once (0: session --max-workers,
     * shared 1); a shared pool's "recycle_calls" (0: never) and "idle_ms";
     * mcp_gen: its definition's load (a reload's pool is another) */
    enum { TD_MCP_CALL, TD_MCP_SESSION, TD_MCP_SHARED } mcp_instance;
    unsigned mcp_instances, mcp_recycle_calls, mcp_gen;
    uint64_t mcp_idle_ms;
    /* mcp_server.env_credentials: {"VAR": "CREDENTIAL"}, each read from
     * the credentials directory into the call's environment as it starts
     * (run/worker_start.c); NULL: none */
    json_t *env_creds;
    /* declare.c: the tool as the APIs and MCP are told of it */
    json_t *listed_schema;       /* schema with "type": "object" on top, object properties */
    char *api_name;              /* name with '.' as '_' (OpenAI, Anthropic) */
    char *title;                 /* NULL: none */
    json_t *annotations;         /* MCP's hints; NULL: none */
    json_t *output_schema;       /* listed form; NULL: none */
    te_schema *output_validator; /* compiled output_schema */
    bool strict;                 /* OpenAI's strict mode */
    json_t *scopes;              /* OAuth scopes, one of which a call over MCP's HTTP
                                    front needs; NULL: any valid token */
    bool mcp_blocks;             /* "mcp": {"content": "blocks"}: its ok value is MCP
                                    content blocks (toolexec mcp passes them through) */
    const char *mcp_tasks;       /* "mcp": {"task_support": ...} (a static string);
                                    NULL: not said (MCP's "optional") */
    /* warm start (template.c): "start": "warm", "max_forks" */
    bool warm;
    unsigned max_forks;
    /* A tool narrowed by a run request's "policy" (narrow.c)
     * shares its parent's parts but these two where it owns them */
    struct td_tool *parent; /* NULL: a definition as loaded */
    bool own_fs, own_egress;
    /* toolpaths.c: what its view hides of what it needs, for its
     * failed calls' errors; NULL: nothing */
    char *view_note;
    /* learn mode (learndef.c): "learn": true or "refused" */
    bool learn;
    bool learn_minimal;       /* its "filesystem" said "root": "minimal" */
    bool learn_refused;       /* "learn": "refused": confined as written, its refusals learned */
    struct td_learn *learned; /* all its calls since load */
    json_t *learn_def;        /* its definition as read */
    /* The layers (TD_LAYER_*) its definition asks for and
     * those it lets run without (besteffort.c); what its calls run under,
     * less the per-call uid (run/enforced.c, made at its first call) */
    unsigned wants, best_effort;
    json_t *enforced;
};
struct td_registry {
    struct td_tool **tools; /* sorted by name */
    size_t n;
};
#endif
