/*
 * sandboxrun_lean.c - toolexecd-sandbox: `toolexecd --sandbox-run` as a
 * program of its own, the one `toolexec sandbox` execs. Same engine
 * (sandboxrun.c) linked from toolexecd_core, taking only the objects the
 * one-shot path reaches, so the loader maps and relocates a handful of
 * libraries instead of the daemon's two dozen (gnutls and its chain,
 * libsystemd and its compressors, libmicrohttpd): that was most of the
 * run's start-up.
 *
 * Two leaves the one-shot reaches but never uses are replaced here, which
 * is what keeps their libraries out:
 *  - the egress proxy's TLS end (proxy_tls.c, gnutls) serves only hosts
 *    with credential headers, which a sandbox's definition cannot have
 *    (its options say none); a CONNECT that would need it is refused;
 *  - the journal (log.c with libsystemd) takes only structured records,
 *    which the one-shot does not log; a line goes to stderr as ever.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "proxy_tls.h"
#include "sandboxrun.h"

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

int main(int argc, char **argv)
{
    return td_sandboxrun_main(argc, argv);
}
