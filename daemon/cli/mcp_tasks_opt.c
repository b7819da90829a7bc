/*
 * mcp_tasks_opt.c - the tasks extension's options of `toolexec mcp`
 * (mcp_int.h: MCP_TASK_OPTIONS), for any transport's command line; apart
 * from mcp_tasks.c so that the core links without the command's helpers.
 */
#include <string.h>

#include "mcp_int.h"

/* --task-after, --task-ttl, --max-tasks, --task-max-result, --replica-id:
 * 0 when taken, 1 when opt is not one of them, -1 (said) when arg is bad. */
int mcp_tasks_option(struct mcp *m, int opt, const char *arg)
{
    json_int_t v = 0;
    if (opt == MCP_OPT_REPLICA) {
        size_t n = strlen(arg);
        bool ok = n > 0 && n <= MCP_REPLICA_MAX;
        for (size_t i = 0; ok && i < n; i++)
            ok = (arg[i] >= 'a' && arg[i] <= 'z') || (arg[i] >= 'A' && arg[i] <= 'Z') ||
                 (arg[i] >= '0' && arg[i] <= '9') || arg[i] == '-' || arg[i] == '_';
        if (!ok) {
            cli_usage_error("mcp", "--replica-id: expected 1 to 64 of A-Z a-z 0-9 - _, not '%s'",
                            arg);
            return -1;
        }
        m->replica_id = arg;
        return 0;
    }
    if (opt == MCP_OPT_TASK_AFTER && strcmp(arg, "0") == 0) {
        m->task_after_ms = -1; /* at once */
        return 0;
    }
    if (opt != MCP_OPT_TASK_AFTER && opt != MCP_OPT_TASK_TTL && opt != MCP_OPT_MAX_TASKS &&
        opt != MCP_OPT_TASK_MAX_RESULT)
        return 1;
    if (!cli_parse_positive(arg, &v)) {
        cli_usage_error("mcp", "expected a positive integer, not '%s'", arg);
        return -1;
    }
    if (opt == MCP_OPT_TASK_AFTER)
        m->task_after_ms = v;
    else if (opt == MCP_OPT_TASK_TTL)
        m->task_ttl_ms = v;
    else if (opt == MCP_OPT_MAX_TASKS)
        m->max_tasks = v > 1000000 ? 1000000 : (unsigned)v;
    else
        m->task_max_result = (size_t)v;
    return 0;
}

/* The task settings parsed into from, for another core dst (a transport
 * running several cores gives each the same). */
void mcp_tasks_settings(struct mcp *dst, const struct mcp *from)
{
    dst->task_after_ms = from->task_after_ms;
    dst->task_ttl_ms = from->task_ttl_ms;
    dst->max_tasks = from->max_tasks;
    dst->task_max_result = from->task_max_result;
    dst->replica_id = from->replica_id;
}
