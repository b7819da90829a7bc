/*
 * fuzz_proxy_head - the egress proxy's request heads (daemon/confine/
 * proxy_head.c) on arbitrary bytes, as proxy_request.c and proxy_tls.c use
 * them:
 *
 *   plain: the input read in chunks (the first byte their size) into a
 *          TD_PROXY_HEAD_MAX buffer; once complete, its target (a host
 *          of at most 255 bytes, lower case, no trailing dot, a port > 0),
 *          the Host check, and the origin-form request with and without a
 *          credential: the request line first, the credential exactly once
 *          and the call's own copy of its header gone, "Connection: close"
 *          ending the head, what followed the head after it as it came.
 *   TLS:   the head up to its empty line rewritten for a connection to
 *          h.example:443 with a credential: misdirected, too large for a
 *          small buffer, bad (not a request line and header lines), or
 *          the first line, the credential, the rest, the empty line, each
 *          line ending in CRLF and none folded; a Host that names another
 *          host never passes.
 *   Host:  td_proxy_host_is on the input against hosts with and without
 *          a port; a value it accepts names that host.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "credentials.h"
#include "fuzz_common.h"
#include "proxy.h"
#include "proxy_head.h"

#define SECRET "Bearer fuzz-secret"

static size_t count(const char *hay, size_t n, const char *needle)
{
    size_t c = 0, nl = strlen(needle);
    for (const char *p = hay; (p = memmem(p, n - (size_t)(p - hay), needle, nl)); p += nl)
        c++;
    return c;
}

/* Lines of the head (n bytes, lines ending in "\r\n") after its first
 * whose header name is name, in any case. */
static size_t lines_named(const char *out, size_t n, const char *name)
{
    size_t c = 0, nl = strlen(name);
    const char *l = memmem(out, n, "\r\n", 2);
    while (l && (l += 2) < out + n) {
        if ((size_t)(out + n - l) > nl && strncasecmp(l, name, nl) == 0 && l[nl] == ':')
            c++;
        l = memmem(l, (size_t)(out + n - l), "\r\n", 2);
    }
    return c;
}

/* Each line of the head (n bytes) ends in CRLF, with no other CR or LF,
 * and none starts with a space or a tab (obs-fold). */
static void check_lines(const char *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        CHECK(out[i] == '\n' ? i > 0 && out[i - 1] == '\r' &&
                                   (i + 1 == n || (out[i + 1] != ' ' && out[i + 1] != '\t'))
                             : out[i] != '\r' || (i + 1 < n && out[i + 1] == '\n'),
              "a bare CR or LF, or a folded line, at %zu", i);
}

static void plain(const uint8_t *data, size_t size)
{
    if (size == 0)
        return;
    size_t chunk = data[0] ? data[0] : 1;
    data++, size--;
    char *buf = malloc(TD_PROXY_HEAD_MAX);
    struct td_proxy_head h;
    td_proxy_head_init(&h, buf);
    enum td_head_state st = TD_HEAD_MORE;
    size_t off = 0;
    while (st == TD_HEAD_MORE && off < size && h.len < TD_PROXY_HEAD_MAX) {
        size_t n = size - off < chunk ? size - off : chunk;
        if (n > TD_PROXY_HEAD_MAX - h.len)
            n = TD_PROXY_HEAD_MAX - h.len;
        memcpy(buf + h.len, data + off, n);
        off += n;
        st = td_proxy_head_feed(&h, n);
    }
    if (st != TD_HEAD_DONE) {
        free(buf);
        return;
    }
    CHECK(h.end <= h.len && h.len <= TD_PROXY_HEAD_MAX, "end %zu len %zu", h.end, h.len);
    for (int i = 0; i < h.nhdr; i++)
        CHECK(0 <= h.hdr[i][0] && h.hdr[i][0] <= h.hdr[i][1] && h.hdr[i][1] <= (long)h.end &&
                  0 <= h.hdr[i][2] && h.hdr[i][2] <= h.hdr[i][3] && h.hdr[i][3] <= (long)h.end,
              "header %d's spans", i);
    char host[256];
    unsigned port = 0;
    const char *why = NULL;
    if (td_proxy_head_target(&h, host, sizeof(host), &port, &why) < 0) {
        CHECK(why && *why, "no reason");
        free(buf);
        return;
    }
    CHECK(strlen(host) > 0 && strlen(host) < sizeof(host), "host of %zu bytes", strlen(host));
    CHECK(port > 0 && port <= 65535, "port %u", port);
    for (const char *p = host; *p; p++)
        CHECK(!isupper((unsigned char)*p), "host %s not lower case", host);
    (void)td_proxy_head_host_ok(&h, host, port);
    if (h.parser.method == HTTP_CONNECT) {
        free(buf);
        return;
    }
    struct td_cred_header ch = {.name = "Authorization", .value = SECRET};
    struct td_cred_host cred = {.host = host, .port = (int)port, .h = &ch, .n = 1};
    for (int with = 0; with < 2; with++) {
        size_t len = 0;
        char *out = td_proxy_head_origin(&h, host, port, with ? &cred : NULL, &len);
        CHECK(out, "no origin request");
        size_t rest = h.len - h.end;
        CHECK(len >= rest && memcmp(out + len - rest, buf + h.end, rest) == 0,
              "the body does not follow the head");
        size_t head = len - rest;
        CHECK(head >= 4 && memcmp(out + head - 4, "\r\n\r\n", 4) == 0, "the head's end");
        CHECK(count(out, head, "\r\n\r\n") == 1, "an empty line inside the head");
        check_lines(out, head);
        const char *method = http_method_str((enum http_method)h.parser.method);
        CHECK(strncmp(out, method, strlen(method)) == 0, "the request line");
        CHECK(head >= 21 && memcmp(out + head - 21, "Connection: close\r\n\r\n", 21) == 0,
              "Connection: close last");
        if (with) {
            CHECK(count(out, head, "\r\nAuthorization: " SECRET "\r\n") >= 1,
                  "the credential not there");
            CHECK(lines_named(out, head, "authorization") == 1,
                  "the call's own Authorization left in");
        }
        free(out);
    }
    free(buf);
}

static void tls(const uint8_t *data, size_t size)
{
    const char *end = memmem(data, size, "\r\n\r\n", 4);
    if (!end)
        return;
    size_t hlen = (size_t)(end - (const char *)data) + 4;
    char *const drop[] = {"Authorization", NULL};
    const char *add = "Authorization: " SECRET "\r\nConnection: close\r\n";
    size_t caps[] = {64, TD_PROXY_HEAD_MAX + 16384};
    for (size_t i = 0; i < 2; i++) {
        char *out = malloc(caps[i]);
        size_t n =
            td_proxy_tls_head((const char *)data, hlen, "h.example", 443, drop, add, out, caps[i]);
        if (n != 0 && n != TD_PROXY_MISDIRECTED && n != TD_PROXY_BAD_HEAD) {
            CHECK(n <= caps[i], "%zu bytes in %zu", n, caps[i]);
            CHECK(n >= 2 && memcmp(out + n - 2, "\r\n", 2) == 0, "no empty line");
            check_lines(out, n);
            CHECK(lines_named(out, n, "authorization") == 1, "the credential not there once");
            const char *first = memmem(out, n, "\r\n", 2);
            CHECK(first && (size_t)(first + 2 - out) + strlen(add) <= n &&
                      memcmp(first + 2, add, strlen(add)) == 0,
                  "the credential not after the request line");
            /* every Host line left names h.example, port 443 */
            for (const char *l = first + 2; l < out + n;) {
                const char *e = memmem(l, (size_t)(out + n - l), "\r\n", 2);
                size_t ll = (size_t)(e - l);
                if (ll > 5 && strncasecmp(l, "host:", 5) == 0)
                    CHECK(td_proxy_host_is(l + 5, ll - 5, "h.example", 443, 443),
                          "a Host for another host passed");
                l = e + 2;
            }
        }
        free(out);
    }
}

static void host_is(const uint8_t *data, size_t size)
{
    static const struct {
        const char *host;
        unsigned port, dflt;
    } hosts[] = {{"h.example", 80, 80}, {"h.example", 8080, 80}, {"h.example", 443, 443},
                 {"127.0.0.1", 80, 80}, {"::1", 443, 443},       {"2001:db8::1", 8443, 443}};
    const char *v = (const char *)data;
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        if (!td_proxy_host_is(v, size, hosts[i].host, hosts[i].port, hosts[i].dflt))
            continue;
        /* it names the host: its letters are the host's, in any case, or
         * (IPv6) an address in brackets */
        size_t a = 0;
        while (a < size && (v[a] == ' ' || v[a] == '\t'))
            a++;
        if (strchr(hosts[i].host, ':'))
            CHECK(a < size && v[a] == '[', "an IPv6 Host without brackets");
        else
            CHECK(size - a >= strlen(hosts[i].host) &&
                      strncasecmp(v + a, hosts[i].host, strlen(hosts[i].host)) == 0,
                  "accepted for %s", hosts[i].host);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    plain(data, size);
    tls(data, size);
    host_is(data, size);
    return 0;
}
