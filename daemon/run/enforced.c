/*
 * enforced.c - a call's record of its confinement (enforced.h), derived
 * from what spawndesc.c and the warm templates apply: the same view,
 * Landlock, filter, network and limits, for a cold and a warm call alike.
 * Everything but the uid is the tool's (a narrowed tool is a tool of its
 * own, narrow.c), so it is made once per tool and a call pays a shallow
 * copy.
 */
#include <stdio.h>
#include <string.h>

#include "sha256hex.h"
#include "cgroup.h"
#include "config.h"
#include "egress.h"
#include "enforced.h"
#include "fsview.h"
#include "spawndesc.h"
#include "sysfilter.h"
#include "tool.h"
#include "toolexec.h"

static json_t *strv(char **v)
{
    json_t *a = json_array();
    for (; a && v && *v; v++)
        json_array_append_new(a, json_string(*v));
    return a;
}

/* A layer the definition asked for, let run without it ("best_effort"),
 * and missing here: said so in its part of the record. */
static void mark(json_t *part, const struct td_tool *t, unsigned layer, bool missing)
{
    if (missing && (t->wants & t->best_effort & layer))
        json_object_set_new(part, "best_effort", json_true());
}

static json_t *view(const struct td_tool *t)
{
    bool host = td_fsview_is_host(t->fs);
    if (host || !td_fsview_mount_ns) {
        json_t *v = json_pack("{s:s}", "root", "host");
        mark(v, t, TD_LAYER_VIEW, !host);
        return v;
    }
    bool minimal = t->fs->dflt ? td_fs_default == TD_FS_MINIMAL : t->fs->minimal;
    json_t *v = json_pack("{s:o,s:o,s:s,s:o}", "hide", strv(t->fs->hide), "read", strv(t->fs->read),
                          "root", minimal ? "minimal" : "default", "write", strv(t->fs->write));
    /* keys sorted, compact: a digest a client can recompute */
    char *text = v ? te_json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT, NULL) : NULL;
    if (text) {
        char hex[TE_SHA256_HEX_LEN + 1];
        te_sha256_hex(text, strlen(text), hex);
        json_object_set_new(v, "sha256", json_string(hex));
    }
    free(text);
    return v;
}

static json_t *landlock(const struct td_tool *t)
{
    /* spawndesc.c: Landlock wherever the view is not the host's */
    int abi = td_fsview_is_host(t->fs) ? 0 : td_fsview_landlock_abi();
    json_t *v = json_pack("{s:i}", "abi", abi);
    mark(v, t, TD_LAYER_LANDLOCK, abi == 0);
    return v;
}

static json_t *seccomp(const struct td_tool *t, enum td_net net)
{
    const struct td_sysfilter *sf = td_sysfilter_get(t->sysfilter, net);
    const char *name = td_sysfilter_conf_custom(t->sysfilter) ? "custom"
                       : td_sysfilter_conf_off(t->sysfilter)  ? "off"
                                                              : "default";
    json_t *v = json_pack("{s:s,s:b,s:b}", "filter", name, "applied", sf != NULL,
                          "denials_reported", sf && sf->notify);
    mark(v, t, TD_LAYER_SECCOMP, !sf);
    return v;
}

static json_t *network(const struct td_tool *t, enum td_net net)
{
    if (net == TD_NET_PROXY)
        return json_pack("{s:s,s:o}", "mode", "proxy", "allow", td_egress_list(t->egress));
    return json_pack("{s:s}", "mode", net == TD_NET_HOST ? "host" : "off");
}

static json_t *limits(const struct td_tool *t)
{
    struct td_limits l;
    td_spawndesc_limits(t, 0, &l);
    json_t *v = json_object();
    const char *via[TD_LIMIT_COUNT] = {
        [TD_LIMIT_CPU_MS] = "rlimit",
        [TD_LIMIT_MEMORY_MB] = td_cgroup_memory() ? "cgroup" : "rlimit",
        [TD_LIMIT_PROCESSES] = td_cgroup_pids() ? "cgroup" : "rlimit",
        [TD_LIMIT_OPEN_FILES] = "rlimit",
        [TD_LIMIT_FILE_SIZE_MB] = "rlimit",
        [TD_LIMIT_OUTPUT_MB] = "daemon", /* counted as the daemon reads it */
    };
    for (size_t i = 0; v && i < TD_LIMIT_COUNT; i++)
        if (*td_limit_at(&l, i))
            json_object_set_new(
                v, td_limit_names[i],
                json_pack("{s:I,s:s}", "value", (json_int_t)*td_limit_at(&l, i), "via", via[i]));
    return v;
}

static json_t *make(const struct td_tool *t)
{
    int net_on = t->network >= 0 ? t->network : td_cfg.network;
    enum td_net net = t->egress ? TD_NET_PROXY : net_on ? TD_NET_HOST : TD_NET_NONE;
    json_t *v =
        json_pack("{s:o,s:o,s:o,s:o,s:o}", "view", view(t), "landlock", landlock(t), "seccomp",
                  seccomp(t, net), "network", network(t, net), "limits", limits(t));
    if (v && t->env_creds) { /* the variables' names, never their values */
        json_t *names = json_array(), *c;
        const char *var;
        json_object_foreach(t->env_creds, var, c) json_array_append_new(names, json_string(var));
        json_object_set_new(v, "env_credentials", names);
    }
    return v;
}

json_t *td_enforced_call(struct td_tool *t, long long uid)
{
    if (!t->enforced && !(t->enforced = make(t)))
        return NULL;
    json_t *v = json_copy(t->enforced); /* shallow: the parts are shared */
    if (v)
        json_object_set_new(v, "uid", uid >= 0 ? json_integer(uid) : json_null());
    return v;
}
