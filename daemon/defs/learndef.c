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

bool td_learndef_refusals_seen;

/* "learn": "refused": nothing is let through that the definition does
 * not let through, so no warning; cold calls only, as "learn": true (a
 * template's calls would be recorded as its). */
static int learn_refused(const char *file, json_t *def, struct td_tool *t, char *err, size_t errlen)
{
    if (!(t->learned = td_learn_new()) || !(t->learn_def = json_deep_copy(def))) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -ENOMEM;
    }
    t->learn = t->learn_refused = true;
    t->warm = false;
    return 0;
}

int td_learndef_parse(const char *file, json_t *def, struct td_tool *t, char *err, size_t errlen)
{
    json_t *v = json_object_get(def, "learn");
    bool refused = json_is_string(v) && strcmp(json_string_value(v), "refused") == 0;
    if (v && !json_is_boolean(v) && !refused) {
        snprintf(err, errlen, "%s: learn: expected true, false or \"refused\"", file);
        return -EINVAL;
    }
    if (!json_is_true(v) && !refused)
        return 0;
    json_t *fs = json_object_get(def, "filesystem");
    const char *root = json_string_value(json_object_get(fs, "root"));
    t->learn_minimal = root && strcmp(root, "minimal") == 0;
    if (refused) /* confined as written: only what that refuses is learned */
        return learn_refused(file, def, t, err, errlen);
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
    return td_learndef_propose(t, t->learned);
}

json_t *td_learndef_propose(const struct td_tool *t, const struct td_learn *l)
{
    json_t *p = t->learn && l ? td_learn_propose(l, t->learn_minimal) : NULL;
    if (p && t->learn_refused) { /* only the file system's refusals are learned */
        json_object_del(p, "network");
        json_object_del(p, "syscalls");
        json_object_del(p, "deny_syscalls");
        json_object_del(json_object_get(p, "filesystem"), "root");
        if (!td_learndef_refusals_seen) /* an empty proposal is not a clean run here */
            json_object_set_new(p, "refusals_unseen",
                                json_string("this daemon sees no file-system refusals (a root "
                                            "daemon does, with BPF and a uid of each call's "
                                            "own): none can be learned"));
    }
    return p;
}

/* Each of add's entries not in dst appended to dst. */
static void append_missing(json_t *dst, const json_t *add)
{
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(add, i, x)
    {
        bool have = false;
        json_array_foreach(dst, j, y) have = have || json_equal(x, y);
        if (!have)
            json_array_append(dst, x);
    }
}

/* A definition's "read" or "write" (key of fs) with the proposal's paths
 * added, each once. */
static void widen(json_t *fs, const char *key, const json_t *add)
{
    if (!json_array_size(add))
        return;
    if (!json_is_array(json_object_get(fs, key)))
        json_object_set_new(fs, key, json_array());
    append_missing(json_object_get(fs, key), add);
}

/* "learn": "refused": the definition as it was, widened by what its
 * calls were refused (never narrowed: its calls saw only what it gives). */
static json_t *widened(const struct td_tool *t, const json_t *proposal)
{
    json_t *d = json_deep_copy(t->learn_def);
    if (!d)
        return NULL;
    json_object_del(d, "learn");
    json_t *pfs = json_object_get(proposal, "filesystem");
    if (!json_object_get(pfs, "read") && !json_object_get(pfs, "write"))
        return d;
    json_t *fs = json_object_get(d, "filesystem");
    if (!json_is_object(fs)) { /* the daemon's default view ("host" asks for nothing) */
        if (json_is_string(fs))
            return d;
        json_object_set_new(d, "filesystem", json_object());
        fs = json_object_get(d, "filesystem");
    }
    widen(fs, "read", json_object_get(pfs, "read"));
    widen(fs, "write", json_object_get(pfs, "write"));
    return d;
}

json_t *td_learndef_definition(const struct td_tool *t, const json_t *proposal)
{
    if (!t->learn || !proposal)
        return NULL;
    if (t->learn_refused)
        return widened(t, proposal);
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
        append_missing(all, json_object_get(d, "deny_syscalls"));
        json_object_set_new(d, "syscalls", json_string("off"));
        json_object_set_new(d, "deny_syscalls", all);
    }
    return d;
}
