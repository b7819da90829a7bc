/*
 * spares.c - sandboxes prepared ahead (spares.h).
 *
 * Policy: after each cold call of a tool started through the spawner, once
 * the spawner holds no call (on_pending), the tool's spares are made up to
 * td_spares_per_tool (--spares) while the whole stays within a quarter of
 * --max-workers; a tool not called
 * for SPARE_IDLE_MS has its spares dropped; a reload drops them all (its
 * definitions may have changed: a spare is made for one definition). A spare
 * holds what a call holds: a uid of the pool, a directory, a cgroup where
 * calls get one, and two processes (the init to be, in its namespaces); the
 * uid pool (2 x --max-workers) has room for them.
 *
 * A call takes a ready spare of its own tool (the same definition, by
 * pointer), with its uid, directory and cgroup; the spawner then hands the
 * spare the call's pipes and environment. A spare that dies unused gives
 * all of it back. A call whose start fails before the spawner is asked
 * (no descriptor, no memory) hands its spare back: it is dropped, and
 * keeps its uid, directory and cgroup until the spawner says it is gone,
 * since its process lives until then.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "calldir.h"
#include "cgroup.h"
#include "identity.h"
#include "log.h"
#include "registry.h"
#include "spares.h"
#include "spawndesc.h"
#include "spawner.h"
#include "sysfilter.h"

/* Dropped when their tool has not been called for this long. */
#define SPARE_IDLE_MS 60000

/* None by default: a spare is two processes of a pool uid, a directory
 * and a cgroup held between calls (a minute at most), which a host that
 * counts what its calls leave (test_mcp_server_flood: no process of a lent
 * uid once a flood is over) would count; --spares 2 where serial latency
 * matters more. A spare waits in its init, exec'd (sandbox.h), and is
 * made only once the spawner holds no call (on_pending), so it takes the
 * time a caller spends between its calls and none of a call's. Measured on
 * 2 CPUs under other load (bench/compare --spares 0,1,2 --only daemon,bare
 * --modes serial --calls 20 --rounds 10, the C echo tool; p50 per call):
 * 2 ms between calls, 8.48 ms without, 6.07 with one, 4.84 with two (the
 * spawner's start: 3,347, 2,046, 1,477 us); calls back to back, 5.18, 4.84
 * and 4.74 ms (a refill is not ready in time: two keep one made earlier);
 * at concurrency 16 (--modes conc16 --calls 64 --rounds 6), where calls
 * keep coming and none is made, 261, 256 and 256 calls/s. What a spare
 * takes off a call, measured in the spawner (SCHED_FIFO, 40 calls 10 ms
 * apart, p50): its start, 1,351 us fresh, 66 us from a spare. Before they
 * waited in their init and for an idle spawner, they hid nothing here
 * (bench/spawn.py: serial 1.58 ms with against 1.55 without; at
 * concurrency 2 and 4, 748 and 853 calls/s against 945 and 1,028). */
unsigned td_spares_per_tool = 0;

struct spare {
    LIST_ENTRY(spare) link;
    struct td_tool *tool;
    uint64_t handle;
    uid_t uid, taken;
    gid_t gid;
    char *dir;
    struct td_cgroup *cg;
    struct td_limits limits;
    bool ready, dropping;
    bool lent;        /* taken by a call not yet sent to the spawner */
    uint64_t used_ms; /* its tool's last call */
};

static LIST_HEAD(, spare) all = LIST_HEAD_INITIALIZER(all);
static unsigned held, dropping; /* dropping: asked to go, not gone yet */
static uv_timer_t idle_timer;
static bool timer_init, timer_on;

/* Everything it holds given back; it is gone from the list. */
static void release(struct spare *s, bool remove_dir)
{
    LIST_REMOVE(s, link);
    held--;
    if (s->dropping)
        dropping--;
    if (s->taken != (uid_t)-1)
        td_identity_give(s->taken);
    td_cgroup_release(s->cg);
    if (remove_dir && s->dir)
        td_calldir_remove_async(s->dir);
    else
        free(s->dir);
    td_tool_unref(s->tool);
    free(s);
}

static void on_prepared(void *data, int err, const char *what)
{
    struct spare *s = data;
    if (err) {
        td_log(TD_LOG_DEBUG, "tool %s: no spare: %s: %s", s->tool->name, what, strerror(err));
        release(s, true);
        return;
    }
    s->ready = true;
}

/* A tool whose spares die before they are taken, unasked (a step that
 * fails in a spare fails in its calls too, which say so): after three in a
 * row it gets none until the next reload, rather than one wasted a call. */
static char failing[128];
static unsigned fails;
#define MAX_FAILS 3

static bool failing_tool(const struct td_tool *t)
{
    return fails >= MAX_FAILS && strcmp(failing, t->name) == 0;
}

static void on_gone(void *data)
{
    struct spare *s = data;
    if (!s->dropping) {
        if (strcmp(failing, s->tool->name) != 0) {
            snprintf(failing, sizeof(failing), "%s", s->tool->name);
            fails = 0;
        }
        if (++fails == MAX_FAILS)
            td_log(TD_LOG_WARN,
                   "tool %s: %d spares died before their call: none made for it "
                   "until a reload",
                   s->tool->name, MAX_FAILS);
    } else if (s->ready && strcmp(failing, s->tool->name) == 0) {
        fails = 0;
    }
    release(s, true);
}

static const struct td_spare_ops ops = {on_prepared, on_gone};

static unsigned of_tool(const struct td_tool *t)
{
    unsigned n = 0;
    struct spare *s;
    LIST_FOREACH(s, &all, link)
        n += s->tool == t && !s->dropping && !s->lent;
    return n;
}

static void drop(struct spare *s)
{
    if (s->dropping)
        return;
    s->dropping = true;
    dropping++;
    td_spawner_drop(s->handle); /* on_gone() releases it */
}

static void on_idle_check(uv_timer_t *t)
{
    (void)t;
    uint64_t now = uv_now(td_loop);
    struct spare *s, *next;
    for (s = LIST_FIRST(&all); s; s = next) {
        next = LIST_NEXT(s, link);
        if (now - s->used_ms > SPARE_IDLE_MS && !s->lent)
            drop(s);
    }
    if (LIST_EMPTY(&all)) {
        uv_timer_stop(&idle_timer);
        timer_on = false;
    }
}

/* Whether t's spare may exec its init ahead, to wait there for its call
 * (sandbox.h): only under a filter that lets the init take it. The
 * default one does; a tool's own "deny_syscalls" may name what the init
 * needs, and a learning filter would record the init's calls as the
 * tool's. */
static bool init_waits(const struct td_tool *t)
{
    return !td_sysfilter_conf_custom(t->sysfilter) && !t->learn;
}

/* One spare of t asked for; false when it cannot be (nothing is left to
 * try again with now). */
static bool make_one(struct td_tool *t)
{
    struct spare *s = calloc(1, sizeof(*s));
    if (!s)
        return false;
    s->taken = (uid_t)-1;
    s->uid = t->uid;
    s->gid = t->gid;
    const char *what = "call uid";
    int rc = 0;
    if (t->switch_user && !t->user && td_identity_active()) {
        if ((rc = td_identity_take(&s->taken)) == 0) {
            s->uid = s->taken;
            s->gid = t->group ? t->gid : (gid_t)s->taken;
        }
    }
    if (rc == 0)
        rc = t->switch_user ? td_calldir_make(s->uid, s->gid, &s->dir, &what)
                            : td_calldir_make((uid_t)-1, (gid_t)-1, &s->dir, &what);
    if (rc == 0) {
        what = "cgroup";
        rc = td_spawndesc_cgroup(t, 0, &s->limits, &s->cg);
    }
    struct td_spawndesc d;
    static char *const no_env[] = {NULL};
    if (rc == 0)
        rc = td_spawndesc_build(&d, TD_SPAWN_CALL, t, &s->limits, s->cg, s->dir,
                                t->switch_user ? s->uid : (uid_t)-1, s->gid, no_env, &what);
    s->tool = td_tool_ref(t);
    LIST_INSERT_HEAD(&all, s, link);
    held++;
    if (rc == 0) {
        s->handle = td_spawner_prepare(&d.sp, init_waits(t), &ops, s, &what);
        td_spawndesc_free(&d);
        if (s->handle == TD_NO_SPARE)
            rc = -EAGAIN;
    }
    if (rc < 0) {
        td_log(TD_LOG_DEBUG, "tool %s: no spare: %s: %s", t->name, what, strerror(-rc));
        release(s, s->dir != NULL);
        return false;
    }
    s->used_ms = uv_now(td_loop);
    return true;
}

static void refill_now(struct td_tool *t)
{
    if (!td_spares_per_tool || !td_spawner_active() || td_shutting_down || failing_tool(t))
        return;
    uint64_t now = uv_now(td_loop);
    struct spare *s;
    LIST_FOREACH(s, &all, link)
        if (s->tool == t)
            s->used_ms = now;
    unsigned cap = td_cfg.max_workers / 4 ? td_cfg.max_workers / 4 : 1;
    for (unsigned n = of_tool(t); n < td_spares_per_tool; n++) {
        /* full: the spare of the tool called least lately makes room */
        if (held - dropping >= cap) {
            struct spare *lru = NULL;
            LIST_FOREACH(s, &all, link)
                if (s->tool != t && !s->dropping && !s->lent && (!lru || s->used_ms < lru->used_ms))
                    lru = s;
            if (!lru)
                break;
            drop(lru);
        }
        if (!make_one(t))
            break;
    }
    if (!timer_on && !LIST_EMPTY(&all)) {
        if (!timer_init) {
            uv_timer_init(td_loop, &idle_timer);
            timer_init = true;
        }
        uv_timer_start(&idle_timer, on_idle_check, SPARE_IDLE_MS / 4, SPARE_IDLE_MS / 4);
        uv_unref((uv_handle_t *)&idle_timer);
        timer_on = true;
    }
}

/* Refills wait until the spawner holds no call: made while a call starts,
 * a spare's set-up (its directory, cgroup and description here, its clone
 * in the spawner) came before that call's end and the next call's start,
 * on the loop and the spawner both. Made once the spawner is idle, it uses
 * the time a caller spends between its calls; where calls keep coming, it
 * waits. Checked before the loop blocks (a prepare handle, running only
 * while a refill waits). */
#define MAX_PENDING 16
static struct td_tool *pending[MAX_PENDING];
static unsigned npending;
static uv_prepare_t pending_h;
static bool pending_init, pending_on;

static void on_pending(uv_prepare_t *h)
{
    (void)h;
    if (td_spawner_in_flight() > 0)
        return;
    unsigned n = npending;
    npending = 0;
    uv_prepare_stop(&pending_h);
    pending_on = false;
    for (unsigned i = 0; i < n; i++) {
        refill_now(pending[i]);
        td_tool_unref(pending[i]);
    }
}

void td_spares_refill(struct td_tool *t)
{
    if (!td_spares_per_tool || !td_spawner_active() || td_shutting_down || failing_tool(t))
        return;
    for (unsigned i = 0; i < npending; i++)
        if (pending[i] == t)
            return;
    if (npending == MAX_PENDING) { /* the one waiting longest goes */
        td_tool_unref(pending[0]);
        memmove(pending, pending + 1, (MAX_PENDING - 1) * sizeof(*pending));
        npending--;
    }
    pending[npending++] = td_tool_ref(t);
    if (!pending_init) {
        uv_prepare_init(td_loop, &pending_h);
        uv_unref((uv_handle_t *)&pending_h);
        pending_init = true;
    }
    if (!pending_on) {
        uv_prepare_start(&pending_h, on_pending);
        pending_on = true;
    }
}

bool td_spares_take(struct td_tool *t, struct td_spare_grant *g)
{
    /* the oldest ready one (the list is newest first) */
    struct spare *s = NULL, *x;
    LIST_FOREACH(x, &all, link)
        if (x->tool == t && x->ready && !x->dropping && !x->lent)
            s = x;
    if (!s)
        return false;
    *g = (struct td_spare_grant){.handle = s->handle,
                                 .uid = s->uid,
                                 .taken = s->taken,
                                 .gid = s->gid,
                                 .dir = s->dir,
                                 .cg = s->cg,
                                 .limits = s->limits};
    s->lent = true;
    td_log(TD_LOG_DEBUG, "tool %s: a call takes a spare (%u held)", t->name, held);
    return true;
}

static struct spare *lent_of(const struct td_spare_grant *g)
{
    struct spare *s;
    LIST_FOREACH(s, &all, link)
        if (s->lent && s->handle == g->handle)
            return s;
    return NULL;
}

void td_spares_taken(const struct td_spare_grant *g)
{
    struct spare *s = lent_of(g);
    if (!s)
        return;
    s->taken = (uid_t)-1;
    s->dir = NULL;
    s->cg = NULL;
    release(s, false);
}

void td_spares_untake(const struct td_spare_grant *g)
{
    struct spare *s = lent_of(g);
    if (!s)
        return;
    s->lent = false;
    drop(s);
}

void td_spares_drop_all(void)
{
    fails = 0;
    for (unsigned i = 0; i < npending; i++) /* made for definitions now gone */
        td_tool_unref(pending[i]);
    npending = 0;
    struct spare *s;
    LIST_FOREACH(s, &all, link)
        drop(s);
}

void td_spares_stop(void)
{
    for (unsigned i = 0; i < npending; i++)
        td_tool_unref(pending[i]);
    npending = 0;
    if (pending_init)
        uv_close((uv_handle_t *)&pending_h, NULL);
    pending_init = pending_on = false;
    /* the spawner is stopping: its spares die with it, unreported */
    while (!LIST_EMPTY(&all))
        release(LIST_FIRST(&all), true);
    if (timer_init)
        uv_close((uv_handle_t *)&idle_timer, NULL);
    timer_init = timer_on = false;
}

unsigned td_spares_count(void)
{
    return held;
}

json_t *td_spares_stats(void)
{
    json_t *o = json_object();
    struct spare *s;
    LIST_FOREACH(s, &all, link) {
        if (!s->ready || s->dropping || s->lent)
            continue;
        json_t *n = json_object_get(o, s->tool->name);
        json_object_set_new(o, s->tool->name, json_integer(n ? json_integer_value(n) + 1 : 1));
    }
    return o;
}
