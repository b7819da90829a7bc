/*
 * proxy_head.h - the egress proxy's request heads without sockets
 * (proxy_head.c): a plain request's head read (http-parser) and its target
 * and Host headers checked, the origin-form request made with its
 * credential headers; the head a TLS-ended connection sends rewritten with
 * them. proxy_request.c and proxy_tls.c call these on their buffers;
 * tests/fuzz/fuzz_proxy_head.c calls them on anything.
 */
#ifndef TD_PROXY_HEAD_H
#define TD_PROXY_HEAD_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>

struct td_cred_host;

#define TD_PROXY_MAX_HEADERS 100

/* A request head as read so far: buf (the caller's, TD_PROXY_HEAD_MAX
 * bytes) holds len bytes; spans are offsets into it. */
struct td_proxy_head {
    http_parser parser;
    char *buf;
    size_t len, end; /* end: where the head ends (once complete) */
    long url[2];
    long hdr[TD_PROXY_MAX_HEADERS][4]; /* name from, to; value from, to */
    int nhdr;
    bool in_value;
};

enum td_head_state { TD_HEAD_MORE, TD_HEAD_DONE, TD_HEAD_BAD, TD_HEAD_TOO_MANY };

void td_proxy_head_init(struct td_proxy_head *h, char *buf);
/* n more bytes were read into buf + len: parsed. DONE once the head is
 * complete (end set, spans closed), BAD or TOO_MANY (headers) when it is
 * not HTTP/1.x with token header names, MORE otherwise (the caller limits
 * len). */
enum td_head_state td_proxy_head_feed(struct td_proxy_head *h, size_t n);
/* A complete head's target: host (lower case, no trailing dot, hostlen
 * bytes at most with its NUL) and port (the default: 443 for CONNECT, 80
 * for http://). 0, or -1 with why (the 400's body). */
int td_proxy_head_target(const struct td_proxy_head *h, char *host, size_t hostlen, unsigned *port,
                         const char **why);
/* Does every Host header of the head name host:port (none: yes, the
 * target names it)? */
bool td_proxy_head_host_ok(const struct td_proxy_head *h, const char *host, unsigned port);
/* The request as the origin server gets it (origin form, hop-by-hop
 * headers and the call's copies of cred's dropped, cred's added, "Host" if
 * it had none, "Connection: close"), then what of its body came with the
 * head: malloc'd, its length in *len; NULL: no memory. */
char *td_proxy_head_origin(const struct td_proxy_head *h, const char *host, unsigned port,
                           const struct td_cred_host *cred, size_t *len);

/* Does a Host header's value (spaces around it allowed) name host (lower
 * case, no trailing dot) and port, dflt when it names none? Case, a
 * trailing dot and an IPv6 address's spelling aside, exactly. */
bool td_proxy_host_is(const char *v, size_t len, const char *host, unsigned port, unsigned dflt);

/* The head (hlen bytes, to its empty line) a TLS-ended connection to
 * host:port sent, rewritten into out (cap bytes): drop's headers (a
 * NULL-terminated list of names) and its connection headers left out, add
 * (header lines) after the request line, "\r\n" to end. Its length, 0
 * when it does not fit, TD_PROXY_MISDIRECTED when it names another host
 * (a target not in origin form, or a Host header, td_proxy_host_is with
 * 443 its default, that names another host or port), TD_PROXY_BAD_HEAD
 * when it is not a request line and header lines (none empty, a token
 * name each, no bare CR or NUL, none folded). */
#define TD_PROXY_MISDIRECTED ((size_t)-1)
#define TD_PROXY_BAD_HEAD ((size_t)-2)
size_t td_proxy_tls_head(const char *head, size_t hlen, const char *host, unsigned port,
                         char *const *drop, const char *add, char *out, size_t cap);

#endif
