/*
 * proxy_parser.c - the egress proxy's http-parser in toolexecd-sandbox
 * and its module (sandboxrun_lean.c, sandboxrun_module.c), opened when a
 * run has an
 * egress proxy (an allow-list: its requests are parsed, proxy_head.c),
 * not mapped by the loader at every run: most runs have none (--net off
 * or host). The five functions the proxy calls are defined here and call
 * the library's, which td_proxy_parser_open() (the engine's
 * td_sbx_proxy_prepare) found first, before the call starts; a run that
 * cannot have them says so and does not run. The daemon links the library
 * itself.
 */
#include <dlfcn.h>
#include <http_parser.h>
#include <stdio.h>

#include "proxy_parser.h"

static struct {
    void (*init)(http_parser *, enum http_parser_type);
    size_t (*execute)(http_parser *, const http_parser_settings *, const char *, size_t);
    const char *(*method_str)(enum http_method);
    void (*url_init)(struct http_parser_url *);
    int (*parse_url)(const char *, size_t, int, struct http_parser_url *);
} real;

int td_proxy_parser_open(char *err, size_t errlen)
{
    if (real.parse_url)
        return 0;
    void *h = dlopen(TD_HTTP_PARSER_SONAME, RTLD_NOW | RTLD_LOCAL);
    static const char *const names[] = {"http_parser_init", "http_parser_execute",
                                        "http_method_str", "http_parser_url_init",
                                        "http_parser_parse_url"};
    void *f[5];
    for (size_t i = 0; h && i < 5; i++)
        if (!(f[i] = dlsym(h, names[i]))) {
            snprintf(err, errlen, "%s: no %s", TD_HTTP_PARSER_SONAME, names[i]);
            return -1;
        }
    if (!h) {
        snprintf(err, errlen, "%s", dlerror());
        return -1;
    }
    *(void **)&real.init = f[0];
    *(void **)&real.execute = f[1];
    *(void **)&real.method_str = f[2];
    *(void **)&real.url_init = f[3];
    *(void **)&real.parse_url = f[4];
    return 0;
}

void http_parser_init(http_parser *parser, enum http_parser_type type)
{
    real.init(parser, type);
}

size_t http_parser_execute(http_parser *parser, const http_parser_settings *settings,
                           const char *data, size_t len)
{
    return real.execute(parser, settings, data, len);
}

const char *http_method_str(enum http_method m)
{
    return real.method_str(m);
}

void http_parser_url_init(struct http_parser_url *u)
{
    real.url_init(u);
}

int http_parser_parse_url(const char *buf, size_t buflen, int is_connect, struct http_parser_url *u)
{
    return real.parse_url(buf, buflen, is_connect, u);
}
