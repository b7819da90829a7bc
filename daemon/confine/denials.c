/*
 * denials.c - a call's list of what its confinement refused (denials.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "denials.h"

void td_denials_add(struct td_denials *d, json_t *entry)
{
    if (!entry)
        return;
    if (!d->list && !(d->list = json_array())) {
        json_decref(entry);
        return;
    }
    size_t i;
    json_t *v;
    json_array_foreach(d->list, i, v) if (json_equal(v, entry))
    {
        json_decref(entry);
        return;
    }
    /* Past the cap an entry is only counted, repeats included: telling
     * them apart would mean keeping them all, which the cap is there to
     * avoid. */
    if (json_array_size(d->list) < TD_DENIALS_MAX)
        json_array_append_new(d->list, entry);
    else {
        d->more++;
        json_decref(entry);
    }
}

void td_denials_syscall(struct td_denials *d, const char *name)
{
    td_denials_add(d, json_pack("{s:s,s:s}", "kind", "syscall", "name", name));
}

/* Linux's address families by number (linux/socket.h), for the names of
 * refused socket() calls. */
#define AF(x) [x] = #x
static const char *const af_names[] = {
    AF(AF_UNSPEC),    AF(AF_UNIX),       AF(AF_INET),    AF(AF_AX25),    AF(AF_IPX),
    AF(AF_APPLETALK), AF(AF_NETROM),     AF(AF_BRIDGE),  AF(AF_ATMPVC),  AF(AF_X25),
    AF(AF_INET6),     AF(AF_ROSE),       AF(AF_DECnet),  AF(AF_NETBEUI), AF(AF_SECURITY),
    AF(AF_KEY),       AF(AF_NETLINK),    AF(AF_PACKET),  AF(AF_ASH),     AF(AF_ECONET),
    AF(AF_ATMSVC),    AF(AF_RDS),        AF(AF_SNA),     AF(AF_IRDA),    AF(AF_PPPOX),
    AF(AF_WANPIPE),   AF(AF_LLC),        AF(AF_IB),      AF(AF_MPLS),    AF(AF_CAN),
    AF(AF_TIPC),      AF(AF_BLUETOOTH),  AF(AF_IUCV),    AF(AF_RXRPC),   AF(AF_ISDN),
    AF(AF_PHONET),    AF(AF_IEEE802154), AF(AF_CAIF),    AF(AF_ALG),     AF(AF_NFC),
    AF(AF_VSOCK),     AF(AF_KCM),        AF(AF_QIPCRTR), AF(AF_SMC),     AF(AF_XDP),
#ifdef AF_MCTP
    AF(AF_MCTP),
#endif
};
#undef AF

void td_denials_socket(struct td_denials *d, uint64_t family, char *name_out, size_t len)
{
    bool cacheable = family < TD_DENIALS_AF_MAX;
    if (cacheable && (d->af_seen[family / 8] & (1u << (family % 8))))
        return;
    char name[48];
    const char *af = family < sizeof(af_names) / sizeof(af_names[0]) ? af_names[family] : NULL;
    if (af)
        snprintf(name, sizeof(name), "socket(%s)", af);
    else
        snprintf(name, sizeof(name), "socket(%" PRIu64 ")", family);
    td_denials_syscall(d, name);
    if (name_out && len)
        snprintf(name_out, len, "%s", name);
    if (cacheable)
        d->af_seen[family / 8] |= (unsigned char)(1u << (family % 8));
}

void td_denials_network(struct td_denials *d, const char *host, unsigned port)
{
    td_denials_add(d,
                   json_pack("{s:s,s:s,s:i}", "kind", "network", "host", host, "port", (int)port));
}

void td_denials_filesystem(struct td_denials *d, const char *path, const char *access,
                           const char *rule)
{
    td_denials_add(d, json_pack("{s:s,s:s,s:s,s:s}", "kind", "filesystem", "path", path, "access",
                                access, "rule", rule));
}

json_t *td_denials_fields(const struct td_denials *d)
{
    if (!d || !d->list || !json_array_size(d->list))
        return NULL;
    json_t *f = json_pack("{s:O}", "denied", d->list);
    if (f && d->more)
        json_object_set_new(f, "denied_more", json_integer((json_int_t)d->more));
    if (f && d->fs_count)
        json_object_set_new(f, "denied_filesystem", json_integer((json_int_t)d->fs_count));
    return f;
}

void td_denials_clear(struct td_denials *d)
{
    json_decref(d->list);
    d->list = NULL;
    d->more = 0;
    d->fs_count = 0;
    d->sys_arch = 0;
    memset(d->sys_seen, 0, sizeof(d->sys_seen));
    memset(d->af_seen, 0, sizeof(d->af_seen));
}
