/*
 * egress.c - the egress allow-list's policy (egress.h): parsed from a
 * definition's "network" object, asked by the call's proxy (proxy.c).
 *
 * A call with one runs in a network namespace of its own with only
 * loopback (sandbox.c, step 7c): a tool that ignores HTTP_PROXY reaches
 * nothing, DNS included. Its proxy (proxy.c) asks td_egress_allows() before
 * it resolves anything, and td_egress_private() of every address a name
 * resolves to.
 *
 * Entries: "host" (ports 80 and 443), "host:port", "host:*", "*.domain"
 * (any name below the domain at any depth, not the domain itself: a list
 * that means both says both, and "*.pypi.org" cannot be read as "and
 * pypi.org" by one operator and not by another), and IP addresses, which
 * match only a request for that very address.
 *
 * A name on the list that resolves to a loopback, private, link-local,
 * shared (CGNAT), multicast or unspecified address is refused (403, a
 * denial with "reason": "private_address"): otherwise whoever controls an
 * allowed name's DNS could point it at 127.0.0.1 and reach the host's own
 * services from inside the sandbox (DNS rebinding). An IP literal on the
 * list ("127.0.0.1:8080") is the operator's explicit word and is allowed
 * as written.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "credentials.h"
#include "egress.h"
#include "toolexec.h"

/* ---- the policy ----------------------------------------------------------- */

struct rule {
    char *host;    /* lower case; "*.x.org" stays as written */
    bool wildcard; /* "*.": any name ending in ".x.org", not "x.org" itself */
    bool literal;  /* an IP address, as written */
    int port;      /* 0: 80 and 443; -1: any ("host:*") */
};

struct td_egress {
    struct rule *rules;
    size_t n;
    uint64_t max_bytes;
    unsigned max_connections;
    bool names_loopback;
    struct td_creds *creds; /* "headers" (credentials.h); NULL: none */
    /* a narrowing's creds are its tool's (a narrowed tool holds its parent,
     * narrow.c): a host it still allows keeps its headers */
    bool creds_borrowed;
    bool any; /* learn mode: every host, each recorded by the proxy */
};

static int bad(char *err, size_t errlen, const char *fmt, const char *arg)
{
    snprintf(err, errlen, fmt, arg);
    return -1;
}

static bool ip_literal(const char *s)
{
    unsigned char a[16];
    return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_')
            return false;
    return strstr(s, "..") == NULL;
}

/* "host", "host:port", "host:*", "*.domain[:port]", "[v6]:port", "v6". */
static int parse_rule(const char *s, struct rule *r, char *err, size_t errlen)
{
    char buf[300];
    if (strlen(s) >= sizeof(buf))
        return bad(err, errlen, "\"%.64s...\": too long", s);
    snprintf(buf, sizeof(buf), "%s", s);
    char *host = buf, *port = NULL;
    if (buf[0] == '[') {
        char *end = strchr(buf, ']');
        if (!end || (end[1] && end[1] != ':'))
            return bad(err, errlen, "\"%s\": expected [IPv6]:port", s);
        *end = '\0';
        host = buf + 1;
        port = end[1] ? end + 2 : NULL;
    } else if (strchr(buf, ':') && strchr(buf, ':') == strrchr(buf, ':')) {
        port = strchr(buf, ':');
        *port++ = '\0';
    } /* more than one ':': a bare IPv6 address */
    r->port = 0;
    if (port) {
        char *end;
        long p = strtol(port, &end, 10);
        if (strcmp(port, "*") == 0)
            r->port = -1;
        else if (!*port || *end || p < 1 || p > 65535)
            return bad(err, errlen, "\"%s\": the port must be 1-65535 or *", s);
        else
            r->port = (int)p;
    }
    for (char *p = host; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    size_t n = strlen(host);
    if (n && host[n - 1] == '.')
        host[--n] = '\0';
    r->literal = ip_literal(host);
    r->wildcard = strncmp(host, "*.", 2) == 0;
    if (!r->literal && !valid_name(r->wildcard ? host + 2 : host))
        return bad(err, errlen,
                   "\"%s\": expected a host name, \"*.\" and a domain, or an IP address", s);
    if (!r->literal && !r->wildcard && strchr(host, '*'))
        return bad(err, errlen, "\"%s\": a wildcard only as a leading \"*.\"", s);
    r->host = strdup(host);
    return r->host ? 0 : bad(err, errlen, "%s: out of memory", s);
}

static bool loopback_host(const struct rule *r)
{
    unsigned char a[16];
    return strcmp(r->host, "localhost") == 0 ||
           (inet_pton(AF_INET, r->host, a) == 1 && a[0] == 127) || strcmp(r->host, "::1") == 0;
}

static int limit(json_t *obj, const char *key, uint64_t def, uint64_t *out, char *err,
                 size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    *out = def;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return bad(err, errlen, "%s: expected a positive integer", key);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

int td_egress_parse(json_t *v, struct td_egress **out, char *err, size_t errlen)
{
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x)
    {
        if (strcmp(key, "allow") && strcmp(key, "max_connections") && strcmp(key, "max_bytes") &&
            strcmp(key, "headers"))
            return bad(err, errlen,
                       "%s: unknown key (expected allow, headers, max_connections, max_bytes)",
                       key);
    }
    json_t *allow = json_object_get(v, "allow");
    if (!json_is_array(allow))
        return bad(err, errlen, "%s: expected an array of host names", "allow");
    struct td_egress *e = calloc(1, sizeof(*e));
    if (!e || !(e->rules = calloc(json_array_size(allow) + 1, sizeof(struct rule)))) {
        free(e);
        return bad(err, errlen, "%s", "out of memory");
    }
    uint64_t mc, mb;
    if (limit(v, "max_connections", TD_EGRESS_MAX_CONNECTIONS, &mc, err, errlen) < 0 ||
        limit(v, "max_bytes", TD_EGRESS_MAX_BYTES, &mb, err, errlen) < 0)
        goto fail;
    e->max_connections = mc > 65536 ? 65536 : (unsigned)mc;
    e->max_bytes = mb;
    size_t i;
    json_array_foreach(allow, i, x)
    {
        char why[400];
        if (!te_json_is_text(x) || json_string_length(x) == 0) {
            snprintf(err, errlen, "allow[%zu]: expected a host name", i);
            goto fail;
        }
        if (parse_rule(json_string_value(x), &e->rules[e->n], why, sizeof(why)) < 0) {
            snprintf(err, errlen, "allow[%zu]: %s", i, why);
            goto fail;
        }
        e->names_loopback |= loopback_host(&e->rules[e->n]);
        e->n++;
    }
    if (json_object_get(v, "headers") &&
        td_creds_parse(json_object_get(v, "headers"), &e->creds, err, errlen) < 0)
        goto fail;
    for (size_t k = 0; e->creds && k < e->creds->n; k++) {
        const struct td_cred_host *h = &e->creds->hosts[k];
        if (h->port ? !td_egress_allows(e, h->host, (unsigned)h->port)
                    : !td_egress_allows(e, h->host, 443) && !td_egress_allows(e, h->host, 80)) {
            snprintf(err, errlen,
                     "headers: %s%s%.0d: not in allow (a header goes only where a call "
                     "may)",
                     h->host, h->port ? ":" : "", h->port);
            goto fail;
        }
    }
    *out = e;
    return 0;
fail:
    td_egress_free(e);
    return -1;
}

/* Is every request n lets through one p lets through too? */
static bool covers(const struct rule *p, const struct rule *n)
{
    if (p->port >= 0 &&
        (p->port == 0 ? n->port != 0 && n->port != 80 && n->port != 443 : n->port != p->port))
        return false;
    if (p->literal || n->literal)
        return p->literal && n->literal && strcmp(p->host, n->host) == 0;
    if (!p->wildcard)
        return !n->wildcard && strcmp(p->host, n->host) == 0;
    const char *name = n->wildcard ? n->host + 1 : n->host; /* ".a.x.org" or "a.x.org" */
    size_t ln = strlen(name), dn = strlen(p->host) - 1;     /* ".x.org" */
    return (n->wildcard ? ln >= dn : ln > dn) && strcmp(name + ln - dn, p->host + 1) == 0;
}

int td_egress_narrow(const struct td_egress *e, json_t *allow, struct td_egress **out, int *bad_at,
                     char *err, size_t errlen)
{
    *bad_at = -1;
    json_t *obj = json_pack("{s:O,s:I,s:I}", "allow", allow, "max_connections",
                            (json_int_t)e->max_connections, "max_bytes", (json_int_t)e->max_bytes);
    int rc = obj ? td_egress_parse(obj, out, err, errlen) : bad(err, errlen, "%s", "out of memory");
    json_decref(obj);
    if (rc < 0)
        return -1;
    for (size_t i = 0; i < (*out)->n; i++) {
        bool ok = false;
        for (size_t k = 0; k < e->n && !ok; k++)
            ok = covers(&e->rules[k], &(*out)->rules[i]);
        if (!ok) {
            *bad_at = (int)i;
            td_egress_free(*out);
            *out = NULL;
            return -1;
        }
    }
    (*out)->creds = e->creds;
    (*out)->creds_borrowed = true;
    return 0;
}

json_t *td_egress_list(const struct td_egress *e)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < e->n; i++) {
        const struct rule *r = &e->rules[i];
        bool v6 = r->literal && strchr(r->host, ':');
        char buf[320];
        if (r->port == 0)
            snprintf(buf, sizeof(buf), "%s", r->host);
        else if (r->port < 0)
            snprintf(buf, sizeof(buf), v6 ? "[%s]:*" : "%s:*", r->host);
        else
            snprintf(buf, sizeof(buf), v6 ? "[%s]:%d" : "%s:%d", r->host, r->port);
        json_array_append_new(a, json_string(buf));
    }
    return a;
}

void td_egress_free(struct td_egress *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n; i++)
        free(e->rules[i].host);
    free(e->rules);
    if (!e->creds_borrowed)
        td_creds_free(e->creds);
    free(e);
}

const char *td_egress_no_proxy(const struct td_egress *e)
{
    return e->names_loopback ? NULL : "localhost,127.0.0.1,::1";
}

static bool port_ok(const struct rule *r, unsigned port)
{
    return r->port < 0 || (r->port == 0 ? port == 80 || port == 443 : (unsigned)r->port == port);
}

/* host: lower case, no trailing dot. The matching rule, or NULL. An IP
 * address asked for matches only the same address written on the list. */
static const struct rule *allowed(const struct td_egress *e, const char *host, unsigned port)
{
    bool lit = ip_literal(host);
    size_t hn = strlen(host);
    for (size_t i = 0; i < e->n; i++) {
        const struct rule *r = &e->rules[i];
        if (!port_ok(r, port) || r->literal != lit)
            continue;
        if (lit) {
            unsigned char a[16], b[16];
            int af = strchr(host, ':') ? AF_INET6 : AF_INET;
            if (inet_pton(af, host, a) == 1 && inet_pton(af, r->host, b) == 1 &&
                memcmp(a, b, af == AF_INET ? 4 : 16) == 0)
                return r;
        } else if (r->wildcard) {
            size_t dn = strlen(r->host) - 1; /* ".x.org" */
            if (hn > dn && strcmp(host + hn - dn, r->host + 1) == 0)
                return r;
        } else if (strcmp(host, r->host) == 0) {
            return r;
        }
    }
    return NULL;
}

bool td_egress_allows(const struct td_egress *e, const char *host, unsigned port)
{
    return e->any || allowed(e, host, port) != NULL;
}

struct td_egress *td_egress_any(void)
{
    struct td_egress *e = calloc(1, sizeof(*e));
    if (e) {
        e->any = e->names_loopback = true; /* the host's loopback through the proxy too */
        e->max_bytes = TD_EGRESS_MAX_BYTES;
        e->max_connections = TD_EGRESS_MAX_CONNECTIONS;
    }
    return e;
}

uint64_t td_egress_max_bytes(const struct td_egress *e)
{
    return e->max_bytes;
}

unsigned td_egress_max_connections(const struct td_egress *e)
{
    return e->max_connections;
}

/* Addresses a name on the list may not lead to (see the top). */
static bool private_v4(const unsigned char *a)
{
    return a[0] == 0 || a[0] == 10 || a[0] == 127 || (a[0] == 100 && (a[1] & 0xc0) == 64) ||
           (a[0] == 169 && a[1] == 254) || (a[0] == 172 && (a[1] & 0xf0) == 16) ||
           (a[0] == 192 && a[1] == 168) || a[0] >= 224;
}

bool td_egress_private(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return private_v4((const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr);
    if (sa->sa_family != AF_INET6)
        return true;
    const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const unsigned char zero[16];
    if (memcmp(a, mapped, 12) == 0)
        return private_v4(a + 12);
    return memcmp(a, zero, 15) == 0 /* :: and ::1 */ || (a[0] & 0xfe) == 0xfc /* fc00::/7 */ ||
           (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) /* fe80::/10 */ || a[0] == 0xff;
}

const struct td_creds *td_egress_creds(const struct td_egress *e)
{
    return e ? e->creds : NULL;
}
