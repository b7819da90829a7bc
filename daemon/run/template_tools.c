/*
 * template_tools.c - warm start (proto/PROTOCOL.md, "Warm start"): for each tool
 * with "start": "warm", a template process started like a cold worker of the
 * tool (spawndesc.c's description: user, limits, PID and mount namespace,
 * filter), told by its first frame that it is a template; the tools of a
 * warm MCP server share one, the server's (keyed by its name: each call's
 * request names its tool, defs/mcppy.c); per call a fork
 * request carrying the call's descriptors over the control socket (its
 * stdin). The set-up of each call's process is the SDKs' (lib/warm.c forks it;
 * its steps are in lib/warmp1.c, lib/warmview.c, lib/warmcall.c).
 *
 * Its parts (template_int.h): this file, the warm tools' side; the life of
 * each template process in template.c, whose a denied system call is in
 * template_deny.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calldir.h"
#include "config.h"
#include "containment.h"
#include "egress.h"
#include "fsview.h"
#include "log.h"
#include "mcppy.h"
#include "randhex.h"
#include "registry.h"
#include "template.h"
#include "template_int.h"
#include "util.h"
#include "warmid.h"

static SLIST_HEAD(, warm) all = SLIST_HEAD_INITIALIZER(all);

/* ---- the tools ------------------------------------------------------------ */

static bool same_strv(char **a, char **b)
{
    for (; a && b && *a && *b; a++, b++)
        if (strcmp(*a, *b))
            return false;
    return (!a || !*a) == (!b || !*b);
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_fs(const struct td_fsview *a, const struct td_fsview *b)
{
    return (!a || !b) ? a == b
                      : a->dflt == b->dflt && a->host == b->host && a->minimal == b->minimal &&
                            same_strv(a->read, b->read) && same_strv(a->write, b->write) &&
                            same_strv(a->hide, b->hide);
}

/* Would a template started from b differ from one started from a? */
static bool same_def(const struct td_tool *a, const struct td_tool *b)
{
    return same_strv(a->argv, b->argv) && same_strv(a->env, b->env) &&
           memcmp(&a->limits, &b->limits, sizeof(a->limits)) == 0 && a->network == b->network &&
           same_str(a->user, b->user) && same_str(a->group, b->group) &&
           a->switch_user == b->switch_user && a->uid == b->uid && a->gid == b->gid &&
           a->max_forks == b->max_forks && a->timeout_ms == b->timeout_ms &&
           same_fs(a->fs, b->fs) &&
           !a->egress == !b->egress; /* its filter lets AF_INET through for the proxy */
}

static void warm_free_closed(uv_handle_t *h)
{
    struct warm *w = h->data;
    free(w->name);
    free(w);
}

/* A warm call gets what a cold call of its tool would, or the tool runs
 * cold: what a template cannot give its calls yet is named here (the
 * egress proxy's listener is made by each call's P1 (lib/warmp1.c); the
 * file-system view is the template's, redone per call where it must be:
 * view_of()). NULL: nothing missing. */
static const char *warm_gap(const struct td_tool *t)
{
    size_t len = 0; /* each fork request carries them: within a control frame */
    for (char **p = t->fs ? t->fs->write : NULL; p && *p; p++)
        len += strlen(*p) + 8;
    if (len > CTL_MAX / 2)
        return "its \"write\" paths are too long to send with each fork request";
    return NULL;
}

static bool warm_ok(const struct td_tool *t)
{
    return t->warm && !warm_gap(t);
}

/* The tool of td_tools a template keyed k is started from: the first by
 * name of those it serves. NULL: none. */
static struct td_tool *tool_for(const char *k)
{
    for (size_t i = 0; i < td_tools->n; i++)
        if (warm_ok(td_tools->tools[i]) && strcmp(td_warm_key(td_tools->tools[i]), k) == 0)
            return td_tools->tools[i];
    return NULL;
}

/* May a call of t be a fork of in? Its own tool's template, or (a shared
 * one) that of another loaded tool of the same key whose template would be
 * the same: not a narrowed tool (a td_tool of its own), nor one a reload
 * has replaced, as a warm tool's own template serves neither. */
static bool serves(const struct inst *in, const struct td_tool *t)
{
    return in->tool == t ||
           (!t->parent && td_registry_find(td_tools, t->name) == t &&
            strcmp(td_warm_key(in->tool), td_warm_key(t)) == 0 && same_def(in->tool, t));
}

void td_template_sync(void)
{
    for (size_t i = 0; i < td_tools->n; i++) {
        const char *gap = td_tools->tools[i]->warm ? warm_gap(td_tools->tools[i]) : NULL;
        if (gap)
            td_log(TD_LOG_WARN, "tool %s: %s; its calls run cold", td_tools->tools[i]->name, gap);
    }
    if (!td_call_ns) {
        for (size_t i = 0; i < td_tools->n; i++)
            if (td_tools->tools[i]->warm)
                td_log(TD_LOG_WARN,
                       "tool %s: warm start needs a PID namespace per call, which this kernel "
                       "does not give; its calls run cold",
                       td_tools->tools[i]->name);
        return;
    }
    struct warm *w, *next;
    /* gone, no longer warm, or changed: retired */
    for (w = SLIST_FIRST(&all); w; w = next) {
        next = SLIST_NEXT(w, link);
        struct td_tool *t = tool_for(w->name);
        if (t && same_def(w->tool, t)) {
            td_tool_unref(w->tool);
            w->tool = td_tool_ref(t);
            if (w->cur) {
                td_tool_unref(w->cur->tool);
                w->cur->tool = td_tool_ref(t);
            }
            continue;
        }
        if (w->cur)
            td_inst_retire(w->cur);
        if (w->cur) /* retire started a fresh one: not for a changed or gone tool */
            td_inst_stop(w->cur, NULL);
        td_tool_unref(w->tool);
        w->tool = NULL;
        if (t) { /* changed: a fresh one from the new definition */
            w->tool = td_tool_ref(t);
            td_log(TD_LOG_INFO, "%s %s: definition changed; its warm template is replaced",
                   td_warm_kind(t), w->name);
            uv_timer_stop(&w->backoff);
            w->backoff_running = false;
            w->failures = 0;
            td_warm_start(w);
            continue;
        }
        SLIST_REMOVE(&all, w, warm, link);
        uv_close((uv_handle_t *)&w->backoff, warm_free_closed);
    }
    for (size_t i = 0; i < td_tools->n; i++) {
        struct td_tool *t = td_tools->tools[i];
        if (!warm_ok(t))
            continue;
        SLIST_FOREACH(w, &all, link)
            if (strcmp(w->name, td_warm_key(t)) == 0)
                break;
        if (w)
            continue;
        w = calloc(1, sizeof(*w));
        if (!w || !(w->name = strdup(td_warm_key(t)))) {
            free(w);
            continue;
        }
        w->tool = td_tool_ref(t);
        uv_timer_init(td_loop, &w->backoff);
        w->backoff.data = w;
        SLIST_INSERT_HEAD(&all, w, link);
        td_warm_start(w);
    }
}

void td_template_shutdown(void)
{
    struct warm *w;
    td_warmid_close();
    while ((w = SLIST_FIRST(&all))) {
        SLIST_REMOVE_HEAD(&all, link);
        if (w->cur)
            td_inst_retire(w->cur);
        if (w->cur)
            td_inst_stop(w->cur, NULL);
        td_tool_unref(w->tool);
        w->tool = NULL;
        uv_close((uv_handle_t *)&w->backoff, warm_free_closed);
    }
    td_inst_kill_all();
}

/* ---- calls -------------------------------------------------------------- */

/* An unprivileged daemon cannot give a limit above its own hard one (as
 * spawndesc.c's build_rlimits()). */
static uint64_t warm_nproc(uint64_t n)
{
    struct rlimit own;
    if (td_euid() != 0 && getrlimit(RLIMIT_NPROC, &own) == 0 && own.rlim_max < n)
        n = own.rlim_max;
    return n;
}

static struct warm *find_warm(const char *key)
{
    struct warm *w;
    SLIST_FOREACH(w, &all, link)
        if (strcmp(w->name, key) == 0)
            return w;
    return NULL;
}

struct td_warm_call *td_template_call(struct td_tool *t, const char *call_id, const char *batch_id,
                                      bool newnet, int fds[4], const struct td_warm_ops *ops,
                                      void *data, char **dir)
{
    struct warm *w = find_warm(td_warm_key(t));
    struct inst *in = w ? w->cur : NULL;
    struct td_warm_call *c = NULL;
    *dir = NULL;
    if (!in || in->state != I_READY || !serves(in, t))
        goto fail;
    c = calloc(1, sizeof(*c));
    if (!c)
        goto fail;
    /* its directory, in the template's: the only place the template's
     * mount namespace shows of the work directory */
    char name[40];
    for (int tries = 0;; tries++) {
        name[0] = 'c';
        if (te_random_hex(name + 1, 8) < 0)
            goto fail;
        if (mkdirat(in->dirfd, name, 0700) == 0)
            break;
        if (errno != EEXIST || tries == 4)
            goto fail;
    }
    if ((in->tool->switch_user &&
         fchownat(in->dirfd, name, in->uid != (uid_t)-1 ? in->uid : in->tool->uid, in->gid,
                  AT_SYMLINK_NOFOLLOW) < 0) ||
        !(c->dir = strdup(name)) || asprintf(dir, "%s/%s", in->dir, name) < 0) {
        unlinkat(in->dirfd, name, AT_REMOVEDIR);
        *dir = NULL;
        goto fail;
    }
    c->inst = in;
    c->id = ++in->next_id;
    c->ops = ops;
    c->data = data;
    c->pidfd = -1;
    c->asked_ns = uv_hrtime();
    /* an egress allow-list: P1 makes the proxy's listener in the call's
     * own network namespace (a newnet one) and "forked" brings it */
    c->proxy = t->egress && newnet;
    /* uid_map: each call's PID 1 asks us for a uid of the call's own, as a
     * cold call of the tool gets (warmid.c); nproc: the call's own process
     * limit, as a cold call's (its PID 1 counted) */
    uint64_t nproc = t->limits.processes ? t->limits.processes : td_cfg.limits.processes;
    json_t *req = json_pack("{s:{s:I,s:s,s:b,s:s,s:s,s:O*,s:b,s:I}}", "fork", "id",
                            (json_int_t)c->id, "dir", name, "newnet", newnet, "call_id", call_id,
                            "batch", batch_id, "view", in->view, "uid_map", in->uid != (uid_t)-1,
                            "nproc", (json_int_t)(nproc ? warm_nproc(nproc + 1) : 0));
    if (req && c->proxy)
        json_object_set_new(json_object_get(req, "fork"), "proxy", json_integer(TD_EGRESS_PORT));
    if (td_inst_send_ctl(in, req, fds, 4) < 0) {
        unlinkat(in->dirfd, name, AT_REMOVEDIR);
        free(*dir);
        *dir = NULL;
        td_inst_stop(in, "would not take a fork request");
        goto fail;
    }
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    TAILQ_INSERT_TAIL(&in->calls, c, link);
    in->refs++;
    in->served++;
    td_inst_arm_fork_timer(in);
    if (in->served >= in->tool->max_forks)
        td_inst_retire(in);
    return c;
fail:
    if (c)
        free(c->dir);
    free(c);
    if (w && !w->cur && !w->backoff_running)
        td_warm_start(w);
    return NULL;
}

void td_template_call_denials(struct td_warm_call *c, struct td_denials *d)
{
    c->denied = d;
}

void td_template_call_end(struct td_warm_call *c)
{
    struct inst *in = c->inst;
    c->data = NULL;
    if (c->pidfd >= 0)
        close(c->pidfd);
    TAILQ_REMOVE(&in->calls, c, link);
    /* (off the loop when it is not empty: td_calldir_remove_async's way) */
    char *path = NULL;
    if (asprintf(&path, "%s/%s", in->dir, c->dir) >= 0)
        td_calldir_remove_in_async(in->dirfd, path);
    else if (unlinkat(in->dirfd, c->dir, AT_REMOVEDIR) < 0 && errno != ENOENT)
        td_log(TD_LOG_WARN, "cannot remove %s/%s: out of memory", in->dir, c->dir);
    free(c->dir);
    free(c);
    td_inst_arm_fork_timer(in);
    td_inst_unref(in);
}

/* ---- stats ----------------------------------------------------------------- */

static long long pss_kb(pid_t pid)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
    FILE *f = fopen(path, "re");
    long long kb = -1, v;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "Pss: %lld kB", &v) == 1)
            kb = v;
    if (f)
        fclose(f);
    return kb;
}

const char *td_template_state(const char *tool)
{
    /* a loaded tool's key: a warm server's tool has its server's template
     * (and the server's own listing tool, cold, none) */
    const struct td_tool *t = td_tools ? td_registry_find(td_tools, tool) : NULL;
    if (t && !t->warm)
        return NULL;
    struct warm *w = find_warm(t ? td_warm_key(t) : tool);
    return !w ? NULL : !w->cur ? "down" : w->cur->state == I_STARTING ? "starting" : "ready";
}

json_t *td_template_stats(void)
{
    json_t *o = json_object();
    struct warm *w;
    SLIST_FOREACH(w, &all, link) {
        struct inst *in = w->cur;
        bool up = in && in->state == I_READY;
        long long pss = up && in->tpid > 0 ? pss_kb(in->tpid) : -1;
        json_object_set_new(
            o, w->name,
            json_pack("{s:s,s:o,s:o,s:I,s:I,s:o}", "state",
                      !in                       ? "down"
                      : in->state == I_STARTING ? "starting"
                                                : "ready",
                      "pid", up ? json_integer(in->tpid) : json_null(), "age_ms",
                      in ? json_integer((json_int_t)((uv_hrtime() - in->started_ns) / 1000000))
                         : json_null(),
                      "children", (json_int_t)(in ? in->served : 0), "restarts",
                      (json_int_t)w->restarts, "pss_kb",
                      pss >= 0 ? json_integer(pss) : json_null()));
    }
    return o;
}
