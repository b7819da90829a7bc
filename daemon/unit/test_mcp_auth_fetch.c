/* Unit tests of the issuer documents' fetch (daemon/cli/mcp_auth_fetch.c)
 * over TLS: a server in a thread of this test, its certificate made here
 * with gnutls for "localhost". The certificate must be trusted (the CA
 * file given, not the system's store) and name the host asked for; the
 * body is bounded; a server that never answers times out. Plain http goes
 * to a loopback address only (cli_loopback_addr, cli_sys.h), IPv4 mapped
 * into IPv6 included. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "cli_sys.h"
#include "loopback_server.h"
#include "mcp_auth.h"

static struct {
    struct lo_server lo;
    int port;
    gnutls_certificate_credentials_t cred;
    char ca_path[64];
} srv;

#define BIG (300 * 1024) /* more than the default document limit */

static void serve_one(int c)
{
    gnutls_session_t s;
    gnutls_init(&s, GNUTLS_SERVER);
    gnutls_set_default_priority(s);
    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, srv.cred);
    gnutls_transport_set_int(s, c);
    int rc;
    do
        rc = gnutls_handshake(s);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    char req[2048] = "";
    size_t n = 0;
    ssize_t r;
    while (rc == 0 && n < sizeof(req) - 1 && !strstr(req, "\r\n\r\n") &&
           (r = gnutls_record_recv(s, req + n, sizeof(req) - 1 - n)) > 0)
        req[n += (size_t)r] = '\0';
    if (rc == 0) {
        bool big = strncmp(req, "GET /big ", 9) == 0;
        size_t len = big ? BIG : strlen("{\"keys\":[]}");
        char head[200], *body = malloc(len + 1);
        memset(body, ' ', len);
        if (!big)
            memcpy(body, "{\"keys\":[]}", len);
        int hn =
            snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", len);
        gnutls_record_send(s, head, (size_t)hn);
        for (size_t off = 0; off < len && (r = gnutls_record_send(s, body + off, len - off)) > 0;)
            off += (size_t)r;
        free(body);
        gnutls_bye(s, GNUTLS_SHUT_WR);
    }
    gnutls_deinit(s);
}

/* A self-signed certificate for DNS name "localhost" (no IP address), its
 * PEM the test's CA file. */
static int setup(void **state)
{
    (void)state;
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    time_t now = time(NULL);
    unsigned char serial[] = {1};
    gnutls_datum_t pem;
    if (gnutls_x509_privkey_init(&key) < 0 ||
        gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                     GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0) < 0 ||
        gnutls_x509_crt_init(&crt) < 0 || gnutls_x509_crt_set_version(crt, 3) < 0 ||
        gnutls_x509_crt_set_serial(crt, serial, sizeof(serial)) < 0 ||
        gnutls_x509_crt_set_activation_time(crt, now - 60) < 0 ||
        gnutls_x509_crt_set_expiration_time(crt, now + 3600) < 0 ||
        gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, "localhost", 9) < 0 ||
        gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9,
                                             GNUTLS_FSAN_SET) < 0 ||
        gnutls_x509_crt_set_key(crt, key) < 0 ||
        gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0) < 0 ||
        gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &pem) < 0 ||
        gnutls_certificate_allocate_credentials(&srv.cred) < 0 ||
        gnutls_certificate_set_x509_key(srv.cred, &crt, 1, key) < 0)
        return -1;
    snprintf(srv.ca_path, sizeof(srv.ca_path), "/tmp/test_mcp_auth_fetch.XXXXXX");
    int fd = mkstemp(srv.ca_path);
    if (fd < 0 || write(fd, pem.data, pem.size) != (ssize_t)pem.size)
        return -1;
    close(fd);
    gnutls_free(pem.data);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
    lo_start(&srv.lo, serve_one);
    srv.port = srv.lo.port;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    lo_stop(&srv.lo);
    gnutls_certificate_free_credentials(srv.cred);
    unlink(srv.ca_path);
    return 0;
}

static int get(const char *host, const char *path, const char *ca, size_t max, char *err,
               size_t errlen)
{
    char url[128], *body = NULL;
    size_t len;
    snprintf(url, sizeof(url), "https://%s:%d%s", host, srv.port, path);
    int rc = mcp_auth_fetch(url, ca, 5000, max, &body, &len, err, errlen);
    if (rc == 0) {
        assert_string_equal(body, "{\"keys\":[]}");
        assert_int_equal(len, 11);
    }
    free(body);
    return rc;
}

static void test_trusted(void **state)
{
    (void)state;
    char err[300];
    if (get("localhost", "/jwks", srv.ca_path, 1024, err, sizeof(err)) != 0)
        fail_msg("%s", err);
}

static void test_untrusted_or_wrong_name(void **state)
{
    (void)state;
    char err[300];
    /* the system's store does not know the test's certificate */
    assert_int_equal(get("localhost", "/jwks", NULL, 1024, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "TLS handshake"));
    /* trusted, but not for the name asked for */
    assert_int_equal(get("127.0.0.1", "/jwks", srv.ca_path, 1024, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "TLS handshake"));
}

static void test_bounds(void **state)
{
    (void)state;
    char err[300];
    assert_int_equal(get("localhost", "/big", srv.ca_path, 256 * 1024, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "larger than the limit"));
    /* a server that takes the connection and never answers */
    int port, fd = lo_listen(&port);
    char url[64], *body;
    size_t len;
    snprintf(url, sizeof(url), "https://localhost:%d/jwks", port);
    assert_int_equal(mcp_auth_fetch(url, srv.ca_path, 200, 1024, &body, &len, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "timed out"));
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/jwks", port);
    assert_int_equal(mcp_auth_fetch(url, NULL, 200, 1024, &body, &len, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "timed out"));
    close(fd);
}

/* As the callers get their addresses: from getaddrinfo. */
static bool loopback_of(const char *text)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST}, *ai;
    if (getaddrinfo(text, NULL, &hints, &ai) != 0)
        fail_msg("not an address: %s", text);
    bool yes = cli_loopback_addr(ai->ai_addr);
    freeaddrinfo(ai);
    return yes;
}

static void test_loopback_addr(void **state)
{
    (void)state;
    assert_true(loopback_of("127.0.0.1"));
    assert_true(loopback_of("127.255.0.9"));
    assert_true(loopback_of("::1"));
    assert_true(loopback_of("::ffff:127.0.0.1"));
    assert_true(loopback_of("::ffff:127.1.2.3"));
    assert_false(loopback_of("128.0.0.1"));
    assert_false(loopback_of("10.0.0.1"));
    assert_false(loopback_of("0.0.0.0"));
    assert_false(loopback_of("::"));
    assert_false(loopback_of("::2"));
    assert_false(loopback_of("::ffff:10.0.0.1"));
    assert_false(loopback_of("::127.0.0.1")); /* IPv4-compatible, not mapped */
    assert_false(loopback_of("fe80::1"));
    /* another family, whatever its bytes */
    union {
        struct sockaddr sa;
        struct sockaddr_storage room; /* as large as any address */
    } u;
    memset(&u, 0, sizeof(u)); /* its bytes as ::1's would be */
    memcpy((char *)&u + offsetof(struct sockaddr_in6, sin6_addr), &in6addr_loopback,
           sizeof(in6addr_loopback));
    u.sa.sa_family = AF_UNIX;
    assert_false(cli_loopback_addr(&u.sa));
    u.sa.sa_family = AF_UNSPEC;
    assert_false(cli_loopback_addr(&u.sa));
}

static void serve_plain(int c)
{
    char req[2048];
    (void)!read(c, req, sizeof(req)); /* one small request, whatever it asks */
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\n"
                               "{\"keys\":[]}";
    if (write(c, resp, sizeof(resp) - 1) < 0)
        perror("serve_plain write");
}

/* Plain http: 127.0.0.1 and the same address mapped into IPv6 are both
 * the loopback; a mapped address off it is refused before any connection. */
static void test_plain_http_loopback(void **state)
{
    (void)state;
    struct lo_server plain;
    lo_start(&plain, serve_plain);
    const char *hosts[] = {"127.0.0.1", "[::ffff:127.0.0.1]"};
    char url[96], err[300], *body;
    size_t len;
    for (size_t i = 0; i < 2; i++) {
        snprintf(url, sizeof(url), "http://%s:%d/jwks", hosts[i], plain.port);
        if (mcp_auth_fetch(url, NULL, 5000, 1024, &body, &len, err, sizeof(err)) != 0)
            fail_msg("%s: %s", url, err);
        assert_int_equal(len, 11);
        free(body);
    }
    lo_stop(&plain);
    assert_int_equal(mcp_auth_fetch("http://[::ffff:192.0.2.1]/jwks", NULL, 5000, 1024, &body, &len,
                                    err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "plain http is for a loopback address only"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trusted),
        cmocka_unit_test(test_untrusted_or_wrong_name),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_loopback_addr),
        cmocka_unit_test(test_plain_http_loopback),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
