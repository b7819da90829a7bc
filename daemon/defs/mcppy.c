/*
 * mcppy.c - an "mcp_server" that is a Python module, as a PyPI server is
 * ("python_module": "mcp_server_time", run as `python3 -m`), and its tools
 * kept warm ("start": "warm").
 *
 * Cold (the default), it is a command like any server's: PYTHON -m MODULE
 * ARGS..., started by the bridge per call. Warm, each of its tools is a
 * warm tool (run/template.c) whose command is the Python SDK's template
 * program, toolexec.mcpwarm: the template imports the module (and so all
 * it imports: the cost of a Python server's start) once; each call is a
 * fresh fork of it in namespaces of its own, as any warm call, which forks
 * the server (the module's main) on pipes and execs the bridge attached to
 * it (mcpbridge/bridge_attach.c), so the MCP client is the same C code as
 * for a cold call. The listing tool stays cold: it runs once per load.
 *
 * All the server's tools have the same command, naming the server, not a
 * tool: the call's request frame names the tool ("tool": NAME.TOOL), so
 * one template, the server's, serves them all (td_mcppy_template_key()):
 * a server of seven tools imports its module once, not seven times.
 */
#include <stdio.h>
#include <string.h>

#include "mcppy.h"
#include "tool.h"
#include "toolexec.h"
#include "util.h"
#include "warmdef.h"

static const char *const own[] = {"python_module", "python", "args", "start", "max_forks"};

bool td_mcppy_key(const char *key)
{
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcmp(key, own[i]) == 0)
            return true;
    return false;
}

/* a dotted name of Python identifiers (ASCII), as `python -m` takes */
static bool module_name(const char *s, size_t len)
{
    bool start = true;
    if (len == 0 || len > 255 || strlen(s) != len)
        return false;
    for (const char *p = s; *p; p++) {
        bool alpha = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_';
        if (*p == '.' && !start) {
            start = true;
            continue;
        }
        if (!alpha && (start || !(*p >= '0' && *p <= '9')))
            return false;
        start = false;
    }
    return !start;
}

static bool text_no_nul(json_t *v, bool nonempty)
{
    return te_json_is_text(v) && strlen(json_string_value(v)) == json_string_length(v) &&
           (!nonempty || json_string_length(v) > 0);
}

int td_mcppy_parse(const char *file, json_t *m, json_t **command, bool *warm, json_t **max_forks,
                   char *err, size_t errlen)
{
    json_t *mod = json_object_get(m, "python_module");
    json_t *py = json_object_get(m, "python");
    json_t *args = json_object_get(m, "args"), *a;
    *command = NULL;
    *warm = false;
    *max_forks = json_object_get(m, "max_forks");
    char where[512];
    snprintf(where, sizeof(where), "%s: mcp_server", file);
    struct td_warmdef wd;
    if (td_warmdef_parse(where, m, true, &wd, err, errlen) < 0)
        return -1;
    if (!mod) {
        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
            if (json_object_get(m, own[i]))
                return td_fail(err, errlen,
                               "%s: mcp_server.%s: only with mcp_server.python_module (a server "
                               "in Python, run as python -m MODULE)",
                               file, own[i]);
        return 0;
    }
    if (json_object_get(m, "command"))
        return td_fail(err, errlen,
                       "%s: mcp_server: \"command\" or \"python_module\", not both (the module's "
                       "command is PYTHON -m MODULE ARGS...)",
                       file);
    if (!te_json_is_text(mod) || !module_name(json_string_value(mod), json_string_length(mod)))
        return td_fail(err, errlen,
                       "%s: mcp_server.python_module: expected a module's dotted name "
                       "(\"mcp_server_time\", \"pkg.server\")",
                       file);
    if (py && !text_no_nul(py, true))
        return td_fail(err, errlen,
                       "%s: mcp_server.python: expected the interpreter, a non-empty string "
                       "without NUL (default \"python3\")",
                       file);
    size_t i;
    if (args && !json_is_array(args))
        return td_fail(err, errlen, "%s: mcp_server.args: expected an array of strings", file);
    json_array_foreach(args, i, a)
    {
        if (!text_no_nul(a, false))
            return td_fail(err, errlen, "%s: mcp_server.args[%zu]: expected a string without NUL",
                           file, i);
    }
    /* a warm template's environment is its own for its life: a credential
     * would be read once and kept there, not per call as a cold one is */
    if (wd.warm && json_object_get(m, "env_credentials"))
        return td_fail(err, errlen,
                       "%s: mcp_server.env_credentials: not with \"start\": \"warm\" (each call's "
                       "credentials are read as it starts; a warm call's environment is its "
                       "template's)",
                       file);
    *command = json_pack("[s,s,O]", py ? json_string_value(py) : "python3", "-m", mod);
    if (!*command || (args && json_array_extend(*command, args) < 0)) {
        json_decref(*command);
        *command = NULL;
        return td_fail(err, errlen, "%s: out of memory", file);
    }
    *warm = wd.warm;
    return 0;
}

/* PYTHON -m toolexec.mcpwarm BRIDGE server NAME -- MODULE ARGS... */
#define WARM_PROGRAM "toolexec.mcpwarm"
#define WARM_MODE_ARG (TD_MCPPY_BRIDGE_ARG + 1)

json_t *td_mcppy_warm_command(json_t *command, const char *bridge, const char *server)
{
    /* command is [PYTHON, "-m", MODULE, ARGS...] (td_mcppy_parse) */
    json_t *c = json_pack("[O,s,s,s,s,s,s]", json_array_get(command, 0), "-m", WARM_PROGRAM, bridge,
                          "server", server, "--");
    for (size_t i = 2; c && i < json_array_size(command); i++)
        if (json_array_append(c, json_array_get(command, i)) < 0) {
            json_decref(c);
            return NULL;
        }
    return c;
}

const char *td_mcppy_template_key(const struct td_tool *t)
{
    /* only the tools mcpdef.c made of a warm server have this command */
    if (!t->mcp_tool || !t->warm || !t->argv)
        return NULL;
    for (int i = 0; i <= WARM_MODE_ARG; i++)
        if (!t->argv[i])
            return NULL;
    if (strcmp(t->argv[2], WARM_PROGRAM) || strcmp(t->argv[WARM_MODE_ARG], "server"))
        return NULL;
    return t->argv[WARM_MODE_ARG + 1];
}
