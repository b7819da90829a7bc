/*
 * proxy_parser.h - the egress proxy's http-parser opened on demand, in the
 * programs that do not link it (proxy_parser.c).
 */
#ifndef TD_PROXY_PARSER_H
#define TD_PROXY_PARSER_H

#include <stddef.h>

/* The library opened and the five functions the proxy calls found: 0, or
 * -1 with why in err. */
int td_proxy_parser_open(char *err, size_t errlen);

#endif
