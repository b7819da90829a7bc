/*
 * learndef.c - the "learn" key (learndef.h).
 *
 * Learning is the operator's choice for a trusted test run: a learning
 * tool's calls see the host's file system as its user may (no view, no
 * Landlock), reach any host through the egress proxy, and make any system
 * call, each recorded; so a warning is logged at every load.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"
#include "fsview.h"
#include "learn.h"
#include "learndef.h"
#include "learnsys.h"
#include "log.h"
#include "sysfilter.h"
#include "tool.h"

int td_learndef_parse(const char *file, json_t *def, struct td_tool *t, char *err, size_t errlen)
{
    json_t *v = json_object_get(def, "learn");
    if (v && !json_is_boolean(v)) {
        snprintf(err, errlen, "%s: learn: expected true or false", file);
        return -EINVAL;
    }
    if (!json_is_true(v))
        return 0;
    json_t *fs = json_object_get(def, "filesystem");
    const char *root = json_string_value(json_object_get(fs, "root"));
    t->learn_minimal = root && strcmp(root, "minimal") == 0;
    /* the host's, as "filesystem": "host" (whose own warning the one
     * below says more than) */
    td_fsview_free(t->fs);
    if (!(t->fs = calloc(1, sizeof(*t->fs)))) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -ENOMEM;
    }
    t->fs->host = true;
    td_egress_free(t->egress);
    t->network = 0;
    if (!(t->egress = td_egress_any()) || !(t->learned = td_learn_new()) ||
        !(t->learn_def = json_deep_copy(def))) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -ENOMEM;
    }
    t->learn = true;
    t->warm = false; /* a template's listener routes, it does not record */
    td_log(TD_LOG_WARN,
           "tool %s: learn mode: its calls see the host's file system as their user may, reach "
           "any host through the egress proxy and make any system call, recorded (for trusted "
           "test runs only)%s",
           t->name,
           td_sysfilter_notifies() ? ""
                                   : "; this host has no seccomp user notification: its paths and "
                                     "system calls are not recorded, only its hosts");
    return 0;
}

json_t *td_learndef_proposal(const struct td_tool *t)
{
    return t->learn ? td_learn_propose(t->learned, t->learn_minimal) : NULL;
}

json_t *td_learndef_definition(const struct td_tool *t, const json_t *proposal)
{
    if (!t->learn || !proposal)
        return NULL;
    json_t *d = json_deep_copy(t->learn_def);
    if (!d)
        return NULL;
    json_object_del(d, "learn");
    json_t *fs = json_deep_copy(json_object_get(proposal, "filesystem"));
    json_t *hide = json_object_get(json_object_get(d, "filesystem"), "hide");
    if (fs && hide)
        json_object_set(fs, "hide", hide);
    json_object_set_new(d, "filesystem", fs);
    json_t *net = json_object_get(proposal, "network");
    json_t *orig = json_object_get(d, "network");
    if (json_is_object(net) && json_is_object(orig)) /* its limits kept */
        json_object_set(orig, "allow", json_object_get(net, "allow"));
    else
        json_object_set(d, "network", net);
    json_t *deny = json_object_get(proposal, "deny_syscalls");
    if (deny) {
        json_t *all = json_deep_copy(deny);
        json_t *own = json_object_get(d, "deny_syscalls"), *x;
        size_t i;
        json_array_foreach(own, i, x)
        {
            bool have = false;
            size_t j;
            json_t *y;
            json_array_foreach(all, j, y) have = have || json_equal(x, y);
            if (!have)
                json_array_append(all, x);
        }
        json_object_set_new(d, "syscalls", json_string("off"));
        json_object_set_new(d, "deny_syscalls", all);
    }
    return d;
}
