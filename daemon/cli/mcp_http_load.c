/*
 * mcp_http_load.c - `toolexec mcp --listen` from its module,
 * toolexec-mcp-http.so (mcp_http.h): the HTTP front and its authorization
 * with their libraries (libmicrohttpd, gnutls, cjose and OpenSSL,
 * http-parser), loaded here, when it serves, rather than by the loader at
 * every start of every command. The module calls back into this program's
 * own code (built with its symbols exported).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mcp_http.h"

#ifndef CLI_LIBEXECDIR
#define CLI_LIBEXECDIR "/usr/libexec/toolexecd"
#endif

#define MODULE "toolexec-mcp-http.so"

typedef int serve_fn(struct cli *, const struct mcp_http_opts *, const struct mcp *,
                     const struct mcp_auth_cfg *);

/* Beside us (a build tree), else installed; where the program was
 * installed elsewhere than built for (DESTDIR, a moved prefix), in
 * ../libexec/toolexecd from it. */
static void *load(char *why, size_t len)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - sizeof(MODULE) - 1);
    char *slash = n > 0 ? (path[n] = '\0', strrchr(path, '/')) : NULL;
    void *h = NULL;
    if (slash) {
        strcpy(slash + 1, MODULE);
        if (access(path, R_OK) == 0)
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h && access(CLI_LIBEXECDIR "/" MODULE, R_OK) == 0)
        h = dlopen(CLI_LIBEXECDIR "/" MODULE, RTLD_NOW | RTLD_LOCAL);
    if (!h && slash &&
        (size_t)(slash - path) + sizeof("/../libexec/toolexecd/" MODULE) <= sizeof(path)) {
        strcpy(slash, "/../libexec/toolexecd/" MODULE);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    const char *e = h ? NULL : dlerror();
    if (!h)
        snprintf(why, len, "%s", e ? e : "not found");
    return h;
}

int mcp_http_serve_module(struct cli *cli, const struct mcp_http_opts *o, const struct mcp *tmpl,
                          const struct mcp_auth_cfg *auth)
{
    char why[512];
    void *h = load(why, sizeof(why));
    serve_fn *serve = h ? (serve_fn *)dlsym(h, "mcp_http_serve") : NULL;
    if (!serve) {
        fprintf(stderr, "toolexec mcp --listen: cannot load %s: %s\n", MODULE, h ? dlerror() : why);
        return CLI_EXIT_ERROR;
    }
    return serve(cli, o, tmpl, auth);
}
