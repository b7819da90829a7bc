/*
 * proxy_tls.h - the egress proxy's TLS end for hosts with credential
 * headers (credentials.h): the daemon's own CA, a certificate per host
 * signed by it, and a thread per connection that decrypts what the call
 * sends, adds the headers and sends it on over TLS to the real host,
 * verified against the host's trust store (and --upstream-ca).
 */
#ifndef TD_PROXY_TLS_H
#define TD_PROXY_TLS_H

#include <stddef.h>
#include <stdint.h>

struct td_cred_host;

/* Where calls of a tool with headers find the CA among the system's (the
 * daemon's bundle bound over it in their view, fsview.c). */
#define TD_TLS_VIEW_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* --upstream-ca: more roots to verify hosts against (tests, a private CA). */
extern const char *td_upstream_ca;

/* At start: the CA made (its key in memory only) and the bundle (the
 * system's roots and the CA's certificate) written to dir/ca-bundle.pem.
 * 0, or -1 with why in err (then hosts with headers get 502 over CONNECT). */
int td_tls_setup(const char *dir, char *err, size_t errlen);
/* The bundle's path on the host; NULL before td_tls_setup succeeded. */
const char *td_tls_bundle(void);
/* Take over a CONNECT to host whose upstream is connected: cfd the call's
 * side (after "200"), ufd the host's, both blocking and owned from here;
 * its port; prefix: what the call sent after its CONNECT head. At most max_open per
 * owner at once; budget: what its other traffic left of its max_bytes, which
 * its connections here share. 0, or -1 (fds closed). */
int td_tls_start(const void *owner, int cfd, int ufd, const char *host, unsigned port,
                 const struct td_cred_host *h, const char *prefix, size_t plen, uint64_t budget,
                 unsigned max_open);
/* What the owner's connections here have relayed so far (its max_bytes
 * count them too). */
uint64_t td_tls_used(const void *owner);
/* The owner's call ended: each of its connections is cut now and ends. */
void td_tls_stop(const void *owner);

#endif
