/*
 * sandboxrun_lean.c - toolexecd-sandbox: `toolexecd --sandbox-run` as a
 * program of its own, the one `toolexec sandbox` execs. Same engine
 * (sandboxrun.c) linked from toolexecd_core, taking only the objects the
 * one-shot path reaches, so the loader maps and relocates a handful of
 * libraries instead of the daemon's two dozen (gnutls and its chain,
 * libsystemd and its compressors, libmicrohttpd): that was most of the
 * run's start-up.
 *
 * Two leaves the one-shot reaches but never uses are replaced, in
 * sandboxrun_leaves.c, which is what keeps their libraries out:
 *  - the egress proxy's TLS end (proxy_tls.c, gnutls) serves only hosts
 *    with credential headers, which a sandbox's definition cannot have
 *    (its options say none); a CONNECT that would need it is refused;
 *  - the journal (log.c with libsystemd) takes only structured records,
 *    which the one-shot does not log; a line goes to stderr as ever.
 * And http-parser, which only a run with an egress proxy uses, is opened
 * by such a run (confine/proxy_parser.c) rather than loaded by every one.
 */
#include "proxy_parser.h"
#include "sandboxrun.h"

int main(int argc, char **argv)
{
#ifdef TD_HTTP_PARSER_SONAME
    td_sbx_proxy_prepare = td_proxy_parser_open;
#endif
    return td_sandboxrun_main(argc, argv);
}
