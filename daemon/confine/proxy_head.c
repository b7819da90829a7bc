/*
 * proxy_head.c - the egress proxy's request heads, without sockets
 * (proxy_head.h): what proxy_request.c reads from a call and proxy_tls.c
 * decrypts, parsed, checked and rewritten here so that a fuzzer reaches it
 * all (tests/fuzz/fuzz_proxy_head.c).
 *
 * The Host check: a credential header goes only to the host the request
 * named to the proxy (the CONNECT's, the absolute target's), which is
 * where the proxy connected and, over TLS, what the certificate vouched
 * for. A Host header naming another host or port would have a shared front
 * end route the secret to another site, so such a request is refused
 * (421) before anything is sent.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "credentials.h"
#include "proxy_head.h"

/* ---- reading a plain request's head --------------------------------------- */

static void extend(long span[2], const char *base, const char *at, size_t len)
{
    if (span[0] < 0)
        span[0] = at - base;
    span[1] = (at - base) + (long)len;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct td_proxy_head *h = p->data;
    extend(h->url, h->buf, at, len);
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct td_proxy_head *h = p->data;
    if (h->nhdr == 0 || h->in_value) {
        if (h->nhdr == TD_PROXY_MAX_HEADERS)
            return 1;
        h->nhdr++;
        h->hdr[h->nhdr - 1][0] = h->hdr[h->nhdr - 1][2] = -1;
        h->hdr[h->nhdr - 1][1] = h->hdr[h->nhdr - 1][3] = 0;
        h->in_value = false;
    }
    extend(&h->hdr[h->nhdr - 1][0], h->buf, at, len);
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    struct td_proxy_head *h = p->data;
    h->in_value = true;
    if (h->nhdr > 0)
        extend(&h->hdr[h->nhdr - 1][2], h->buf, at, len);
    return 0;
}

/* 2: the rest is not this parser's (a tunnel, or a body relayed as is). */
static int on_headers_complete(http_parser *p)
{
    (void)p;
    return 2;
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
};

void td_proxy_head_init(struct td_proxy_head *h, char *buf)
{
    memset(h, 0, sizeof(*h));
    h->buf = buf;
    h->url[0] = -1;
    http_parser_init(&h->parser, HTTP_REQUEST);
    h->parser.data = h;
}

/* An HTTP token (RFC 9110): what a header's name must be. */
static bool token(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("!#$%&'*+-.^_`|~", s[i]))
            return false;
    return len > 0 && !memchr(s, '\0', len);
}

/* http-parser is lenient (HTTP/0.9, names with spaces, a line that starts
 * with a space, folded values): what it lets through could be read
 * otherwise by the origin server or a front end before it (a Host the
 * check did not see), so only HTTP/1.x with token names and one-line
 * values goes on. */
static bool sane(const struct td_proxy_head *h)
{
    if (h->parser.http_major != 1 || h->parser.http_minor > 1)
        return false;
    for (int i = 0; i < h->nhdr; i++) {
        const char *v = h->buf + h->hdr[i][2];
        size_t vl = (size_t)(h->hdr[i][3] - h->hdr[i][2]);
        if (!token(h->buf + h->hdr[i][0], (size_t)(h->hdr[i][1] - h->hdr[i][0])) ||
            memchr(v, '\r', vl) || memchr(v, '\n', vl) || memchr(v, '\0', vl))
            return false;
    }
    return true;
}

enum td_head_state td_proxy_head_feed(struct td_proxy_head *h, size_t n)
{
    size_t done = http_parser_execute(&h->parser, &settings, h->buf + h->len, n);
    h->len += n;
    if (h->parser.upgrade) {
        h->end = h->len - n + done;
        for (int i = 0; i < h->nhdr; i++) {
            if (h->hdr[i][0] < 0) /* a value without a name cannot be, but */
                h->hdr[i][0] = h->hdr[i][1] = 0;
            if (h->hdr[i][2] < 0)
                h->hdr[i][2] = h->hdr[i][3] = h->hdr[i][1];
        }
        return sane(h) ? TD_HEAD_DONE : TD_HEAD_BAD;
    }
    if (HTTP_PARSER_ERRNO(&h->parser) != HPE_OK)
        return h->nhdr == TD_PROXY_MAX_HEADERS ? TD_HEAD_TOO_MANY : TD_HEAD_BAD;
    return TD_HEAD_MORE;
}

int td_proxy_head_target(const struct td_proxy_head *h, char *host, size_t hostlen, unsigned *port,
                         const char **why)
{
    struct http_parser_url u;
    http_parser_url_init(&u);
    bool is_connect = h->parser.method == HTTP_CONNECT;
    const char *url = h->buf + (h->url[0] < 0 ? 0 : h->url[0]);
    size_t url_len = h->url[0] < 0 ? 0 : (size_t)(h->url[1] - h->url[0]);
    if (url_len == 0 || http_parser_parse_url(url, url_len, is_connect, &u) != 0 ||
        !(u.field_set & (1 << UF_HOST))) {
        *why = "toolexecd: this is an HTTP proxy: send CONNECT host:port or an absolute "
               "http:// URI\n";
        return -1;
    }
    if (!is_connect && (!(u.field_set & (1 << UF_SCHEMA)) || u.field_data[UF_SCHEMA].len != 4 ||
                        strncasecmp(url + u.field_data[UF_SCHEMA].off, "http", 4) != 0)) {
        *why = "toolexecd: only http:// is forwarded; use CONNECT for https\n";
        return -1;
    }
    size_t hl = u.field_data[UF_HOST].len;
    if (hl == 0 || hl >= hostlen) {
        *why = "toolexecd: bad host\n";
        return -1;
    }
    for (size_t i = 0; i < hl; i++)
        host[i] = (char)tolower((unsigned char)url[u.field_data[UF_HOST].off + i]);
    host[hl] = '\0';
    if (hl > 1 && host[hl - 1] == '.')
        host[hl - 1] = '\0';
    *port = (u.field_set & (1 << UF_PORT)) ? u.port : is_connect ? 443 : 80;
    if (*port == 0) {
        *why = "toolexecd: bad port\n";
        return -1;
    }
    return 0;
}

/* ---- the Host check --------------------------------------------------------- */

bool td_proxy_host_is(const char *v, size_t len, const char *host, unsigned port, unsigned dflt)
{
    while (len && (*v == ' ' || *v == '\t'))
        v++, len--;
    while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    const char *name = v, *p = NULL;
    size_t nl = len;
    if (len && v[0] == '[') { /* [v6] or [v6]:port, only for an IPv6 host */
        const char *rb = memchr(v, ']', len);
        if (!rb || !strchr(host, ':'))
            return false;
        name = v + 1;
        nl = (size_t)(rb - name);
        if (rb + 1 < v + len) {
            if (rb[1] != ':')
                return false;
            p = rb + 2;
        }
    } else {
        const char *colon = memchr(v, ':', len);
        if (colon) {
            if (memchr(colon + 1, ':', (size_t)(v + len - colon - 1)))
                return false; /* an IPv6 address without brackets is no Host */
            nl = (size_t)(colon - v);
            p = colon + 1;
        }
    }
    unsigned want = dflt;
    if (p && p < v + len) { /* "host:" (an empty port) is the default */
        want = 0;
        for (; p < v + len; p++) {
            if (!isdigit((unsigned char)*p) || want > 65535)
                return false;
            want = want * 10 + (unsigned)(*p - '0');
        }
    }
    if (want != port)
        return false;
    if (nl > 1 && name[nl - 1] == '.')
        nl--;
    if (nl == 0)
        return false;
    if (strchr(host, ':')) { /* an IPv6 address: spelled many ways */
        char a[64];
        unsigned char x[16], y[16];
        if (nl >= sizeof(a))
            return false;
        memcpy(a, name, nl);
        a[nl] = '\0';
        return inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, host, y) == 1 &&
               memcmp(x, y, 16) == 0;
    }
    return nl == strlen(host) && strncasecmp(name, host, nl) == 0;
}

bool td_proxy_head_host_ok(const struct td_proxy_head *h, const char *host, unsigned port)
{
    for (int i = 0; i < h->nhdr; i++) {
        const char *name = h->buf + h->hdr[i][0];
        if (h->hdr[i][1] - h->hdr[i][0] == 4 && strncasecmp(name, "host", 4) == 0 &&
            !td_proxy_host_is(h->buf + h->hdr[i][2], (size_t)(h->hdr[i][3] - h->hdr[i][2]), host,
                              port, 80))
            return false;
    }
    return true;
}

/* ---- the origin server's request ------------------------------------------ */

static const char *hop_by_hop[] = {
    "connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate",
    "te",         "trailer",          "upgrade"};

char *td_proxy_head_origin(const struct td_proxy_head *h, const char *host, unsigned port,
                           const struct td_cred_host *cred, size_t *len)
{
    struct http_parser_url u;
    const char *url = h->buf + h->url[0];
    size_t url_len = (size_t)(h->url[1] - h->url[0]);
    http_parser_url_init(&u);
    http_parser_parse_url(url, url_len, 0, &u); /* checked before */
    size_t rest = h->len - h->end;
    size_t cap = h->end + 1024 + rest;
    for (size_t i = 0; cred && i < cred->n; i++)
        cap += strlen(cred->h[i].name) + strlen(cred->h[i].value) + 4;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t n = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (n < cap)                                                                               \
            n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__);                                  \
    } while (0)
    PUT("%s ", http_method_str((enum http_method)h->parser.method));
    if (u.field_set & (1 << UF_PATH))
        PUT("%.*s", (int)u.field_data[UF_PATH].len, url + u.field_data[UF_PATH].off);
    else
        PUT("/");
    if (u.field_set & (1 << UF_QUERY))
        PUT("?%.*s", (int)u.field_data[UF_QUERY].len, url + u.field_data[UF_QUERY].off);
    PUT(" HTTP/%d.%d\r\n", h->parser.http_major, h->parser.http_minor);
    bool has_host = false;
    for (int i = 0; i < h->nhdr; i++) {
        const char *name = h->buf + h->hdr[i][0];
        int nl = (int)(h->hdr[i][1] - h->hdr[i][0]);
        bool skip = false;
        for (size_t j = 0; j < sizeof(hop_by_hop) / sizeof(hop_by_hop[0]); j++)
            skip |=
                (size_t)nl == strlen(hop_by_hop[j]) && strncasecmp(name, hop_by_hop[j], nl) == 0;
        has_host |= nl == 4 && strncasecmp(name, "host", 4) == 0;
        skip |= td_creds_names(cred, name, (size_t)nl);
        if (!skip)
            PUT("%.*s: %.*s\r\n", nl, name, (int)(h->hdr[i][3] - h->hdr[i][2]),
                h->buf + h->hdr[i][2]);
    }
    if (!has_host)
        PUT(strchr(host, ':') ? "Host: [%s]:%u\r\n" : "Host: %s:%u\r\n", host, port);
    for (size_t i = 0; cred && i < cred->n; i++)
        PUT("%s: %s\r\n", cred->h[i].name, cred->h[i].value);
    PUT("Connection: close\r\n\r\n");
#undef PUT
    if (n >= cap) { /* cannot happen: the head held all of it */
        explicit_bzero(out, cap);
        free(out);
        return NULL;
    }
    memcpy(out + n, h->buf + h->end, rest);
    *len = n + rest;
    return out;
}

/* ---- a TLS-ended connection's head ---------------------------------------- */

static bool dropped(char *const *drop, const char *name, size_t len)
{
    for (char *const *d = drop; d && *d; d++)
        if (strlen(*d) == len && strncasecmp(*d, name, len) == 0)
            return true;
    return false;
}

size_t td_proxy_tls_head(const char *head, size_t hlen, const char *host, unsigned port,
                         char *const *drop, const char *add, char *out, size_t cap)
{
    const char *line = head, *end = head + hlen;
    size_t n = 0;
    bool first = true;
    while (line < end) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t ll = nl ? (size_t)(nl - line) + 1 : (size_t)(end - line);
        size_t bare = ll;
        while (bare && (line[bare - 1] == '\n' || line[bare - 1] == '\r'))
            bare--;
        if (bare == 0 && first)
            return TD_PROXY_BAD_HEAD; /* no request line */
        if (bare == 0)
            break; /* the empty line: added below */
        const char *colon = memchr(line, ':', bare);
        size_t nl_len = colon ? (size_t)(colon - line) : 0;
        /* what a lenient server or front end would read as a line of its
         * own, or a Host the check below did not see: a bare CR, a NUL, a
         * line that starts with a space (obs-fold), a name with a space
         * before its colon */
        if (memchr(line, '\r', bare) || memchr(line, '\0', bare) ||
            (!first && (!colon || !token(line, nl_len))))
            return TD_PROXY_BAD_HEAD;
        if (first) { /* "METHOD /path HTTP/1.1": origin form only */
            const char *sp = memchr(line, ' ', bare);
            if (!sp || sp + 1 >= line + bare || (sp[1] != '/' && sp[1] != '*'))
                return TD_PROXY_MISDIRECTED;
        } else if (colon && nl_len == 4 && strncasecmp(line, "host", 4) == 0 &&
                   !td_proxy_host_is(colon + 1, bare - nl_len - 1, host, port, 443)) {
            return TD_PROXY_MISDIRECTED;
        }
        bool skip = !first && colon &&
                    (dropped(drop, line, nl_len) ||
                     (nl_len == 10 && strncasecmp(line, "connection", 10) == 0) ||
                     (nl_len == 16 && strncasecmp(line, "proxy-connection", 16) == 0) ||
                     (nl_len == 10 && strncasecmp(line, "keep-alive", 10) == 0));
        if (!skip) {
            if (n + bare + 2 > cap)
                return 0;
            memcpy(out + n, line, bare);
            memcpy(out + n + bare, "\r\n", 2);
            n += bare + 2;
        }
        if (first) {
            size_t al = strlen(add);
            if (n + al > cap)
                return 0;
            memcpy(out + n, add, al);
            n += al;
        }
        first = false;
        line += ll;
    }
    if (n + 2 > cap)
        return 0;
    memcpy(out + n, "\r\n", 2);
    return n + 2;
}
