/*
 * sandboxrun_leaves.c - toolexecd-sandbox's stand-ins (sandboxrun_lean.c)
 * for two leaves its engine reaches but never uses, linked in their place
 * so that their libraries stay out of it: the egress proxy's TLS end
 * (proxy_tls.h, gnutls), which serves only hosts with credential headers
 * and so no sandbox (a CONNECT that would need it is refused, its
 * descriptors closed), and the journal (log.c's libsystemd), which takes
 * only structured records, which the one-shot does not log (its line goes
 * to stderr).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "proxy_tls.h"

#ifdef TD_HAVE_SYSTEMD
#include <systemd/sd-journal.h>

/* log.c's journal_send: refused, so its line goes to stderr. */
int sd_journal_sendv_with_location(const char *file, const char *line, const char *func,
                                   const struct iovec *iov, int n)
{
    (void)file, (void)line, (void)func, (void)iov, (void)n;
    return -ENOSYS;
}
#endif

const char *td_upstream_ca;

int td_tls_setup(const char *dir, char *err, size_t errlen)
{
    (void)dir;
    snprintf(err, errlen, "no TLS end in toolexecd-sandbox");
    return -1;
}

const char *td_tls_bundle(void)
{
    return NULL;
}

int td_tls_start(const void *owner, int cfd, int ufd, const char *host, unsigned port,
                 const struct td_cred_host *h, const char *prefix, size_t plen, uint64_t budget,
                 unsigned max_open)
{
    (void)owner, (void)host, (void)port, (void)h, (void)prefix, (void)plen, (void)budget,
        (void)max_open;
    close(cfd);
    close(ufd);
    return -1;
}

uint64_t td_tls_used(const void *owner)
{
    (void)owner;
    return 0;
}

void td_tls_stop(const void *owner)
{
    (void)owner;
}
