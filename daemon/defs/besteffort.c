/*
 * besteffort.c - the layers a definition asks for, and whether this host
 * gives them (besteffort.h). A definition asks for a layer by its own keys,
 * not by the daemon's defaults (those are the operator's, whom
 * --require-confinement serves): "filesystem" other than "host" asks for a
 * view (a mount namespace) and Landlock (any ABI: lib/landlock.c adapts to
 * the one it finds); "syscalls": "default" or "deny_syscalls" ask for
 * seccomp.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "besteffort.h"
#include "config.h"
#include "fsview.h"
#include "sysfilter.h"
#include "tool.h"

static const struct {
    unsigned bit;
    const char *name, *key, *why;
} layers[] = {
    {TD_LAYER_VIEW, "view", "filesystem",
     "calls get no mount namespace here, so no view of their own"},
    {TD_LAYER_LANDLOCK, "landlock", "filesystem", "this kernel offers no Landlock"},
    {TD_LAYER_SECCOMP, "seccomp", "syscalls", "calls get no seccomp filter here"},
};
#define NLAYERS (sizeof(layers) / sizeof(layers[0]))

unsigned td_besteffort_available(void)
{
    static int seccomp = -1; /* the kernel's answer does not change */
    if (seccomp < 0) {
        char detail[96];
        seccomp = td_sysfilter_probe(detail, sizeof(detail)) == 1;
    }
    return (td_fsview_mount_ns ? TD_LAYER_VIEW : 0) |
           (td_fsview_landlock_abi() > 0 ? TD_LAYER_LANDLOCK : 0) |
           (seccomp && !(td_cfg.layers_off & TD_LAYER_SECCOMP) ? TD_LAYER_SECCOMP : 0);
}

int td_besteffort_parse(const char *file, const json_t *def, struct td_tool *t, char *err,
                        size_t errlen)
{
    t->wants = t->best_effort = 0;
    const json_t *be = json_object_get(def, "best_effort");
    if (be && !json_is_array(be)) {
        snprintf(err, errlen, "%s: best_effort: expected an array of layer names", file);
        return -EINVAL;
    }
    for (size_t i = 0; be && i < json_array_size(be); i++) {
        const char *n = json_string_value(json_array_get(be, i));
        size_t k = 0;
        while (n && k < NLAYERS && strcmp(n, layers[k].name) != 0)
            k++;
        if (!n || k == NLAYERS) {
            snprintf(err, errlen, "%s: best_effort[%zu]: expected a layer: view, landlock, seccomp",
                     file, i);
            return -EINVAL;
        }
        t->best_effort |= layers[k].bit;
    }
    const json_t *fs = json_object_get(def, "filesystem");
    if (fs && !td_fsview_is_host(t->fs))
        t->wants |= TD_LAYER_VIEW | TD_LAYER_LANDLOCK;
    const char *sc = json_string_value(json_object_get(def, "syscalls"));
    if ((sc && strcmp(sc, "default") == 0) ||
        json_array_size(json_object_get(def, "deny_syscalls")))
        t->wants |= TD_LAYER_SECCOMP;
    unsigned missing = t->wants & ~td_besteffort_available() & ~t->best_effort;
    for (size_t i = 0; i < NLAYERS; i++)
        if (missing & layers[i].bit) {
            snprintf(err, errlen,
                     "%s: %s: %s (toolexecd --check); refused rather than run with less, "
                     "unless \"best_effort\" names \"%s\"",
                     file, layers[i].key, layers[i].why, layers[i].name);
            return -EINVAL;
        }
    return 0;
}
