/*
 * proxy_tls.c - TLS terminated at the egress proxy for hosts with credential
 * headers (proxy_tls.h; the headers: credentials.c).
 *
 * Why a thread per connection and not the loop: GnuTLS over blocking
 * sockets is a few calls, while a handshake and record layer driven from
 * libuv reads needs memory transports and a state machine per direction;
 * these connections are few (calls of tools with headers, at most
 * max_connections each), and a thread that blocks in a handshake or in a
 * slow host holds nothing of the loop's. The loop does everything up to a
 * connected upstream (the allow-list, resolving, the private-address rule)
 * as for any CONNECT, then hands both sockets over; the call's end cuts
 * them (shutdown) and the thread ends on its own.
 *
 * The CA: an ECDSA P-256 key made at start (a millisecond or so, unlike
 * RSA) and kept in memory only; its certificate is written with the
 * system's roots to the daemon's work directory (ca-bundle.pem), which the
 * views of those tools' calls bind over the system bundle. A certificate
 * per host is made on first use with one leaf key and kept for the next
 * connection to it (MAX_LEAVES hosts; past them the least recently used
 * goes). A set-up that failed leaves nothing behind: a reload tries again.
 *
 * One request per connection: the head is read, the call's own copies of
 * the credential headers and its Connection headers dropped, the
 * credentials and "Connection: close" added; what follows (body, answer)
 * is relayed as is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "credentials.h"
#include "log.h"
#include "proxy.h"
#include "proxy_head.h"
#include "proxy_tls.h"

#define MAX_LEAVES 256
#define CHUNK 16384

const char *td_upstream_ca;

static gnutls_x509_privkey_t ca_key, leaf_key;
static gnutls_x509_crt_t ca_crt;
static gnutls_certificate_credentials_t up_cred;
static char *bundle;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A host's certificate: kept for the next connection to it, MAX_LEAVES of
 * them, the one handed out least recently dropped for a new host (a tool
 * that tries many names costs a signature each, not the cache). A
 * connection holds a reference while its session may use it. */
struct leaf {
    char *host;
    unsigned refs; /* the cache's, and each connection's */
    uint64_t last; /* leaf_clock when last handed out */
    gnutls_x509_crt_t crt;
    gnutls_certificate_credentials_t cred;
};
static struct leaf *leaves[MAX_LEAVES];
static size_t nleaves;
static uint64_t leaf_clock;

/* What one owner's (a call's) ended-TLS connections have relayed, shared
 * by them: max_bytes holds for the call, not for each connection. Kept
 * while the owner lives or a connection of its runs; an owner that stopped
 * is never matched again (its address may be a new call's). */
struct spent {
    LIST_ENTRY(spent) link;
    const void *owner;
    bool stopped;
    unsigned refs; /* its connections, and 1 while the owner lives */
    uint64_t used, limit;
};
static LIST_HEAD(, spent) spents = LIST_HEAD_INITIALIZER(spents);

/* under lock */
static struct spent *spent_of(const void *owner, bool make)
{
    struct spent *p;
    LIST_FOREACH(p, &spents, link)
        if (p->owner == owner && !p->stopped)
            return p;
    if (!make || !(p = calloc(1, sizeof(*p))))
        return NULL;
    p->owner = owner;
    p->refs = 1;
    LIST_INSERT_HEAD(&spents, p, link);
    return p;
}

/* under lock */
static void spent_unref(struct spent *p)
{
    if (p && --p->refs == 0) {
        LIST_REMOVE(p, link);
        free(p);
    }
}

/* Count n more bytes; false once past the limit. */
static bool spend(struct spent *p, size_t n)
{
    pthread_mutex_lock(&lock);
    p->used += n;
    bool ok = p->used <= p->limit;
    pthread_mutex_unlock(&lock);
    return ok;
}

struct tconn {
    LIST_ENTRY(tconn) link;
    const void *owner;
    struct spent *spent;
    int cfd, ufd;
    char host[256];
    unsigned port;
    char *add;   /* the header lines to add */
    char **drop; /* the names of the headers added, NULL-terminated */
    char *pre;
    size_t pre_len, pre_off;
};
static LIST_HEAD(, tconn) conns = LIST_HEAD_INITIALIZER(conns);

static int sign(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *cn, bool ca)
{
    unsigned char serial[16];
    time_t now = time(NULL);
    int rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
    serial[0] &= 0x7f;
    if (rc >= 0)
        rc = gnutls_x509_crt_set_version(crt, 3);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
    if (rc >= 0)
        rc = gnutls_x509_crt_set_activation_time(crt, now - 3600);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_expiration_time(crt, now + (ca ? 3650 : 397) * 86400L);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, strlen(cn));
    if (rc >= 0)
        rc = gnutls_x509_crt_set_key(crt, key);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_basic_constraints(crt, ca, ca ? 0 : -1);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_key_usage(crt, ca ? GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN
                                                   : GNUTLS_KEY_DIGITAL_SIGNATURE);
    unsigned char id[64];
    size_t idlen = sizeof(id);
    if (rc >= 0)
        rc = gnutls_x509_crt_get_key_id(crt, 0, id, &idlen);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_subject_key_id(crt, id, idlen);
    if (rc >= 0 && !ca) {
        idlen = sizeof(id);
        rc = gnutls_x509_crt_get_subject_key_id(ca_crt, id, &idlen, NULL);
        if (rc >= 0)
            rc = gnutls_x509_crt_set_authority_key_id(crt, id, idlen);
        if (rc >= 0)
            rc = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
    }
    return rc;
}

/* What a set-up that failed made, undone (a key's deinit wipes it): a
 * reload tries again from nothing and leaks none of it. */
static void setup_undo(void)
{
    if (up_cred)
        gnutls_certificate_free_credentials(up_cred);
    if (ca_crt)
        gnutls_x509_crt_deinit(ca_crt);
    if (leaf_key)
        gnutls_x509_privkey_deinit(leaf_key);
    if (ca_key)
        gnutls_x509_privkey_deinit(ca_key);
    up_cred = NULL;
    ca_crt = NULL;
    leaf_key = ca_key = NULL;
    gnutls_global_deinit();
}

int td_tls_setup(const char *dir, char *err, size_t errlen)
{
    int rc;
    const char *what = "the CA";
    if ((rc = gnutls_global_init()) < 0) {
        snprintf(err, errlen, "GnuTLS: %s", gnutls_strerror(rc));
        return -1;
    }
    if ((rc = gnutls_x509_privkey_init(&ca_key)) < 0 ||
        (rc = gnutls_x509_privkey_generate(
             ca_key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0)) < 0 ||
        (rc = gnutls_x509_privkey_init(&leaf_key)) < 0 ||
        (rc = gnutls_x509_privkey_generate(
             leaf_key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0)) < 0 ||
        (rc = gnutls_x509_crt_init(&ca_crt)) < 0 ||
        (rc = sign(ca_crt, ca_key, "toolexecd credential proxy CA", true)) < 0 ||
        (rc = gnutls_x509_crt_sign2(ca_crt, ca_crt, ca_key, GNUTLS_DIG_SHA256, 0)) < 0)
        goto fail;
    what = "the upstream trust store";
    if ((rc = gnutls_certificate_allocate_credentials(&up_cred)) < 0 ||
        (rc = gnutls_certificate_set_x509_system_trust(up_cred)) < 0)
        goto fail;
    if (td_upstream_ca && (rc = gnutls_certificate_set_x509_trust_file(up_cred, td_upstream_ca,
                                                                       GNUTLS_X509_FMT_PEM)) <= 0) {
        snprintf(err, errlen, "--upstream-ca %s: %s", td_upstream_ca,
                 rc == 0 ? "no certificate in it" : gnutls_strerror(rc));
        goto undo;
    }
    /* the bundle: the system's roots, then the CA */
    char pem[8192];
    size_t pemlen = sizeof(pem);
    what = "the bundle";
    if ((rc = gnutls_x509_crt_export(ca_crt, GNUTLS_X509_FMT_PEM, pem, &pemlen)) < 0)
        goto fail;
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/ca-bundle.pem", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *out = fopen(tmp, "we");
    FILE *sys = fopen(TD_TLS_VIEW_BUNDLE, "re");
    if (!out) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        if (sys)
            fclose(sys);
        goto undo;
    }
    char buf[8192];
    size_t n;
    while (sys && (n = fread(buf, 1, sizeof(buf), sys)) > 0)
        fwrite(buf, 1, n, out);
    if (sys)
        fclose(sys);
    fputs("\n# toolexecd credential proxy CA\n", out);
    fwrite(pem, 1, pemlen, out);
    bool written = fchmod(fileno(out), 0644) == 0;
    written &= fclose(out) == 0; /* closed either way */
    bool renamed = written && rename(tmp, path) == 0;
    if (renamed && (bundle = strdup(path)))
        return 0;
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    unlink(renamed ? path : tmp);
    goto undo;
fail:
    snprintf(err, errlen, "%s: %s", what, gnutls_strerror(rc));
undo:
    setup_undo();
    return -1;
}

const char *td_tls_bundle(void)
{
    return bundle;
}

/* under lock */
static void leaf_unref(struct leaf *l)
{
    if (!l || --l->refs > 0)
        return;
    if (l->cred)
        gnutls_certificate_free_credentials(l->cred);
    if (l->crt)
        gnutls_x509_crt_deinit(l->crt);
    free(l->host);
    free(l);
}

/* host's certificate, made on first use, with a reference for the caller
 * (leaf_put); NULL when it cannot be made */
static struct leaf *leaf_get(const char *host)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nleaves; i++)
        if (strcmp(leaves[i]->host, host) == 0) {
            struct leaf *l = leaves[i];
            l->refs++;
            l->last = ++leaf_clock;
            pthread_mutex_unlock(&lock);
            return l;
        }
    struct leaf *l = calloc(1, sizeof(*l));
    unsigned char ip[16];
    int rc = l && (l->host = strdup(host)) ? 0 : GNUTLS_E_MEMORY_ERROR;
    if (l)
        l->refs = 1;
    if (rc >= 0)
        rc = gnutls_x509_crt_init(&l->crt);
    if (rc >= 0)
        rc = sign(l->crt, leaf_key, host, false);
    if (rc >= 0 && inet_pton(AF_INET, host, ip) == 1)
        rc = gnutls_x509_crt_set_subject_alt_name(l->crt, GNUTLS_SAN_IPADDRESS, ip, 4,
                                                  GNUTLS_FSAN_SET);
    else if (rc >= 0 && inet_pton(AF_INET6, host, ip) == 1)
        rc = gnutls_x509_crt_set_subject_alt_name(l->crt, GNUTLS_SAN_IPADDRESS, ip, 16,
                                                  GNUTLS_FSAN_SET);
    else if (rc >= 0)
        rc = gnutls_x509_crt_set_subject_alt_name(l->crt, GNUTLS_SAN_DNSNAME, host,
                                                  (unsigned)strlen(host), GNUTLS_FSAN_SET);
    if (rc >= 0)
        rc = gnutls_x509_crt_sign2(l->crt, ca_crt, ca_key, GNUTLS_DIG_SHA256, 0);
    if (rc >= 0)
        rc = gnutls_certificate_allocate_credentials(&l->cred);
    if (rc >= 0) {
        gnutls_x509_crt_t chain[2] = {l->crt, ca_crt};
        rc = gnutls_certificate_set_x509_key(l->cred, chain, 2, leaf_key);
    }
    if (rc < 0) {
        leaf_unref(l);
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    if (nleaves == MAX_LEAVES) { /* the least recently handed out goes */
        size_t old = 0;
        for (size_t i = 1; i < nleaves; i++)
            if (leaves[i]->last < leaves[old]->last)
                old = i;
        leaf_unref(leaves[old]); /* freed once no connection uses it */
        leaves[old] = leaves[--nleaves];
    }
    l->refs++; /* the cache's */
    l->last = ++leaf_clock;
    leaves[nleaves++] = l;
    pthread_mutex_unlock(&lock);
    return l;
}

static void leaf_put(struct leaf *l)
{
    pthread_mutex_lock(&lock);
    leaf_unref(l);
    pthread_mutex_unlock(&lock);
}

/* ---- a connection's thread ------------------------------------------------ */

static ssize_t c_pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
    struct tconn *t = p;
    if (t->pre_off < t->pre_len) {
        size_t n = t->pre_len - t->pre_off < len ? t->pre_len - t->pre_off : len;
        memcpy(buf, t->pre + t->pre_off, n);
        t->pre_off += n;
        return (ssize_t)n;
    }
    return recv(t->cfd, buf, len, 0);
}

static ssize_t c_push(gnutls_transport_ptr_t p, const void *buf, size_t len)
{
    return send(((struct tconn *)p)->cfd, buf, len, MSG_NOSIGNAL);
}

static ssize_t u_push(gnutls_transport_ptr_t p, const void *buf, size_t len)
{
    return send(((struct tconn *)p)->ufd, buf, len, MSG_NOSIGNAL);
}

static ssize_t u_pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
    return recv(((struct tconn *)p)->ufd, buf, len, 0);
}

static int handshake(gnutls_session_t s)
{
    int rc;
    do
        rc = gnutls_handshake(s);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    return rc;
}

static ssize_t recv_rec(gnutls_session_t s, char *buf, size_t len)
{
    ssize_t n;
    do
        n = gnutls_record_recv(s, buf, len);
    while (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED);
    return n;
}

static int send_all(gnutls_session_t s, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = gnutls_record_send(s, buf, len);
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
            continue;
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static void answer(gnutls_session_t cs, const char *status, const char *body)
{
    char msg[1024];
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     status, strlen(body), body);
    send_all(cs, msg, n < (int)sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

static void relay(struct tconn *t, gnutls_session_t cs, gnutls_session_t us)
{
    char buf[CHUNK];
    bool c_eof = false;
    for (;;) {
        bool pc = !c_eof && gnutls_record_check_pending(cs) > 0;
        bool pu = gnutls_record_check_pending(us) > 0;
        if (!pc && !pu) {
            struct pollfd p[2] = {{.fd = c_eof ? -1 : t->cfd, .events = POLLIN},
                                  {.fd = t->ufd, .events = POLLIN}};
            if (poll(p, 2, -1) < 0 && errno != EINTR)
                return;
            pc = p[0].revents != 0;
            pu = p[1].revents != 0;
        }
        if (pc) {
            ssize_t n = recv_rec(cs, buf, sizeof(buf));
            if (n <= 0) {
                c_eof = true;
                gnutls_bye(us, GNUTLS_SHUT_WR);
            } else if (!spend(t->spent, (size_t)n) || send_all(us, buf, (size_t)n) < 0) {
                return;
            }
        }
        if (pu) {
            ssize_t n = recv_rec(us, buf, sizeof(buf));
            if (n <= 0 || !spend(t->spent, (size_t)n) || send_all(cs, buf, (size_t)n) < 0)
                return;
        }
    }
}

static void serve(struct tconn *t)
{
    gnutls_session_t cs = NULL, us = NULL;
    struct leaf *leaf = leaf_get(t->host);
    if (!leaf)
        return;
    if (gnutls_init(&cs, GNUTLS_SERVER) < 0) {
        leaf_put(leaf);
        return;
    }
    gnutls_set_default_priority(cs);
    gnutls_credentials_set(cs, GNUTLS_CRD_CERTIFICATE, leaf->cred);
    gnutls_transport_set_ptr(cs, t);
    gnutls_transport_set_pull_function(cs, c_pull);
    gnutls_transport_set_push_function(cs, c_push);
    if (handshake(cs) < 0)
        goto out;
    unsigned char ip[16];
    bool literal = inet_pton(AF_INET, t->host, ip) == 1 || inet_pton(AF_INET6, t->host, ip) == 1;
    int rc = gnutls_init(&us, GNUTLS_CLIENT);
    if (rc >= 0)
        rc = gnutls_set_default_priority(us);
    if (rc >= 0)
        rc = gnutls_credentials_set(us, GNUTLS_CRD_CERTIFICATE, up_cred);
    if (rc >= 0 && !literal)
        rc = gnutls_server_name_set(us, GNUTLS_NAME_DNS, t->host, strlen(t->host));
    if (rc >= 0) {
        gnutls_session_set_verify_cert(us, t->host, 0);
        gnutls_transport_set_ptr(us, t);
        gnutls_transport_set_pull_function(us, u_pull);
        gnutls_transport_set_push_function(us, u_push);
        rc = handshake(us);
    }
    if (rc < 0) {
        char body[600];
        snprintf(body, sizeof(body), "toolexecd: TLS to %s failed: %s\n", t->host,
                 gnutls_strerror(rc));
        td_log(TD_LOG_INFO, "egress: TLS to %s failed: %s", t->host, gnutls_strerror(rc));
        answer(cs, "502 Bad Gateway", body);
        goto out;
    }
    /* the request head, then its rewrite */
    char *head = malloc(TD_PROXY_HEAD_MAX), *out = malloc(TD_PROXY_HEAD_MAX + 16384);
    size_t len = 0;
    char *end = NULL;
    while (head && out && !end && len < TD_PROXY_HEAD_MAX) {
        ssize_t n = recv_rec(cs, head + len, TD_PROXY_HEAD_MAX - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        end = memmem(head, len, "\r\n\r\n", 4);
    }
    size_t olen = end ? td_proxy_tls_head(head, (size_t)(end - head) + 4, t->host, t->port, t->drop,
                                          t->add, out, TD_PROXY_HEAD_MAX + 16384)
                      : 0;
    if (olen && olen != TD_PROXY_MISDIRECTED && olen != TD_PROXY_BAD_HEAD &&
        send_all(us, out, olen) == 0 &&
        send_all(us, end + 4, len - (size_t)(end + 4 - head)) == 0) {
        explicit_bzero(out, olen);
        free(head);
        free(out);
        relay(t, cs, us);
    } else {
        if (end && olen == TD_PROXY_MISDIRECTED)
            answer(cs, "421 Misdirected Request",
                   "toolexecd: the request names another host than its CONNECT\n");
        else if (end && olen == TD_PROXY_BAD_HEAD)
            answer(cs, "400 Bad Request", "toolexecd: not an HTTP/1.x request head\n");
        else if (end && !olen)
            answer(cs, "431 Request Header Fields Too Large", "toolexecd: head too large\n");
        if (out)
            explicit_bzero(out, TD_PROXY_HEAD_MAX + 16384);
        free(head);
        free(out);
    }
out:
    if (us)
        gnutls_deinit(us);
    gnutls_bye(cs, GNUTLS_SHUT_WR);
    gnutls_deinit(cs);
    leaf_put(leaf); /* after the session that used it */
}

static void tconn_free(struct tconn *t)
{
    if (t->add)
        explicit_bzero(t->add, strlen(t->add));
    free(t->add);
    for (char **d = t->drop; d && *d; d++)
        free(*d);
    free(t->drop);
    free(t->pre);
    free(t);
}

static void *run(void *arg)
{
    struct tconn *t = arg;
    serve(t);
    pthread_mutex_lock(&lock);
    LIST_REMOVE(t, link);
    close(t->cfd);
    close(t->ufd);
    spent_unref(t->spent);
    pthread_mutex_unlock(&lock);
    tconn_free(t);
    return NULL;
}

int td_tls_start(const void *owner, int cfd, int ufd, const char *host, unsigned port,
                 const struct td_cred_host *h, const char *prefix, size_t plen, uint64_t budget,
                 unsigned max_open)
{
    struct tconn *t = calloc(1, sizeof(*t));
    size_t addlen = 1;
    for (size_t i = 0; i < h->n; i++)
        addlen += strlen(h->h[i].name) + strlen(h->h[i].value) + 4;
    addlen += sizeof("Connection: close\r\n");
    if (!bundle || !t || !(t->add = calloc(1, addlen)) || (plen && !(t->pre = malloc(plen))) ||
        !(t->drop = calloc(h->n + 1, sizeof(char *))))
        goto fail;
    /* copies: the tool's definition may be reloaded while this runs */
    for (size_t i = 0; i < h->n; i++)
        if (!(t->drop[i] = strdup(h->h[i].name)))
            goto fail;
    size_t n = 0;
    for (size_t i = 0; i < h->n; i++)
        n += (size_t)snprintf(t->add + n, addlen - n, "%s: %s\r\n", h->h[i].name, h->h[i].value);
    snprintf(t->add + n, addlen - n, "Connection: close\r\n");
    if (plen)
        memcpy(t->pre, prefix, plen);
    t->pre_len = plen;
    t->owner = owner;
    t->cfd = cfd;
    t->ufd = ufd;
    snprintf(t->host, sizeof(t->host), "%s", host);
    t->port = port;
    /* a handshake's flight is several sends here: without this, Nagle and
     * the peer's delayed ACK hold each for ~40 ms (measured: 125 ms a
     * request with, a fraction without) */
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    fcntl(cfd, F_SETFL, fcntl(cfd, F_GETFL) & ~O_NONBLOCK);
    fcntl(ufd, F_SETFL, fcntl(ufd, F_GETFL) & ~O_NONBLOCK);
    pthread_mutex_lock(&lock);
    unsigned open = 0;
    struct tconn *o;
    LIST_FOREACH(o, &conns, link)
        open += o->owner == owner;
    if (open >= max_open || !(t->spent = spent_of(owner, true))) {
        pthread_mutex_unlock(&lock);
        goto fail;
    }
    /* budget: what the call's other traffic left, at this start */
    t->spent->limit = t->spent->used + budget;
    t->spent->refs++;
    LIST_INSERT_HEAD(&conns, t, link);
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    int rc = pthread_create(&tid, &attr, run, t);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        LIST_REMOVE(t, link);
        spent_unref(t->spent);
    }
    pthread_mutex_unlock(&lock);
    if (rc == 0)
        return 0;
fail:
    close(cfd);
    close(ufd);
    if (t)
        tconn_free(t);
    return -1;
}

void td_tls_stop(const void *owner)
{
    struct tconn *t;
    pthread_mutex_lock(&lock);
    LIST_FOREACH(t, &conns, link)
        if (t->owner == owner) {
            shutdown(t->cfd, SHUT_RDWR);
            shutdown(t->ufd, SHUT_RDWR);
        }
    struct spent *p = spent_of(owner, false);
    if (p) {
        p->stopped = true;
        spent_unref(p);
    }
    pthread_mutex_unlock(&lock);
}

uint64_t td_tls_used(const void *owner)
{
    pthread_mutex_lock(&lock);
    struct spent *p = spent_of(owner, false);
    uint64_t used = p ? p->used : 0;
    pthread_mutex_unlock(&lock);
    return used;
}
