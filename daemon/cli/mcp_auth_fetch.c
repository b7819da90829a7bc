/*
 * mcp_auth_fetch.c - one HTTP(S) GET of a small JSON document, bounded in
 * size and time (mcp_auth.h): the issuer's metadata and its JWKS.
 *
 * TLS is gnutls's (the certificate checked against the system's trust or
 * the given CA file, and against the host name), the response is parsed by
 * http-parser (Content-Length, chunked, or up to the close). Plain http is
 * allowed to a loopback address only: an issuer's keys fetched in clear
 * over a network would be anyone's keys. No redirect is followed: RFC 8414
 * names the documents' URLs exactly. One deadline covers the connect, the
 * handshake and the whole response; the name lookup is getaddrinfo's own
 * (resolv.conf's timeout).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <http_parser.h>

#include "cli_sys.h"
#include "mcp_auth.h"

struct url {
    bool tls;
    char host[256], port[8];
    const char *path;
};

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    return -1;
}

static int parse_url(const char *url, struct url *u, char *err, size_t errlen)
{
    const char *p;
    if (strncasecmp(url, "https://", 8) == 0)
        u->tls = true, p = url + 8;
    else if (strncasecmp(url, "http://", 7) == 0)
        u->tls = false, p = url + 7;
    else
        return fail(err, errlen, "%s: not an http(s) URL%s", url, "");
    size_t hl = strcspn(p, "/?#");
    const char *hp = p, *end = p + hl, *colon = NULL;
    if (memchr(p, '@', hl))
        return fail(err, errlen, "%s: a user in the URL%s", url, "");
    if (*hp == '[') {
        const char *rb = memchr(hp, ']', hl);
        if (!rb)
            return fail(err, errlen, "%s: bad IPv6 address%s", url, "");
        hp++;
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
        end = rb;
    } else if ((colon = memchr(hp, ':', hl)))
        end = colon;
    size_t n = (size_t)(end - hp);
    if (n == 0 || n >= sizeof(u->host))
        return fail(err, errlen, "%s: bad host%s", url, "");
    memcpy(u->host, hp, n);
    u->host[n] = '\0';
    const char *pe = p + hl;
    size_t pn = colon ? (size_t)(pe - colon - 1) : 0;
    if (colon && (pn == 0 || pn >= sizeof(u->port) || strspn(colon + 1, "0123456789") < pn))
        return fail(err, errlen, "%s: bad port%s", url, "");
    snprintf(u->port, sizeof(u->port), "%.*s", (int)pn, colon ? colon + 1 : "");
    if (!colon)
        snprintf(u->port, sizeof(u->port), "%s", u->tls ? "443" : "80");
    u->path = *pe == '/' ? pe : "/";
    if (*pe == '?' || *pe == '#')
        return fail(err, errlen, "%s: a query or fragment without a path%s", url, "");
    return 0;
}

/* Wait for fd (POLLIN or POLLOUT) until the deadline: 0, or -1 timed out. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - cli_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, (int)left);
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

static int dial(const struct url *u, long long deadline, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG}, *ai, *a;
    int rc = getaddrinfo(u->host, u->port, &hints, &ai);
    if (rc != 0)
        return fail(err, errlen, "%s: %s", u->host, gai_strerror(rc));
    int fd = -1;
    snprintf(err, errlen, "%s: no address", u->host);
    for (a = ai; a && fd < 0; a = a->ai_next) {
        if (!u->tls && !cli_loopback_addr(a->ai_addr)) {
            fail(err, errlen, "%s: plain http is for a loopback address only (use https)%s",
                 u->host, "");
            continue;
        }
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0)
            continue;
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 &&
            (errno != EINPROGRESS || wait_fd(fd, POLLOUT, deadline) < 0 ||
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr)) {
            fail(err, errlen, "%s: connect: %s", u->host, soerr ? strerror(soerr) : "timed out");
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd;
}

/* One connection: plain or TLS, non-blocking, under the deadline. */
struct conn {
    int fd;
    gnutls_session_t s; /* NULL: plain */
    gnutls_certificate_credentials_t cred;
    long long deadline;
};

static int tls_start(struct conn *c, const struct url *u, const char *ca_file, char *err,
                     size_t errlen)
{
    int rc;
    if ((rc = gnutls_certificate_allocate_credentials(&c->cred)) < 0)
        return fail(err, errlen, "TLS: %s%s", gnutls_strerror(rc), "");
    rc = ca_file ? gnutls_certificate_set_x509_trust_file(c->cred, ca_file, GNUTLS_X509_FMT_PEM)
                 : gnutls_certificate_set_x509_system_trust(c->cred);
    if (rc <= 0) /* the number of certificates: none is no trust at all */
        return fail(err, errlen, "TLS: no trusted certificate in %s%s",
                    ca_file ? ca_file : "the system's store", "");
    if ((rc = gnutls_init(&c->s, GNUTLS_CLIENT | GNUTLS_NONBLOCK)) < 0 ||
        (rc = gnutls_set_default_priority(c->s)) < 0 ||
        (rc = gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE, c->cred)) < 0 ||
        (rc = gnutls_server_name_set(c->s, GNUTLS_NAME_DNS, u->host, strlen(u->host))) < 0)
        return fail(err, errlen, "TLS: %s%s", gnutls_strerror(rc), "");
    gnutls_session_set_verify_cert(c->s, u->host, 0);
    gnutls_transport_set_int(c->s, c->fd);
    do {
        rc = gnutls_handshake(c->s);
        if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
            if (wait_fd(c->fd, gnutls_record_get_direction(c->s) ? POLLOUT : POLLIN, c->deadline) <
                0)
                return fail(err, errlen, "%s: TLS handshake: timed out%s", u->host, "");
        } else if (rc < 0)
            return fail(err, errlen, "%s: TLS handshake: %s", u->host, gnutls_strerror(rc));
    } while (rc < 0);
    return 0;
}

/* Bytes moved, 0 at the end (reading), or -1 with why. */
static ssize_t conn_io(struct conn *c, bool out, void *buf, size_t n, char *err, size_t errlen)
{
    for (;;) {
        ssize_t r;
        if (c->s)
            r = out ? gnutls_record_send(c->s, buf, n) : gnutls_record_recv(c->s, buf, n);
        else
            r = out ? send(c->fd, buf, n, MSG_NOSIGNAL) : recv(c->fd, buf, n, 0);
        if (r >= 0)
            return r;
        bool again = c->s ? (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
                          : (errno == EAGAIN || errno == EINTR);
        if (c->s && r == GNUTLS_E_PREMATURE_TERMINATION && !out)
            return 0; /* no close_notify: the parser decides whether all came */
        if (!again)
            return fail(err, errlen, "%s%s", c->s ? gnutls_strerror((int)r) : strerror(errno), "");
        short ev = c->s ? (gnutls_record_get_direction(c->s) ? POLLOUT : POLLIN)
                        : (out ? POLLOUT : POLLIN);
        if (wait_fd(c->fd, ev, c->deadline) < 0)
            return fail(err, errlen, "timed out%s%s", "", "");
    }
}

struct resp {
    char *body;
    size_t len, max;
    bool done, too_big;
};

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct resp *r = p->data;
    if (n > r->max - r->len) {
        r->too_big = true;
        return 1;
    }
    memcpy(r->body + r->len, at, n);
    r->len += n;
    return 0;
}

static int on_complete(http_parser *p)
{
    ((struct resp *)p->data)->done = true;
    return 1; /* stop: one response is all we read */
}

static int exchange(struct conn *c, const struct url *u, struct resp *r, char *err, size_t errlen)
{
    char req[1024];
    int n =
        snprintf(req, sizeof(req),
                 "GET %s HTTP/1.1\r\nHost: %s%s%s%s%s\r\nAccept: application/json\r\n"
                 "User-Agent: toolexec\r\nConnection: close\r\n\r\n",
                 u->path, strchr(u->host, ':') ? "[" : "", u->host, strchr(u->host, ':') ? "]" : "",
                 strcmp(u->port, u->tls ? "443" : "80") ? ":" : "",
                 strcmp(u->port, u->tls ? "443" : "80") ? u->port : "");
    if (n < 0 || (size_t)n >= sizeof(req) || strpbrk(u->path, "\r\n "))
        return fail(err, errlen, "%s: the path is too long or not a path%s", u->host, "");
    for (size_t off = 0; off < (size_t)n;) {
        ssize_t w = conn_io(c, true, req + off, (size_t)n - off, err, errlen);
        if (w < 0)
            return -1;
        off += (size_t)w;
    }
    http_parser p;
    http_parser_settings s;
    http_parser_settings_init(&s);
    s.on_body = on_body;
    s.on_message_complete = on_complete;
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = r;
    size_t head = 0; /* bytes outside the body, bounded too */
    char buf[16384];
    while (!r->done) {
        ssize_t got = conn_io(c, false, buf, sizeof(buf), err, errlen);
        if (got < 0)
            return -1;
        size_t before = r->len, used = http_parser_execute(&p, &s, buf, (size_t)got);
        head += used - (r->len - before);
        if (r->too_big)
            return fail(err, errlen, "%s: the document is larger than the limit%s", u->host, "");
        if (!r->done && (HTTP_PARSER_ERRNO(&p) != HPE_OK || used != (size_t)got))
            return fail(err, errlen, "%s: not an HTTP response: %s", u->host,
                        http_errno_description(HTTP_PARSER_ERRNO(&p)));
        if (head > 65536)
            return fail(err, errlen, "%s: the response's head is too long%s", u->host, "");
        if (got == 0 && !r->done)
            return fail(err, errlen, "%s: the connection closed before the response ended%s",
                        u->host, "");
    }
    if (p.status_code != 200) {
        char code[16];
        snprintf(code, sizeof(code), "%u", p.status_code);
        return fail(err, errlen, "%s: HTTP status %s", u->host, code);
    }
    return 0;
}

int mcp_auth_fetch(const char *url, const char *ca_file, long timeout_ms, size_t max, char **body,
                   size_t *len, char *err, size_t errlen)
{
    struct url u;
    struct resp r = {.max = max};
    struct conn c = {.fd = -1, .deadline = cli_now_ms() + timeout_ms};
    int rc = -1;
    *body = NULL;
    if (parse_url(url, &u, err, errlen) < 0 || !(r.body = malloc(max + 1)))
        goto out;
    if ((c.fd = dial(&u, c.deadline, err, errlen)) < 0)
        goto out;
    if (u.tls && tls_start(&c, &u, ca_file, err, errlen) < 0)
        goto out;
    if (exchange(&c, &u, &r, err, errlen) < 0)
        goto out;
    r.body[r.len] = '\0';
    *body = r.body;
    *len = r.len;
    r.body = NULL;
    rc = 0;
out:
    if (c.s)
        gnutls_deinit(c.s);
    if (c.cred)
        gnutls_certificate_free_credentials(c.cred);
    if (c.fd >= 0)
        close(c.fd);
    free(r.body);
    return rc;
}
