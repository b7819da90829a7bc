/*
 * sysfilter.h - the system-call filters a call's worker is started under,
 * built with libseccomp (the common ones once at start, a tool's own once
 * at load), handed to sandbox.c as ready BPF.
 */
#ifndef TD_SYSFILTER_H
#define TD_SYSFILTER_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* A built filter. */
struct td_sysfilter {
    struct sock_fprog prog;
    /* Denied calls stop at SECCOMP_RET_USER_NOTIF: the child loads it with
     * a listener and hands that up (sysnotify.c answers EPERM and reports
     * the call). False: denied calls fail with EPERM straight away, and no
     * one hears of it (a kernel without user notification). */
    bool notify;
};

/* A tool's "syscalls" and "deny_syscalls" (toolexecd.tools(5)); NULL in a
 * tool that sets neither: the daemon's default filter. */
struct td_sysfilter_conf;

/* Builds the common filters; logs and returns -1 when libseccomp cannot. */
int td_sysfilter_setup(void);
/* The one-shot's (sandboxrun.c) instead: what parsing a definition needs,
 * no filter yet; each common one is built when first asked for (one
 * call, one filter, where the daemon builds all eleven ahead). Whether a
 * child may have a listener is not tried ahead: the call's filter fails
 * to load (step seccomp) where it may not. */
int td_sysfilter_setup_lazy(void);
/* For toolexecd --check: 1 when workers get a filter (detail says whether
 * its denials are reported), 0 when this kernel or libseccomp offer none. */
int td_sysfilter_probe(char *detail, size_t len);
/* A tool definition's keys; 0, or -EINVAL with err naming file and key (an
 * unknown system call), -ENOMEM. *out stays NULL for the default. */
int td_sysfilter_parse(const char *file, const json_t *def, struct td_sysfilter_conf **out,
                       char *err, size_t errlen);
void td_sysfilter_conf_free(struct td_sysfilter_conf *c);
/* Its own filter ("deny_syscalls"), and "syscalls": "off" (for the
 * record of what a call ran under). */
bool td_sysfilter_conf_custom(const struct td_sysfilter_conf *c);
bool td_sysfilter_conf_off(const struct td_sysfilter_conf *c);
/* A call's network, as the filter sees it: the host's (Unix sockets
 * allowed), or a namespace of its own (refused, see sysfilter.c). */
enum td_net {
    TD_NET_NONE,  /* "network": false: its own lo only */
    TD_NET_PROXY, /* an egress allow-list: its own lo, the proxy on it */
    TD_NET_HOST,  /* "network": true */
    TD_NET_COUNT
};
/* The filter for a call of a tool with conf c, NULL for none. Without the
 * host's network, socket(AF_UNIX) fails with EACCES (a network namespace
 * leaves Unix sockets reachable by path); with none at all,
 * socket(AF_INET*) is denied too. */
const struct td_sysfilter *td_sysfilter_get(const struct td_sysfilter_conf *c, enum td_net net);
/* The filter of a warm tool's template: td_sysfilter_get()'s less the
 * rules on clone()'s namespace flags and the mount calls, which its calls'
 * own stacked filter (lib/warmcall.c) puts back (with EPERM, unreported);
 * setns and unshare stay refused to the template too; with a listener where a call's has
 * one, serving the template and all its calls. NULL for none. */
const struct td_sysfilter *td_sysfilter_template(const struct td_sysfilter_conf *c,
                                                 enum td_net net);

/* Learn mode (learn.h): the default filter of a call with an egress
 * proxy whose denied calls, and the calls that name a path (open, exec,
 * mkdir, unlink, rename, ...), all stop at the listener, which records
 * them and lets them go on (learnsys.c). NULL without user notification. */
const struct td_sysfilter *td_sysfilter_learn(void);
/* Can this host notify (and so learn paths and system calls)? */
bool td_sysfilter_notifies(void);
/* The default denied set's names this libseccomp knows (NULL-terminated). */
const char *const *td_sysfilter_default_names(void);

#endif
