/*
 * serveradd.c - toolexec mcp-add: an MCP server from the npm registry (or a
 * package tarball) or from PyPI (or a wheel: serveradd_pypi.c) installed
 * where the calls' view shows it, or one at a URL (Streamable HTTP), and an
 * "mcp_server" definition written for it (toolexecd.tools(5), MCP SERVERS).
 *
 *   toolexec mcp-add NAME --npm PACKAGE[@VERSION] [--prefix DIR] [--dir DIR]
 *                    [--node PATH] [--bin NAME] [--read P] [--write P]
 *                    [--scripts] [--force] [-- SERVER-ARGS...]
 *   toolexec mcp-add NAME --pypi PACKAGE[==VERSION] [--module M] [--python P]
 *                    [...the same but --node and --scripts]
 *   toolexec mcp-add NAME --url URL [--header NAME=CREDENTIAL]...
 *                    [--credentials-dir DIR] [--dir DIR] [--force]
 *
 * The network is used here, once, by npm or pip; a call of the server runs
 * node or Python and the installed files, never npm or pip. A URL's server
 * installs nothing: the daemon adds its host to the allow-list, and each
 * --header is a network.headers credential the egress proxy adds (the API
 * key never in a call). The definition is checked by the daemon's own
 * --check before it goes into the tools directory, so what is written is
 * what the daemon loads.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "serveradd.h"

#define ADD_PREFIX "/opt/toolexecd/mcp"
#define ADD_TOOLS_DIR "/etc/toolexecd/tools.d"

extern char **environ;

struct add {
    const char *name, *spec, *prefix, *dir, *node, *bin;
    const char *pypi, *module, *python; /* --pypi's (spec is --npm's) */
    json_t *read, *write, *args;
    bool scripts, force;
    char root[PATH_MAX]; /* prefix/name: the package's install directory */
    /* a server at a URL: its headers ({"Name": "CREDENTIAL"}), the
     * credentials directory --check reads them from (NULL: its default);
     * npm_opt: an option of npm's given (refused beside --url) */
    const char *url, *creddir, *npm_opt;
    json_t *headers;
};

static int mkdirs(const char *path)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
        return -1;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return -1;
            if (!(*s = c))
                return 0;
        }
    }
}

/* The installed package's name: the one dependency npm recorded in the
 * prefix's package.json, or the one named by the spec (NAME@VERSION, a
 * scope's @ first) when there are more. */
static char *package_name(const struct add *a)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/package.json", a->root) >= (int)sizeof(path))
        return NULL;
    json_t *pkg = json_load_file(path, 0, NULL);
    json_t *deps = json_object_get(pkg, "dependencies");
    char *out = NULL;
    const char *key;
    json_t *v;
    const char *at = strchr(a->spec + 1, '@');
    size_t n = at ? (size_t)(at - a->spec) : strlen(a->spec);
    json_object_foreach(deps, key, v)
    {
        if (!out &&
            (json_object_size(deps) == 1 || (strlen(key) == n && !strncmp(key, a->spec, n))))
            out = strdup(key);
    }
    json_decref(pkg);
    if (!out)
        cli_err("mcp-add: %s: no dependency there names the package of '%s'", path, a->spec);
    return out;
}

/* The package's program: its "bin" (the one there is, --bin's, or the one
 * named as the package is), as a real path under the install directory. */
static char *package_bin(const struct add *a, const char *pkgname)
{
    char path[PATH_MAX], file[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/node_modules/%s/package.json", a->root, pkgname) >=
        (int)sizeof(path))
        return NULL;
    json_t *pkg = json_load_file(path, 0, NULL);
    json_t *bin = json_object_get(pkg, "bin");
    const char *base = strrchr(pkgname, '/') ? strrchr(pkgname, '/') + 1 : pkgname;
    const char *rel = json_string_value(bin);
    if (json_is_object(bin)) {
        const char *want = a->bin ? a->bin : json_object_size(bin) == 1 ? NULL : base;
        const char *key;
        json_t *v;
        json_object_foreach(bin, key, v)
        {
            if (!want || !strcmp(key, want))
                rel = json_string_value(v);
        }
    }
    if (!rel) {
        cli_err("mcp-add: %s: no \"bin\" to run%s%s%s", path, a->bin ? " named '" : "",
                a->bin ? a->bin : "", a->bin ? "'" : " (--bin NAME says which)");
        json_decref(pkg);
        return NULL;
    }
    int n = snprintf(file, sizeof(file), "%s/node_modules/%s/%s", a->root, pkgname, rel);
    json_decref(pkg);
    if (n >= (int)sizeof(file))
        return NULL;
    char *real = realpath(file, NULL);
    if (!real)
        cli_err("mcp-add: %s: %s", file, strerror(errno));
    return real;
}

/* node as the calls will run it: --node's, else the first on PATH. */
static char *find_node(const char *given)
{
    if (given)
        return realpath(given, NULL);
    const char *path = getenv("PATH");
    char *copy = strdup(path ? path : "/usr/bin:/bin"), *save = NULL, *out = NULL;
    for (char *d = strtok_r(copy, ":", &save); d && !out; d = strtok_r(NULL, ":", &save)) {
        char f[PATH_MAX];
        if (snprintf(f, sizeof(f), "%s/node", d) < (int)sizeof(f) && access(f, X_OK) == 0)
            out = realpath(f, NULL);
    }
    free(copy);
    return out;
}

/* cmd (taken) run by interp (node, Python), with the server's arguments. */
static json_t *definition(const struct add *a, json_t *cmd, const char *interp)
{
    json_array_extend(cmd, a->args);
    json_t *read = json_pack("[s]", a->root);
    /* an interpreter of its own (not the system's) is shown to the calls too */
    if (strncmp(interp, "/usr/", 5) != 0) {
        char *dir = strdup(interp);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        if (slash && slash != dir) {
            *slash = '\0';
            json_array_append_new(read, json_string(dir));
        }
        free(dir);
    }
    json_array_extend(read, a->read);
    json_t *fs = json_pack("{s:o}", "read", read);
    if (json_array_size(a->write))
        json_object_set(fs, "write", a->write);
    return json_pack("{s:s, s:{s:o}, s:s, s:o, s:i}", "name", a->name, "mcp_server", "command", cmd,
                     "instance", "call", "filesystem", fs, "timeout_ms", 30000);
}

/* A --write directory its calls may not write: the view lets them, the
 * host's permissions do not, and the server's first write would fail with
 * a bare EACCES. A root daemon runs each call as a uid of its own that no
 * file names (--call-uids), so only the "other" bits let it in; an
 * unprivileged daemon's calls are its own user, here taken to be ours. Said,
 * not refused: the daemon may run with --call-uids no, or the server may
 * write only in subdirectories that let it. */
static void warn_unwritable(const struct add *a)
{
    size_t i;
    json_t *v;
    json_array_foreach(a->write, i, v)
    {
        const char *w = json_string_value(v);
        struct stat st;
        if (stat(w, &st) < 0 || !S_ISDIR(st.st_mode))
            continue; /* the daemon's --check says what is wrong */
        if (geteuid() == 0 && (st.st_mode & (S_IWOTH | S_IXOTH)) != (S_IWOTH | S_IXOTH))
            cli_err("mcp-add: warning: --write %s: a root toolexecd runs each call as a uid of its "
                    "own (--call-uids), which may not write there (owner uid %u, mode %04o): "
                    "chmod 1777 it, or give the definition a \"user\" who owns it",
                    w, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        else if (geteuid() != 0 && access(w, W_OK | X_OK) < 0)
            cli_err("mcp-add: warning: --write %s: you (uid %u), the user an unprivileged "
                    "toolexecd's calls run as, may not write there: %s",
                    w, (unsigned)geteuid(), strerror(errno));
    }
}

/* network.headers' key for url: its host as the allow-list writes it,
 * with its port unless HTTPS's own (an http:// loopback URL's credential
 * goes only to a host written with its port: 80 when the URL has none).
 * NULL: not http(s) (--check says what is wrong with it). */
static char *header_host(const char *url)
{
    bool https = strncmp(url, "https://", 8) == 0;
    if (!https && strncmp(url, "http://", 7) != 0)
        return NULL;
    const char *h = url + (https ? 8 : 7), *end = h + strcspn(h, "/?#");
    const char *colon = h;
    if (*h == '[') /* an IPv6 address: its port after the ] */
        colon = memchr(h, ']', (size_t)(end - h)) ? memchr(h, ']', (size_t)(end - h)) + 1 : end;
    while (colon < end && *colon != ':')
        colon++;
    int hostlen = (int)(colon - h), portlen = colon < end ? (int)(end - colon - 1) : 0;
    const char *port = portlen ? colon + 1 : https ? "443" : "80";
    if (!portlen)
        portlen = (int)strlen(port);
    char *key = NULL;
    if (https && portlen == 3 && strncmp(port, "443", 3) == 0)
        return strndup(h, (size_t)hostlen);
    return asprintf(&key, "%.*s:%.*s", hostlen, h, portlen, port) < 0 ? NULL : key;
}

static json_t *url_definition(const struct add *a)
{
    json_t *def = json_pack("{s:s, s:{s:s}, s:i}", "name", a->name, "mcp_server", "url", a->url,
                            "timeout_ms", 30000);
    if (!def || !json_object_size(a->headers))
        return def; /* the daemon adds the URL's host to network.allow */
    char *host = header_host(a->url);
    json_t *hs = json_object(), *v;
    const char *name;
    json_object_foreach(a->headers, name, v)
    {
        json_object_set_new(hs, name, json_pack("{s:O}", "credential", v));
    }
    if (!host ||
        json_object_set_new(def, "network", json_pack("{s:{s:o}}", "headers", host, hs)) < 0) {
        cli_err("mcp-add: --url %s: expected an http:// or https:// URL", a->url);
        json_decref(def);
        def = NULL;
    }
    free(host);
    return def;
}

/* The definition, alone in a directory of its own, through the daemon's
 * --check; then into the tools directory under its name (rename: a reload
 * never sees half of it). what: where the server is, for the last line. */
static int write_checked(const struct add *a, json_t *def, const char *what)
{
    char tmpdir[] = "/tmp/toolexec-mcp-add-XXXXXX", file[PATH_MAX], final[PATH_MAX], part[PATH_MAX],
         daemon[PATH_MAX];
    if (!mkdtemp(tmpdir)) {
        cli_err("mcp-add: mkdtemp: %s", strerror(errno));
        return CLI_EXIT_ERROR;
    }
    snprintf(file, sizeof(file), "%s/%s.json", tmpdir, a->name);
    int rc = json_dump_file(def, file, JSON_INDENT(2)) == 0 ? 0 : -1;
    if (rc == 0) {
        chmod(file, 0644);
        char *argv[] = {
            (char *)cli_find_daemon(daemon, sizeof(daemon)), "--check",          "--tools", tmpdir,
            a->creddir ? "--credentials-dir" : NULL,         (char *)a->creddir, NULL};
        rc = cli_add_run(argv);
        if (rc != 0)
            cli_err("mcp-add: the daemon's --check refused the definition (above); nothing "
                    "written to %s",
                    a->dir);
    }
    unlink(file);
    rmdir(tmpdir);
    if (rc != 0)
        return CLI_EXIT_ERROR;
    snprintf(final, sizeof(final), "%s/%s.json", a->dir, a->name);
    snprintf(part, sizeof(part), "%s/.%s.json.part", a->dir, a->name);
    if (mkdirs(a->dir) < 0 || json_dump_file(def, part, JSON_INDENT(2)) < 0 ||
        chmod(part, 0644) < 0 || rename(part, final) < 0) {
        cli_err("mcp-add: cannot write %s: %s", final, strerror(errno));
        unlink(part);
        return CLI_EXIT_ERROR;
    }
    printf("%s: MCP server %s, %s (a reload loads its tools as %s.TOOL)\n", final, a->name, what,
           a->name);
    return CLI_EXIT_OK;
}

/* def (taken) checked and written, and its --write directories looked at */
static int written(const struct add *a, json_t *def)
{
    char what[PATH_MAX + 16];
    snprintf(what, sizeof(what), "installed in %s", a->root);
    int rc = def ? write_checked(a, def, what) : CLI_EXIT_ERROR;
    if (rc == 0)
        warn_unwritable(a);
    json_decref(def);
    return rc;
}

static int install_pypi(const struct add *a)
{
    char *interp = NULL;
    json_t *cmd = cli_add_pypi(&(struct cli_add_pypi){.root = a->root,
                                                      .spec = a->pypi,
                                                      .module = a->module,
                                                      .bin = a->bin,
                                                      .python = a->python},
                               &interp);
    int rc = written(a, cmd ? definition(a, cmd, interp) : NULL);
    free(interp);
    return rc;
}

static int install(struct add *a)
{
    char final[PATH_MAX];
    snprintf(final, sizeof(final), "%s/%s.json", a->dir, a->name);
    if (!a->force && access(final, F_OK) == 0)
        return cli_usage_error("mcp-add", "%s exists (--force replaces it)", final);
    if (a->url) {
        json_t *def = url_definition(a);
        char what[PATH_MAX + 16];
        snprintf(what, sizeof(what), "at %s", a->url);
        int rc = def ? write_checked(a, def, what) : CLI_EXIT_ERROR;
        json_decref(def);
        return rc;
    }
    if (snprintf(a->root, sizeof(a->root), "%s/%s", a->prefix, a->name) >= (int)sizeof(a->root) ||
        mkdirs(a->root) < 0) {
        cli_err("mcp-add: %s: %s", a->root, strerror(errno));
        return CLI_EXIT_ERROR;
    }
    if (a->pypi)
        return install_pypi(a);
    /* install scripts run as whoever runs this (root, often): not unless
     * asked for */
    char *argv[] = {"npm",           "install",
                    "--prefix",      a->root,
                    "--no-audit",    "--no-fund",
                    "--omit=dev",    a->scripts ? "--ignore-scripts=false" : "--ignore-scripts",
                    (char *)a->spec, NULL};
    if (cli_add_install(argv, NULL, "npm install of '%s' into %s", a->spec, a->root) < 0)
        return CLI_EXIT_ERROR;
    char *pkgname = package_name(a), *bin = pkgname ? package_bin(a, pkgname) : NULL;
    char *node = find_node(a->node);
    json_t *def = NULL;
    if (bin && !node)
        cli_err("mcp-add: no node %s%s (--node PATH says which)", a->node ? "at " : "on PATH",
                a->node ? a->node : "");
    if (bin && node)
        def = definition(a, json_pack("[s,s]", node, bin), node);
    int rc = written(a, def);
    free(pkgname);
    free(bin);
    free(node);
    return rc;
}

/* --header NAME=CREDENTIAL: the header NAME of each request to the URL's
 * host, its value the file CREDENTIAL of the daemon's credentials
 * directory. -1 taken, else the usage error's status. */
static int header_option(struct add *a, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return cli_usage_error("mcp-add",
                               "--header %s: expected NAME=CREDENTIAL (a header's "
                               "name, a file of the credentials directory)",
                               arg);
    char *name = strndup(arg, (size_t)(eq - arg));
    const char *key;
    json_t *v;
    int rc = -1;
    json_object_foreach(a->headers, key, v)
    {
        if (name && strcasecmp(key, name) == 0)
            rc = cli_usage_error("mcp-add", "--header %s: given twice", name);
    }
    if (rc < 0 && (!name || json_object_set_new(a->headers, name, json_string(eq + 1)) < 0))
        rc = cli_usage_error("mcp-add", "--header %s: out of memory", arg);
    free(name);
    return rc;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-'))
            return false;
    return true;
}

int cli_cmd_mcp_add(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"npm", required_argument, NULL, 'n'},
        {"pypi", required_argument, NULL, 'P'},
        {"module", required_argument, NULL, 'm'},
        {"python", required_argument, NULL, 'y'},
        {"prefix", required_argument, NULL, 'p'},
        {"dir", required_argument, NULL, 'd'},
        {"node", required_argument, NULL, 'N'},
        {"bin", required_argument, NULL, 'b'},
        {"read", required_argument, NULL, 'r'},
        {"write", required_argument, NULL, 'w'},
        {"scripts", no_argument, NULL, 'S'},
        {"force", no_argument, NULL, 'f'},
        {"url", required_argument, NULL, 'u'},
        {"header", required_argument, NULL, 'H'},
        {"credentials-dir", required_argument, NULL, 'C'},
        {0},
    };
    struct add a = {.prefix = ADD_PREFIX, .dir = ADD_TOOLS_DIR};
    a.read = json_array();
    a.write = json_array();
    a.args = json_array();
    a.headers = json_object();
    int opt, rc = -1, idx;
    while (rc < 0 && (opt = getopt_long(argc, argv, ":s:jh", opts, &idx)) != -1) {
        if (cli_common_option(cli, opt, optarg))
            continue;
        if (opt && strchr("pNbSrwmy", opt)) /* npm's or pip's (and the view of what it installs) */
            a.npm_opt = opts[idx].name;
        switch (opt) {
        case 'u':
            a.url = optarg;
            break;
        case 'C':
            a.creddir = optarg;
            break;
        case 'H':
            rc = header_option(&a, optarg);
            break;
        case 'n':
            a.spec = optarg;
            break;
        case 'p':
            a.prefix = optarg;
            break;
        case 'P':
            a.pypi = optarg;
            break;
        case 'm':
            a.module = optarg;
            break;
        case 'y':
            a.python = optarg;
            break;
        case 'd':
            a.dir = optarg;
            break;
        case 'N':
            a.node = optarg;
            break;
        case 'b':
            a.bin = optarg;
            break;
        case 'S':
            a.scripts = true;
            break;
        case 'f':
            a.force = true;
            break;
        case 'r':
        case 'w':
            if (optarg[0] != '/')
                rc = cli_usage_error("mcp-add", "--%s %s: expected an absolute path",
                                     opt == 'r' ? "read" : "write", optarg);
            else
                json_array_append_new(opt == 'r' ? a.read : a.write, json_string(optarg));
            break;
        case 'h':
            rc = cli_help("mcp-add");
            break;
        default:
            rc = cli_bad_option("mcp-add", opt, argv);
        }
    }
    if (rc < 0 && optind >= argc)
        rc = cli_usage_error("mcp-add", "expected the server's NAME");
    else if (rc < 0 && !name_ok(argv[optind]))
        rc = cli_usage_error("mcp-add",
                             "%s: expected a name of 1 to 64 of A-Z a-z 0-9 _ - (its tools "
                             "are NAME.TOOL)",
                             argv[optind]);
    else if (rc < 0 && (!a.spec + !a.pypi + !a.url) != 2)
        rc = cli_usage_error("mcp-add", "expected one of --npm PACKAGE[@VERSION] (or a tarball's "
                                        "path), --pypi PACKAGE[==VERSION] (or a wheel's path) "
                                        "or --url URL");
    else if (rc < 0 && a.url && (a.npm_opt || optind + 1 < argc))
        rc = cli_usage_error("mcp-add",
                             "%s%s: not with --url (no process of the server's runs here)",
                             a.npm_opt ? "--" : "", a.npm_opt ? a.npm_opt : argv[optind + 1]);
    else if (rc < 0 && !a.url && (json_object_size(a.headers) || a.creddir))
        rc = cli_usage_error("mcp-add", "--header and --credentials-dir: only with --url (a "
                                        "credential for a server at a URL, added by the proxy)");
    else if (rc < 0 && a.spec && (a.module || a.python))
        rc = cli_usage_error("mcp-add", "--module and --python go with --pypi");
    else if (rc < 0 && a.pypi && (a.node || a.scripts))
        rc = cli_usage_error("mcp-add", "--node and --scripts go with --npm");
    else if (rc < 0 && (a.prefix[0] != '/' || a.dir[0] != '/'))
        rc = cli_usage_error("mcp-add", "--prefix and --dir: expected absolute paths");
    if (rc < 0) {
        a.name = argv[optind++];
        if (optind < argc && strcmp(argv[optind], "--") == 0)
            optind++;
        for (; optind < argc; optind++)
            json_array_append_new(a.args, json_string(argv[optind]));
        rc = install(&a);
    }
    json_decref(a.read);
    json_decref(a.write);
    json_decref(a.args);
    json_decref(a.headers);
    return rc;
}
