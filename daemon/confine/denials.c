/*
 * denials.c - a call's list of what its confinement refused (denials.h).
 */
#include <string.h>

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

void td_denials_network(struct td_denials *d, const char *host, unsigned port)
{
    td_denials_add(d,
                   json_pack("{s:s,s:s,s:i}", "kind", "network", "host", host, "port", (int)port));
}

json_t *td_denials_fields(const struct td_denials *d)
{
    if (!d || !d->list || !json_array_size(d->list))
        return NULL;
    json_t *f = json_pack("{s:O}", "denied", d->list);
    if (f && d->more)
        json_object_set_new(f, "denied_more", json_integer((json_int_t)d->more));
    return f;
}

void td_denials_clear(struct td_denials *d)
{
    json_decref(d->list);
    d->list = NULL;
    d->more = 0;
    d->sys_arch = 0;
    memset(d->sys_seen, 0, sizeof(d->sys_seen));
}
