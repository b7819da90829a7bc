/*
 * credentials.c - the headers a tool's egress proxy adds, and the files
 * their values come from (credentials.h).
 *
 * A value is read at load (and by --check) from one file per name in the
 * credentials directory: --credentials-dir, else $CREDENTIALS_DIRECTORY
 * (systemd's LoadCredential=), else /etc/toolexecd/credentials. The file
 * must be the daemon's alone: a regular file (not a symbolic link) owned by
 * root or the daemon's uid, with no permission for group or others; a
 * value anyone else could read or change is not a secret the daemon
 * should vouch for. The value lives in the daemon's memory only; a reload
 * reads it again.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "credentials.h"

const char *td_credentials_dir;

const char *td_credentials_path(void)
{
    const char *env = getenv("CREDENTIALS_DIRECTORY");
    if (td_credentials_dir)
        return td_credentials_dir;
    return env && *env ? env : TD_CREDENTIALS_DEFAULT;
}

static int bad(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    return -1;
}

int td_credential_read(const char *dir, const char *name, char **value, char *err, size_t errlen)
{
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strchr(name, '/'))
        return bad(err, errlen, "credential \"%s\": not a file name%s", name, "");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return bad(err, errlen, "credentials directory %s: %s", dir, strerror(errno));
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    int e = errno;
    close(dfd);
    if (fd < 0)
        return bad(err, errlen, "credential %s: %s", name, strerror(e));
    struct stat st;
    char buf[TD_CREDENTIAL_MAX + 2];
    ssize_t n = -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        snprintf(err, errlen, "credential %s/%s: not a regular file", dir, name);
    else if (st.st_uid != 0 && st.st_uid != geteuid())
        snprintf(err, errlen, "credential %s/%s: owned by uid %u, not root or the daemon's", dir,
                 name, (unsigned)st.st_uid);
    else if (st.st_mode & 077)
        snprintf(err, errlen,
                 "credential %s/%s: mode %04o lets group or others at it (chmod 0600 or 0400)", dir,
                 name, (unsigned)(st.st_mode & 07777));
    else if ((n = read(fd, buf, sizeof(buf) - 1)) < 0)
        snprintf(err, errlen, "credential %s/%s: %s", dir, name, strerror(errno));
    close(fd);
    if (n < 0)
        return -1;
    if (n > TD_CREDENTIAL_MAX) {
        explicit_bzero(buf, sizeof(buf));
        return bad(err, errlen, "credential %s: larger than 8192 bytes%s", name, "");
    }
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    bool clean = n > 0;
    for (ssize_t i = 0; i < n; i++)
        clean &= buf[i] != '\r' && buf[i] != '\n' && buf[i] != '\0';
    buf[n] = '\0';
    *value = clean ? strdup(buf) : NULL;
    explicit_bzero(buf, sizeof(buf));
    if (!clean)
        return bad(err, errlen, "credential %s: empty, or a CR, LF or NUL inside (one line)%s",
                   name, "");
    return *value ? 0 : bad(err, errlen, "credential %s: out of memory%s", name, "");
}

/* An HTTP token (RFC 9110), and not one the proxy itself decides. */
static bool header_name_ok(const char *s)
{
    static const char *const own[] = {
        "host",    "connection", "proxy-connection", "keep-alive",       "te",
        "trailer", "upgrade",    "content-length",   "transfer-encoding"};
    if (!*s)
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("!#$%&'*+-.^_`|~", *p))
            return false;
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcasecmp(s, own[i]) == 0)
            return false;
    return true;
}

/* "host", "host:port", "[v6]:port", "v6": as the allow-list writes them. */
static int parse_host(const char *key, struct td_cred_host *h, char *err, size_t errlen)
{
    char buf[300], *host = buf, *port = NULL;
    if (strlen(key) >= sizeof(buf) || !*key)
        return bad(err, errlen, "headers: \"%.64s\": not a host%s", key, "");
    snprintf(buf, sizeof(buf), "%s", key);
    if (buf[0] == '[') {
        char *end = strchr(buf, ']');
        if (!end || (end[1] && end[1] != ':'))
            return bad(err, errlen, "headers: \"%s\": expected [IPv6]:port%s", key, "");
        *end = '\0';
        host = buf + 1;
        port = end[1] ? end + 2 : NULL;
    } else if (strchr(buf, ':') && strchr(buf, ':') == strrchr(buf, ':')) {
        port = strchr(buf, ':');
        *port++ = '\0';
    }
    h->port = 0;
    if (port) {
        char *end;
        long p = strtol(port, &end, 10);
        if (!*port || *end || p < 1 || p > 65535)
            return bad(err, errlen, "headers: \"%s\": the port must be 1-65535%s", key, "");
        h->port = (int)p;
    }
    for (char *p = host; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    size_t n = strlen(host);
    if (n && host[n - 1] == '.')
        host[--n] = '\0';
    unsigned char a6[16];
    char norm[INET6_ADDRSTRLEN];
    if (inet_pton(AF_INET6, host, a6) == 1 && inet_ntop(AF_INET6, a6, norm, sizeof(norm)))
        host = norm;
    if (!*host || strchr(host, '*') || strchr(host, '/'))
        return bad(err, errlen, "headers: \"%s\": one host (no wildcard)%s", key, "");
    h->host = strdup(host);
    return h->host ? 0 : bad(err, errlen, "%s%s", "out of memory", "");
}

int td_creds_parse(json_t *v, struct td_creds **out, char *err, size_t errlen)
{
    if (!json_is_object(v))
        return bad(err, errlen, "%s%s", "headers: expected an object {\"HOST[:PORT]\": {...}}", "");
    struct td_creds *c = calloc(1, sizeof(*c));
    if (!c || !(c->hosts = calloc(json_object_size(v) + 1, sizeof(*c->hosts)))) {
        free(c);
        return bad(err, errlen, "%s%s", "out of memory", "");
    }
    const char *key, *name;
    json_t *hv, *x;
    json_object_foreach(v, key, hv)
    {
        struct td_cred_host *h = &c->hosts[c->n];
        if (parse_host(key, h, err, errlen) < 0)
            goto fail;
        c->n++;
        if (!json_is_object(hv) || json_object_size(hv) == 0) {
            bad(err, errlen, "headers: %s: expected {\"Header-Name\": {\"credential\": NAME}}", key,
                "");
            goto fail;
        }
        if (!(h->h = calloc(json_object_size(hv), sizeof(*h->h))))
            goto fail;
        json_object_foreach(hv, name, x)
        {
            json_t *cred = json_object_get(x, "credential");
            if (!header_name_ok(name)) {
                bad(err, errlen, "headers: %s: \"%s\": not a header name the proxy may add", key,
                    name);
                goto fail;
            }
            if (!json_is_object(x) || json_object_size(x) != 1 || !json_is_string(cred)) {
                bad(err, errlen, "headers: %s: %s: expected {\"credential\": NAME}", key, name);
                goto fail;
            }
            char why[400];
            struct td_cred_header *hd = &h->h[h->n];
            if (td_credential_read(td_credentials_path(), json_string_value(cred), &hd->value, why,
                                   sizeof(why)) < 0) {
                snprintf(err, errlen, "headers: %s: %s: %s", key, name, why);
                goto fail;
            }
            h->n++;
            if (!(hd->name = strdup(name)))
                goto fail;
        }
    }
    *out = c;
    return 0;
fail:
    td_creds_free(c);
    return -1;
}

void td_creds_free(struct td_creds *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        for (size_t k = 0; k < c->hosts[i].n; k++) {
            struct td_cred_header *h = &c->hosts[i].h[k];
            if (h->value)
                explicit_bzero(h->value, strlen(h->value));
            free(h->value);
            free(h->name);
        }
        free(c->hosts[i].h);
        free(c->hosts[i].host);
    }
    free(c->hosts);
    free(c);
}

const struct td_cred_host *td_creds_find(const struct td_creds *c, const char *host, unsigned port)
{
    unsigned char a6[16];
    char norm[INET6_ADDRSTRLEN];
    if (inet_pton(AF_INET6, host, a6) == 1 && inet_ntop(AF_INET6, a6, norm, sizeof(norm)))
        host = norm;
    for (size_t i = 0; c && i < c->n; i++) {
        const struct td_cred_host *h = &c->hosts[i];
        bool port_ok = h->port ? (unsigned)h->port == port : port == 80 || port == 443;
        if (port_ok && strcmp(h->host, host) == 0)
            return h;
    }
    return NULL;
}

bool td_creds_names(const struct td_cred_host *h, const char *name, size_t len)
{
    for (size_t i = 0; h && i < h->n; i++)
        if (strlen(h->h[i].name) == len && strncasecmp(h->h[i].name, name, len) == 0)
            return true;
    return false;
}
