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
 * A server in Python may be named by its module ("python_module") and its
 * tools kept warm (mcppy.c).
 *
 * A server at a URL ("url", Streamable HTTP) has no command: the bridge
 * POSTs to it from inside the call's sandbox, through the egress proxy, so
 * the URL's host and port are added to the definition's network.allow here
 * (the definition names the server once; its allow-list stays the one
 * thing the proxy lets through) and its API key is a network.headers
 * credential the proxy adds, never a variable of the bridge's.
 *
 * "instance": "call" (a fresh server per call), "session" (one per batch)
 * or "shared" (a pool: "instances", "recycle_calls", "idle_ms"), both
 * run/instance.c's, for a server run here (a command, or a Python module
 * started cold); a url's server and a warm one are called per call.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "mcpdef.h"
#include "mcppy.h"
#include "util.h"

/* A shared pool's instance idle this long is reaped ("idle_ms"). */
#define TD_MCP_IDLE_MS 60000

struct td_mcp {
    json_t *def;     /* as read: each listed tool's definition is made from it */
    json_t *command; /* the server's, its first word resolved; NULL for a url */
    char *url;       /* a Streamable HTTP server's */
    char *dir;       /* the definitions directory */
    bool warm;       /* a python_module's tools kept warm (mcppy.c) */
    json_t *max_forks;
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
    char **argv = calloc(n + 6, sizeof(char *));
    if (!argv)
        return NULL;
    argv[k++] = bridge_path();
    argv[k++] = strdup(tool ? "call" : "list");
    if (tool)
        argv[k++] = strdup(tool);
    argv[k++] = strdup(m->url ? "--url" : "--");
    if (m->url)
        argv[k++] = strdup(m->url);
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

/* t made a server's listing tool: its command (cmd) or its url. */
static int made(const char *dir, json_t *def, json_t *cmd, const char *url, bool warm,
                json_t *max_forks, struct td_tool *t)
{
    struct td_mcp *mc = calloc(1, sizeof(*mc));
    if (!mc)
        return -ENOMEM;
    t->mcp = mc;
    mc->warm = warm;
    mc->max_forks = json_incref(max_forks);
    mc->def = json_deep_copy(def);
    mc->dir = strdup(dir);
    if (url && !(mc->url = strdup(url)))
        return -ENOMEM;
    if (cmd) {
        mc->command = json_deep_copy(cmd);
        const char *c0 = json_string_value(json_array_get(cmd, 0));
        char *abs = NULL;
        /* relative to the definition, as a tool's command; a bare name is
         * found by the server's PATH, in the call's view */
        if (c0[0] != '/' && strchr(c0, '/') && asprintf(&abs, "%s/%s", dir, c0) > 0) {
            json_array_set_new(mc->command, 0, json_string(abs));
            free(abs);
        }
    }
    if (!mc->def || !mc->dir || (cmd && !mc->command) ||
        !(t->argv = bridge_argv(mc, NULL, &t->mcp_cmd)))
        return -ENOMEM;
    if (url)
        t->mcp_cmd = 0; /* no command of the server's to find in the view */
    return 0;
}

/* "url": an http(s) URL whose authority the allow-list can name: its
 * entry (HOST:PORT, [V6]:PORT) in entry. Strict on purpose: what this
 * reads as the host must be what libcurl in the bridge connects to (the
 * proxy holds either way: a host read otherwise is a denied call). */
static int url_entry(const char *file, const char *url, size_t urllen, char *entry, size_t entrylen,
                     char *err, size_t errlen)
{
    bool https = strncmp(url, "https://", 8) == 0;
    const char *a = url + (https ? 8 : 7), *e;
    if (!https && strncmp(url, "http://", 7) != 0)
        return td_fail(err, errlen, "%s: mcp_server.url: expected an https:// URL", file);
    if (strlen(url) != urllen || urllen > 2048)
        return td_fail(err, errlen, "%s: mcp_server.url: over 2048 bytes or with a NUL", file);
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '\\' || *p == '#')
            return td_fail(err, errlen,
                           "%s: mcp_server.url: a space, control character, backslash or "
                           "fragment (#) in it",
                           file);
    e = a + strcspn(a, "/?");
    char host[256];
    const char *port = NULL, *hend;
    if (*a == '[') {
        hend = memchr(a, ']', (size_t)(e - a));
        if (!hend)
            return td_fail(err, errlen, "%s: mcp_server.url: an IPv6 address without its ]", file);
        hend++;
        port = hend < e && *hend == ':' ? hend + 1 : NULL;
        if (hend < e && !port)
            return td_fail(err, errlen, "%s: mcp_server.url: expected :PORT after ]", file);
    } else {
        hend = memchr(a, ':', (size_t)(e - a));
        port = hend ? hend + 1 : NULL;
        hend = hend ? hend : e;
    }
    size_t hn = (size_t)(hend - a);
    for (size_t i = 0; i < hn; i++)
        if (!(a[i] == '.' || a[i] == '-' || a[i] == ':' || a[i] == '[' || a[i] == ']' ||
              (a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'z') ||
              (a[i] >= 'A' && a[i] <= 'Z')))
            return td_fail(err, errlen,
                           "%s: mcp_server.url: the host is a name (letters, digits, '.', '-') "
                           "or an address, without user info (@) or %%-escapes",
                           file);
    if (hn == 0 || hn >= sizeof(host))
        return td_fail(err, errlen, "%s: mcp_server.url: no host, or one over 255 bytes", file);
    memcpy(host, a, hn);
    host[hn] = '\0';
    long pn = https ? 443 : 80;
    if (port) {
        char *pe;
        pn = strtol(port, &pe, 10);
        if (pe != e || port == e || !(*port >= '0' && *port <= '9') || pn < 1 || pn > 65535)
            return td_fail(err, errlen, "%s: mcp_server.url: the port must be 1-65535", file);
    }
    /* in clear text only to the host's own loopback (a test, a local
     * server): anywhere else a credential would cross the network so */
    struct in_addr v4;
    bool loopback = strcmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0 ||
                    (inet_pton(AF_INET, host, &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127);
    if (!https && !loopback)
        return td_fail(err, errlen,
                       "%s: mcp_server.url: expected https:// (http:// only to a loopback "
                       "address: 127.0.0.1, [::1], localhost)",
                       file);
    snprintf(entry, entrylen, "%s:%ld", host, pn);
    return 0;
}

/* The URL's host added to network.allow (a new object or the one there):
 * the bridge reaches the server through the egress proxy, and only so. */
static int url_network(const char *file, json_t *def, const char *entry, char *err, size_t errlen)
{
    json_t *net = json_object_get(def, "network"), *allow, *v;
    size_t i;
    if (net && !json_is_object(net))
        return td_fail(err, errlen,
                       "%s: network: with mcp_server.url, an object {\"allow\": [...]} or left "
                       "out: the server is reached through the egress proxy, whose allow-list "
                       "gets the URL's host",
                       file);
    if (!net)
        json_object_set_new(def, "network", net = json_object());
    allow = json_object_get(net, "allow");
    if (!allow)
        json_object_set_new(net, "allow", allow = json_array());
    if (!json_is_array(allow))
        return 0; /* the network key's own check says what is wrong */
    json_array_foreach(allow, i, v) if (json_is_string(v) &&
                                        strcmp(json_string_value(v), entry) == 0) return 0;
    return json_array_append_new(allow, json_string(entry)) < 0 ? -ENOMEM : 0;
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
        return td_fail(err, errlen,
                       "%s: mcp_server: expected an object {\"command\": [...]} or "
                       "{\"url\": \"https://...\"}",
                       file);
    for (size_t i = 0; i < sizeof(server_owns) / sizeof(server_owns[0]); i++)
        if (json_object_get(def, server_owns[i]))
            return td_fail(err, errlen,
                           "%s: %s: not with \"mcp_server\" (its tools say it; the server's "
                           "environment is mcp_server.env%s)",
                           file, server_owns[i],
                           strcmp(server_owns[i], "start") && strcmp(server_owns[i], "max_forks")
                               ? ""
                               : "; a Python server's tools kept warm: mcp_server.start");
    if (strchr(t->name, '.'))
        return td_fail(err, errlen,
                       "%s: name: an MCP server's name has no '.' (its tools are NAME.TOOL)", file);
    const char *key;
    json_object_foreach(m, key, v)
    {
        if (strcmp(key, "command") && strcmp(key, "env") && strcmp(key, "env_credentials") &&
            strcmp(key, "url") && !td_mcppy_key(key))
            return td_fail(err, errlen,
                           "%s: mcp_server.%s: unknown key (command, url, python_module, python, "
                           "args, start, max_forks, env, env_credentials)",
                           file, key);
    }
    json_t *url = json_object_get(m, "url");
    if (url && json_object_get(m, "command"))
        return td_fail(err, errlen, "%s: mcp_server: \"command\" or \"url\", not both", file);
    if (url && json_object_get(m, "env_credentials"))
        return td_fail(err, errlen,
                       "%s: mcp_server.env_credentials: not with url (no process of the "
                       "server's runs here); its key goes in network.headers, which the "
                       "egress proxy adds",
                       file);
    if (url && json_object_get(m, "env"))
        return td_fail(err, errlen,
                       "%s: mcp_server.env: not with url (no process of the server's runs "
                       "here)",
                       file);
    json_t *pycmd = NULL, *max_forks = NULL;
    bool warm = false;
    if (td_mcppy_parse(file, m, &pycmd, &warm, &max_forks, err, errlen) < 0)
        return -EINVAL;
    if (url && pycmd) {
        json_decref(pycmd);
        return td_fail(err, errlen, "%s: mcp_server: \"python_module\" or \"url\", not both", file);
    }
    if (env_credentials(file, m, t, err, errlen) < 0) {
        json_decref(pycmd);
        return -EINVAL;
    }
    const char *is = inst ? te_json_text_value(inst) : "call";
    if (!is || (strcmp(is, "call") && strcmp(is, "session") && strcmp(is, "shared"))) {
        json_decref(pycmd);
        return td_fail(err, errlen, "%s: instance: expected \"call\", \"session\" or \"shared\"",
                       file);
    }
    t->mcp_instance = strcmp(is, "session") == 0  ? TD_MCP_SESSION
                      : strcmp(is, "shared") == 0 ? TD_MCP_SHARED
                                                  : TD_MCP_CALL;
    if (t->mcp_instance != TD_MCP_CALL && (url || warm)) {
        json_decref(pycmd);
        return td_fail(err, errlen,
                       "%s: instance: \"%s\" only for a server run here (a command, or a "
                       "python_module started cold): %s",
                       file, is,
                       url ? "a url's server is reached afresh by each call"
                           : "each call of a warm server is a fresh fork of its template");
    }
    if (instance_keys(file, def, t, err, errlen) < 0) {
        json_decref(pycmd);
        return -EINVAL;
    }
    char entry[300];
    if (url && !te_json_is_text(url))
        return td_fail(err, errlen, "%s: mcp_server.url: expected a string", file);
    if (url && (url_entry(file, json_string_value(url), json_string_length(url), entry,
                          sizeof(entry), err, errlen) < 0 ||
                url_network(file, def, entry, err, errlen) < 0))
        return -EINVAL;
    if (url)
        return made(dir, def, NULL, json_string_value(url), false, NULL, t);
    json_t *cmd = pycmd ? pycmd : json_object_get(m, "command"), *a;
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
    int r = made(dir, def, cmd, NULL, warm, max_forks, t);
    json_decref(pycmd);
    return r;
}

/* "x-mcp-header" keys anywhere in v (a schema; props: v is a "properties"
 * map, whose keys are names). */
static size_t marks(json_t *v, bool props)
{
    size_t n = 0, i;
    const char *k;
    json_t *x;
    if (json_is_object(v)) {
        json_object_foreach(v, k, x)
        {
            n += !props && strcmp(k, "x-mcp-header") == 0;
            n += marks(x, !props && strcmp(k, "properties") == 0);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x) n += marks(x, false);
    }
    return n;
}

/* A server at a URL speaking 2026-07-28 may mark parameters "x-mcp-header":
 * NAME, which the bridge sends as Mcp-Param-NAME too. Each mark on a
 * property reached by "properties" alone (ptr its JSON pointer), of type
 * string, integer or boolean, NAME an HTTP token unique whatever its case:
 * "--param-header" "NAME=POINTER" added to cmd; -1 with why otherwise. */
static int param_headers(json_t *schema, const char *ptr, json_t *cmd, json_t *seen, size_t *n,
                         char *why, size_t whylen)
{
    const char *k;
    json_t *p;
    json_object_foreach(json_object_get(schema, "properties"), k, p)
    {
        char sub[512], *o = sub + snprintf(sub, sizeof(sub) - 2, "%s/", ptr);
        for (const char *c = k; *c && o < sub + sizeof(sub) - 3; c++)
            if (*c == '~' || *c == '/')
                *o++ = '~', *o++ = *c == '~' ? '0' : '1';
            else
                *o++ = *c;
        *o = '\0';
        const char *h = json_string_value(json_object_get(p, "x-mcp-header"));
        const char *type = json_string_value(json_object_get(p, "type"));
        char lower[128];
        size_t i = 0;
        for (; h && h[i] && i < sizeof(lower) - 1; i++) {
            if (!strchr("!#$%&'*+-.^_`|~", h[i]) && !(h[i] >= '0' && h[i] <= '9') &&
                !(h[i] >= 'a' && h[i] <= 'z') && !(h[i] >= 'A' && h[i] <= 'Z'))
                break;
            lower[i] = (char)(h[i] >= 'A' && h[i] <= 'Z' ? h[i] + 32 : h[i]);
        }
        if (json_object_get(p, "x-mcp-header")) {
            (*n)++;
            lower[i] = '\0';
            if (!h || !*h || h[i])
                return snprintf(why, whylen, "x-mcp-header of %.64s: not an HTTP token", k), -1;
            if (!type ||
                (strcmp(type, "string") && strcmp(type, "integer") && strcmp(type, "boolean")))
                return snprintf(why, whylen,
                                "x-mcp-header of %.64s: not a string, integer or boolean", k),
                       -1;
            if (json_object_get(seen, lower) || strlen(sub) >= sizeof(sub) - 4)
                return snprintf(why, whylen, "x-mcp-header %.64s: twice, or too deep", h), -1;
            json_object_set_new(seen, lower, json_true());
            char arg[700];
            snprintf(arg, sizeof(arg), "%s=%s", h, sub);
            json_array_append_new(cmd, json_string("--param-header"));
            json_array_append_new(cmd, json_string(arg));
        }
        if (param_headers(p, sub, cmd, seen, n, why, whylen) < 0)
            return -1;
    }
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
    json_t *cmd = !bridge   ? NULL
                  : m->url  ? json_pack("[s,s,s,s,s]", bridge, "call", name, "--url", m->url)
                  : m->warm ? td_mcppy_warm_command(m->command, bridge, server->name)
                            : json_pack("[s,s,s,s]", bridge, "call", name, "--");
    free(bridge);
    if (!def || !cmd) {
        json_decref(def);
        json_decref(cmd);
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    if (m->command && !m->warm)
        json_array_extend(cmd, m->command);
    json_t *schema = json_object_get(listed, "inputSchema"), *seen = json_object();
    size_t n = 0;
    if (m->url &&
        (param_headers(schema, "", cmd, seen, &n, why, whylen) < 0 ||
         (n != marks(schema, false) &&
          snprintf(why, whylen, "x-mcp-header where \"properties\" alone do not lead") > 0))) {
        char tmp[512];
        snprintf(tmp, sizeof(tmp), "%.80s: %s", name, why);
        snprintf(why, whylen, "%s", tmp);
        json_decref(seen);
        json_decref(cmd);
        json_decref(def);
        return NULL;
    }
    json_decref(seen);
    json_object_set_new(def, "command", cmd);
    if (m->warm)
        json_object_set_new(def, "start", json_string("warm"));
    if (m->max_forks)
        json_object_set(def, "max_forks", m->max_forks);
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
    /* bridge "call" TOOL "--" COMMAND... (td_mcpdef_tool_def); a warm
     * one's command is the template program's, without the server's; a
     * url's server has no command */
    t->mcp_cmd = server->mcp->warm || server->mcp->url ? 0 : 4;
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
    json_decref(m->max_forks);
    free(m->url);
    free(m->dir);
    free(m);
}

const char *td_mcpdef_dir(const struct td_tool *server)
{
    return server->mcp ? server->mcp->dir : NULL;
}
