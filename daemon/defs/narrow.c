/*
 * narrow.c - a tool narrowed by a run request's "policy" (narrow.h).
 *
 * A narrowed tool is a td_tool of its own that shares every part of its
 * parent but those it narrows (its view, its allow-list), so everything
 * downstream (the spawn description, the call's proxy, Landlock, the
 * cgroup) enforces it as it would a definition. It starts cold: a warm
 * tool's template has the tool's view and network, which a call cannot
 * narrow after the fork; a cold start applies every key. It takes no
 * spare (spares.c matches the very definition) and makes none.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "egress.h"
#include "fsview.h"
#include "fsview_narrow.h"
#include "narrow.h"
#include "registry.h"
#include "tool.h"
#include "toolexec.h"
#include "util.h"

static struct td_tool *derive(struct td_tool *t)
{
    struct td_tool *d = malloc(sizeof(*d));
    if (!d)
        return NULL;
    *d = *t;
    d->refs = 1;
    d->parent = td_tool_ref(t);
    d->own_fs = d->own_egress = false;
    d->enforced = NULL; /* its own (run/enforced.c) */
    d->warm = false;
    return d;
}

static bool positive(json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* One limit narrowed: no higher than the tool's (or the daemon's) own. */
static int narrow_limit(struct td_tool *d, const char *k, json_t *v, const char *key, char *err,
                        size_t errlen)
{
    uint64_t want, *own = td_limit_field(&d->limits, k), *dflt = td_limit_field(&td_cfg.limits, k);
    if (!own)
        return td_fail(err, errlen, "%s: unknown limit (" TD_LIMIT_NAMES_TEXT ")", key);
    if (!positive(v, &want))
        return td_fail(err, errlen, "%s: expected a positive integer", key);
    uint64_t now = *own ? *own : *dflt;
    if (now && want > now)
        return td_fail(err, errlen, "%s: %llu is above tool %s's %llu", key,
                       (unsigned long long)want, d->name, (unsigned long long)now);
    *own = want;
    return 0;
}

static int narrow_network(struct td_tool *d, json_t *v, const char *key, char *err, size_t errlen)
{
    int now = d->egress ? 2 : d->network >= 0 ? d->network : td_cfg.network;
    if (json_is_false(v)) {
        d->network = 0;
        if (d->own_egress)
            td_egress_free(d->egress);
        d->egress = NULL;
        d->own_egress = false;
        return 0;
    }
    if (json_is_true(v)) {
        if (now != 1)
            return td_fail(err, errlen, "%s.network: true: tool %s has %s", key, d->name,
                           now ? "an allow-list" : "no network");
        return 0;
    }
    if (!json_is_object(v))
        return td_fail(err, errlen, "%s.network: expected false, true or {\"allow\": [hosts]}",
                       key);
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x)
    {
        if (strcmp(k, "allow"))
            return td_fail(err, errlen, "%s.network.%s: not a key a policy narrows (allow)", key,
                           k);
    }
    json_t *allow = json_object_get(v, "allow");
    if (!json_is_array(allow))
        return td_fail(err, errlen, "%s.network.allow: expected an array of host names", key);
    if (now == 0)
        return json_array_size(allow) == 0
                   ? 0
                   : td_fail(err, errlen, "%s.network.allow[0]: tool %s has no network", key,
                             d->name);
    struct td_egress *e;
    char why[400];
    int bad_at = -1;
    if (now == 1) { /* the host's network narrowed to a list: parsed as a definition's */
        json_t *obj = json_pack("{s:O}", "allow", allow);
        int rc = obj ? td_egress_parse(obj, &e, why, sizeof(why)) : -1;
        json_decref(obj);
        if (rc < 0)
            return td_fail(err, errlen, "%s.network.%s", key, obj ? why : ": out of memory");
    } else if (td_egress_narrow(d->egress, allow, &e, &bad_at, why, sizeof(why)) < 0) {
        if (bad_at < 0)
            return td_fail(err, errlen, "%s.network.%s", key, why);
        return td_fail(err, errlen, "%s.network.allow[%d]: \"%s\" is not in tool %s's allow-list",
                       key, bad_at, json_string_value(json_array_get(allow, (size_t)bad_at)),
                       d->name);
    }
    if (d->own_egress)
        td_egress_free(d->egress);
    d->egress = e;
    d->own_egress = true;
    d->network = 0;
    return 0;
}

/* The tools directory t's definition was read from (registry.c resolved
 * it): every view hides it. From the file's name, not looked up again. */
static const char *tools_dir(const struct td_tool *t, char *buf, size_t len)
{
    const char *slash = t->file && t->file[0] == '/' ? strrchr(t->file, '/') : NULL;
    if (!slash || slash == t->file || (size_t)(slash - t->file) >= len)
        return NULL;
    memcpy(buf, t->file, (size_t)(slash - t->file));
    buf[slash - t->file] = '\0';
    return buf;
}

static int narrow_tool(struct td_tool *t, json_t *pol, const char *key, struct td_tool **out,
                       uint64_t *timeout_ms, char *err, size_t errlen)
{
    *out = NULL;
    if (!pol || json_is_null(pol)) {
        *out = td_tool_ref(t);
        return 0;
    }
    if (!json_is_object(pol))
        return td_fail(err, errlen, "%s: expected an object", key);
    const char *k;
    json_t *v;
    bool deep = false; /* anything but the timeout: a tool of its own */
    json_object_foreach(pol, k, v)
    {
        if (strcmp(k, "network") && strcmp(k, "filesystem") && strcmp(k, "timeout_ms") &&
            strcmp(k, "limits") && strcmp(k, "memory_mb") && strcmp(k, "processes"))
            return td_fail(err, errlen,
                           "%s.%s: not a key a policy narrows (network, filesystem, timeout_ms, "
                           "limits, memory_mb, processes)",
                           key, k);
        deep |= strcmp(k, "timeout_ms") != 0;
    }
    json_t *to = json_object_get(pol, "timeout_ms");
    uint64_t want = 0, ceiling = *timeout_ms;
    if (t->timeout_ms && (!ceiling || t->timeout_ms < ceiling))
        ceiling = t->timeout_ms;
    if (to && !positive(to, &want))
        return td_fail(err, errlen, "%s.timeout_ms: expected a positive integer", key);
    if (to && ceiling && want > ceiling)
        return td_fail(err, errlen, "%s.timeout_ms: %llu is above tool %s's %llu", key,
                       (unsigned long long)want, t->name, (unsigned long long)ceiling);
    if (!deep) {
        *timeout_ms = to ? want : ceiling;
        *out = td_tool_ref(t);
        return 0;
    }
    struct td_tool *d = derive(t);
    if (!d)
        return td_fail(err, errlen, "%s: out of memory", key);
    char sub[128];
    int rc = 0;
    json_t *lim = json_object_get(pol, "limits");
    if (lim && !json_is_object(lim))
        rc = td_fail(err, errlen, "%s.limits: expected an object", key);
    json_object_foreach(lim, k, v)
    {
        if (rc == 0) {
            snprintf(sub, sizeof(sub), "%s.limits.%s", key, k);
            rc = narrow_limit(d, k, v, sub, err, errlen);
        }
    }
    for (int i = 0; rc == 0 && i < 2; i++) {
        const char *lk = i ? "processes" : "memory_mb";
        if ((v = json_object_get(pol, lk))) {
            snprintf(sub, sizeof(sub), "%s.%s", key, lk);
            rc = narrow_limit(d, lk, v, sub, err, errlen);
        }
    }
    if (rc == 0 && (v = json_object_get(pol, "network")))
        rc = narrow_network(d, v, key, err, errlen);
    if (rc == 0 && (v = json_object_get(pol, "filesystem"))) {
        struct td_fsview *fs;
        char tools[PATH_MAX];
        if (td_fsview_narrow(t->fs, t->name, tools_dir(t, tools, sizeof(tools)), v, key, &fs, err,
                             errlen) < 0) {
            rc = -1;
        } else {
            d->fs = fs;
            d->own_fs = true;
        }
    }
    if (rc < 0) {
        td_tool_unref(d);
        return -1;
    }
    *timeout_ms = to ? want : ceiling;
    *out = d;
    return 0;
}

int td_narrow_tool(struct td_tool *t, json_t *pol, const char *key, struct td_tool **out,
                   uint64_t *timeout_ms, char *err, size_t errlen)
{
    int rc = narrow_tool(t, pol, key, out, timeout_ms, err, errlen);
    /* the message echoes what the client sent: errlen may have cut a
     * character of it */
    if (rc < 0 && errlen)
        te_utf8_repair(err);
    return rc;
}
