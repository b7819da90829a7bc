/*
 * mcpdef.c - "mcp_server" definitions: a third-party MCP server as a source
 * of tools. Such a definition loads as one tool that is listed to no client
 * (NAME, its "listing tool"): a call of it runs toolexec-mcp-bridge in list
 * mode, confined as the definition says, and answers the server's tools.
 * Each of those becomes a tool of its own, NAME.TOOL, made here as an
 * ordinary definition (the server's definition less its MCP keys, with the
 * tool's schemas and a bridge command for it) and parsed as any other, so a
 * call of it is a call like any other (main/mcplist.c registers them).
 *
 * Each listed tool returns the server's content whole ("mcp": {"content":
 * "blocks"}), so an MCP host gets an image or a resource as the server sent
 * it. "env_credentials" names variables of the server's environment whose
 * values the daemon reads from its credentials directory as each call
 * starts (run/worker_start.c); here only their names are checked.
 *
 * "instance": "call" (a fresh server per call), "session" (one per batch)
 * or "shared" (a pool: "instances", "recycle_calls", "idle_ms"), both
 * run/instance.c's, and stdio servers are done; "url" is refused as not
 * supported yet rather than run as something it is not.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "mcpdef.h"
#include "util.h"

/* A shared pool's instance idle this long is reaped ("idle_ms"). */
#define TD_MCP_IDLE_MS 60000

struct td_mcp {
    json_t *def;     /* as read: each listed tool's definition is made from it */
    json_t *command; /* the server's, its first word resolved */
    char *dir;       /* the definitions directory */
};

/* Keys that say what runs and what it takes: the server's tools say them. */
static const char *const server_owns[] = {"command",     "protocol",  "schema", "context",
                                          "start",       "max_forks", "title",  "strict",
                                          "annotations", "learn",     "env",    "output_schema"};

/* found beside toolexecd in a build tree, else installed; named as
 * installed when neither is there (the call says what is missing) */
static char *bridge_path(void)
{
    char *p = td_libexec_find("toolexec-mcp-bridge", TD_LIBEXECDIR);
    return p ? p : strdup(TD_LIBEXECDIR "/toolexec-mcp-bridge");
}

json_t *td_mcpdef_env(json_t *def)
{
    json_t *m = json_object_get(def, "mcp_server");
    return m ? json_object_get(m, "env") : json_object_get(def, "env");
}

/* argv: the bridge, its mode words, "--", the server's command. */
static char **bridge_argv(const struct td_mcp *m, const char *tool, size_t *at)
{
    size_t n = json_array_size(m->command), k = 0, i;
    char **argv = calloc(n + 5, sizeof(char *));
    if (!argv)
        return NULL;
    argv[k++] = bridge_path();
    argv[k++] = strdup(tool ? "call" : "list");
    if (tool)
        argv[k++] = strdup(tool);
    argv[k++] = strdup("--");
    *at = k;
    for (i = 0; i < n; i++)
        argv[k++] = strdup(json_string_value(json_array_get(m->command, i)));
    for (i = 0; i < k; i++)
        if (!argv[i]) {
            for (size_t j = 0; j < k; j++)
                free(argv[j]);
            free(argv);
            return NULL;
        }
    return argv;
}

/* A variable the daemon sets itself, or the egress proxy's: a credential
 * may not stand in for it. */
static bool daemons_var(const char *name)
{
    static const char *const own[] = {
        "PATH",          "HTTP_PROXY", "HTTPS_PROXY",   "http_proxy",         "https_proxy",
        "ALL_PROXY",     "NO_PROXY",   "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        "CURL_CA_BUNDLE"};
    if (strncmp(name, "TOOLEXEC_", 9) == 0)
        return true;
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcmp(name, own[i]) == 0)
            return true;
    return false;
}

/* "env_credentials": {"VAR": "CREDENTIAL"}: variables the server's
 * environment gets from the credentials directory at each call (the value
 * is read then, never here: a definition loads without its secrets, and a
 * credential missing fails the calls that need it, by name). */
static int env_credentials(const char *file, json_t *m, struct td_tool *t, char *err, size_t errlen)
{
    json_t *ec = json_object_get(m, "env_credentials"), *v;
    json_t *env = json_object_get(m, "env");
    const char *var;
    if (!ec)
        return 0;
    if (!json_is_object(ec) || json_object_size(ec) == 0)
        return td_fail(err, errlen,
                       "%s: mcp_server.env_credentials: expected an object {\"VAR\": "
                       "\"CREDENTIAL\"}",
                       file);
    json_object_foreach(ec, var, v)
    {
        const char *c = te_json_text_value(v);
        bool name_ok = (*var >= 'A' && *var <= 'Z') || (*var >= 'a' && *var <= 'z') || *var == '_';
        for (const char *p = var; name_ok && *p; p++)
            name_ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                      (*p >= '0' && *p <= '9') || *p == '_';
        if (!name_ok)
            return td_fail(err, errlen,
                           "%s: mcp_server.env_credentials: \"%.64s\": not a variable name "
                           "([A-Za-z_][A-Za-z0-9_]*)",
                           file, var);
        if (daemons_var(var))
            return td_fail(err, errlen,
                           "%s: mcp_server.env_credentials.%s: the daemon sets this variable", file,
                           var);
        if (json_object_get(env, var))
            return td_fail(err, errlen, "%s: mcp_server.env_credentials.%s: also in mcp_server.env",
                           file, var);
        if (!c || !*c || strchr(c, '/') || strcmp(c, ".") == 0 || strcmp(c, "..") == 0 ||
            strlen(c) != json_string_length(v))
            return td_fail(err, errlen,
                           "%s: mcp_server.env_credentials.%s: expected a credential's name (a "
                           "file name in the credentials directory)",
                           file, var);
    }
    t->env_creds = json_incref(ec);
    return 0;
}

/* The keys of a server's instances, beside "instance". */
static const char *const instance_keys_[] = {"instance", "instances", "recycle_calls", "idle_ms"};

/* One of them: an integer from lo to hi, *out; absent, *out = dflt. */
static int bounded(const char *file, json_t *def, const char *key, long long lo, long long hi,
                   unsigned long long dflt, unsigned long long *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(def, key);
    *out = dflt;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return td_fail(err, errlen, "%s: %s: expected an integer from %lld to %lld", file, key, lo,
                       hi);
    *out = (unsigned long long)json_integer_value(v);
    return 0;
}

/* "instances", "recycle_calls", "idle_ms": each where its instance takes
 * it ("instances": session and shared; the others: shared). */
static int instance_keys(const char *file, json_t *def, struct td_tool *t, char *err, size_t errlen)
{
    static unsigned gen;
    unsigned long long n, rc, idle;
    bool shared = t->mcp_instance == TD_MCP_SHARED;
    if (bounded(file, def, "instances", 1, 65536, 0, &n, err, errlen) < 0 ||
        bounded(file, def, "recycle_calls", 1, (1LL << 32) - 1, 0, &rc, err, errlen) < 0 ||
        bounded(file, def, "idle_ms", 1, 7LL * 24 * 3600 * 1000, TD_MCP_IDLE_MS, &idle, err,
                errlen) < 0)
        return -EINVAL;
    if (json_object_get(def, "instances") && t->mcp_instance == TD_MCP_CALL)
        return td_fail(err, errlen,
                       "%s: instances: only with \"instance\": \"session\" or \"shared\"", file);
    for (size_t i = 2; i < sizeof(instance_keys_) / sizeof(instance_keys_[0]); i++)
        if (json_object_get(def, instance_keys_[i]) && !shared)
            return td_fail(err, errlen, "%s: %s: only with \"instance\": \"shared\"", file,
                           instance_keys_[i]);
    t->mcp_instances = (unsigned)n;
    t->mcp_recycle_calls = (unsigned)rc;
    t->mcp_idle_ms = idle;
    t->mcp_gen = ++gen ? gen : ++gen; /* never 0 */
    return 0;
}

int td_mcpdef_parse(const char *dir, const char *file, json_t *def, struct td_tool *t, char *err,
                    size_t errlen)
{
    json_t *m = json_object_get(def, "mcp_server"), *v;
    json_t *inst = json_object_get(def, "instance");
    if (!m) {
        for (size_t i = 0; i < sizeof(instance_keys_) / sizeof(instance_keys_[0]); i++)
            if (json_object_get(def, instance_keys_[i]))
                return td_fail(err, errlen, "%s: %s: only with \"mcp_server\"", file,
                               instance_keys_[i]);
        return 0;
    }
    if (!json_is_object(m))
        return td_fail(err, errlen, "%s: mcp_server: expected an object {\"command\": [...]}",
                       file);
    for (size_t i = 0; i < sizeof(server_owns) / sizeof(server_owns[0]); i++)
        if (json_object_get(def, server_owns[i]))
            return td_fail(err, errlen,
                           "%s: %s: not with \"mcp_server\" (its tools say it; the server's "
                           "environment is mcp_server.env)",
                           file, server_owns[i]);
    if (strchr(t->name, '.'))
        return td_fail(err, errlen,
                       "%s: name: an MCP server's name has no '.' (its tools are NAME.TOOL)", file);
    const char *key;
    json_object_foreach(m, key, v)
    {
        if (strcmp(key, "url") == 0)
            return td_fail(err, errlen,
                           "%s: mcp_server.url: Streamable HTTP servers are not supported yet; "
                           "run the server over stdio (\"command\")",
                           file);
        if (strcmp(key, "command") && strcmp(key, "env") && strcmp(key, "env_credentials"))
            return td_fail(err, errlen,
                           "%s: mcp_server.%s: unknown key (command, env, env_credentials)", file,
                           key);
    }
    if (env_credentials(file, m, t, err, errlen) < 0)
        return -EINVAL;
    const char *is = inst ? te_json_text_value(inst) : "call";
    if (!is || (strcmp(is, "call") && strcmp(is, "session") && strcmp(is, "shared")))
        return td_fail(err, errlen, "%s: instance: expected \"call\", \"session\" or \"shared\"",
                       file);
    t->mcp_instance = strcmp(is, "session") == 0  ? TD_MCP_SESSION
                      : strcmp(is, "shared") == 0 ? TD_MCP_SHARED
                                                  : TD_MCP_CALL;
    if (instance_keys(file, def, t, err, errlen) < 0)
        return -EINVAL;
    json_t *cmd = json_object_get(m, "command"), *a;
    size_t i;
    if (!json_is_array(cmd) || json_array_size(cmd) == 0)
        return td_fail(err, errlen, "%s: mcp_server.command: expected a non-empty array of strings",
                       file);
    json_array_foreach(cmd, i, a)
    {
        if (!te_json_is_text(a) || (i == 0 && json_string_length(a) == 0) ||
            strlen(json_string_value(a)) != json_string_length(a))
            return td_fail(err, errlen,
                           "%s: mcp_server.command[%zu]: expected a non-empty string without NUL",
                           file, i);
    }
    struct td_mcp *mc = calloc(1, sizeof(*mc));
    if (!mc)
        return -ENOMEM;
    t->mcp = mc;
    mc->def = json_deep_copy(def);
    mc->dir = strdup(dir);
    mc->command = json_deep_copy(cmd);
    const char *c0 = json_string_value(json_array_get(cmd, 0));
    char *abs = NULL;
    /* relative to the definition, as a tool's command; a bare name is
     * found by the server's PATH, in the call's view */
    if (c0[0] != '/' && strchr(c0, '/') && asprintf(&abs, "%s/%s", dir, c0) > 0) {
        json_array_set_new(mc->command, 0, json_string(abs));
        free(abs);
    }
    if (!mc->def || !mc->dir || !mc->command || !(t->argv = bridge_argv(mc, NULL, &t->mcp_cmd)))
        return -ENOMEM;
    return 0;
}

json_t *td_mcpdef_tool_def(const struct td_tool *server, json_t *listed, char *why, size_t whylen)
{
    const struct td_mcp *m = server->mcp;
    const char *name = json_string_value(json_object_get(listed, "name"));
    char full[2 * TE_TOOL_NAME_MAX];
    if (!name) {
        snprintf(why, whylen, "a tool without a name");
        return NULL;
    }
    snprintf(full, sizeof(full), "%s.%s", server->name, name);
    if (strlen(name) > TE_TOOL_NAME_MAX || !te_tool_name_valid(full)) {
        snprintf(why, whylen, "%.80s: not a name toolexecd takes ([A-Za-z0-9_.-]{1,64} in all)",
                 name);
        return NULL;
    }
    json_t *def = json_deep_copy(m->def);
    json_object_del(def, "mcp_server");
    json_object_del(def, "instance");
    for (size_t i = 0; i < sizeof(instance_keys_) / sizeof(instance_keys_[0]); i++)
        json_object_del(def, instance_keys_[i]);
    json_object_set_new(def, "name", json_string(full));
    char *bridge = bridge_path();
    json_t *cmd = bridge ? json_pack("[s,s,s,s]", bridge, "call", name, "--") : NULL;
    free(bridge);
    if (!def || !cmd) {
        json_decref(def);
        json_decref(cmd);
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    json_array_extend(cmd, m->command);
    json_object_set_new(def, "command", cmd);
    json_t *env = json_object_get(json_object_get(m->def, "mcp_server"), "env");
    if (env)
        json_object_set(def, "env", env);
    /* its ok value is the server's content whole (the bridge's call mode),
     * which toolexec mcp hands on as blocks; the server's "mcp" keys (its
     * task_support) kept */
    json_t *mcp = json_object_get(def, "mcp");
    if (!json_is_object(mcp))
        json_object_set_new(def, "mcp", mcp = json_object());
    json_object_set_new(mcp, "content", json_string("blocks"));
    static const char *const from[][2] = {{"description", "description"},
                                          {"inputSchema", "schema"},
                                          {"outputSchema", "output_schema"},
                                          {"title", "title"},
                                          {"annotations", "annotations"}};
    for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
        json_t *v = json_object_get(listed, from[i][0]);
        if (v && !json_is_null(v))
            json_object_set(def, from[i][1], v);
    }
    return def;
}

void td_mcpdef_tool_made(const struct td_tool *server, struct td_tool *t)
{
    t->mcp_tool = true;
    t->mcp_cmd = 4; /* bridge "call" TOOL "--" COMMAND... (td_mcpdef_tool_def) */
    t->file_mode = server->file_mode;
    t->env_creds = json_incref(server->env_creds);
    t->mcp_instance = server->mcp_instance;
    t->mcp_instances = server->mcp_instances;
    t->mcp_recycle_calls = server->mcp_recycle_calls;
    t->mcp_idle_ms = server->mcp_idle_ms;
    t->mcp_gen = server->mcp_gen;
}

bool td_mcpdef_is_server(const struct td_tool *t)
{
    return t && (t->parent ? t->parent->mcp : t->mcp) != NULL;
}

void td_mcpdef_free(struct td_mcp *m)
{
    if (!m)
        return;
    json_decref(m->def);
    json_decref(m->command);
    free(m->dir);
    free(m);
}

const char *td_mcpdef_dir(const struct td_tool *server)
{
    return server->mcp ? server->mcp->dir : NULL;
}
