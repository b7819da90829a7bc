/*
 * fuzz_narrow - a run request's "policy" (daemon/defs/narrow.c, with the
 * view's part in daemon/confine/fsview_narrow.c): the input is read as the
 * request line is (json_loadb, JSON_REJECT_DUPLICATES) and, whatever it
 * is, handed to td_narrow_tool() as the policy of each of four tools: a
 * view with write, read and hide paths and an allow-list; a minimal root;
 * the host's file system with the host's network; the daemon's defaults.
 *
 * Invariants on success: nothing but the timeout narrowed gives the tool
 * itself; a tool of its own is derived from it, and is never wider: every
 * limit at or below the tool's, the timeout at or below the ceiling, no
 * network where it had none and no allow-list where it had none; its view,
 * where narrowed, writes only at or below the tool's writable paths and
 * nowhere the tool hides, reads (a minimal root) only what the tool shows,
 * and names only absolute, normalised paths. On failure: < 0, nothing out,
 * a non-empty message naming the policy key, valid UTF-8 (the daemon sends
 * it as a JSON string). Nothing is looked up (the tools' views are built
 * from strings: they need not exist).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "egress.h"
#include "fsview.h"
#include "fsview_narrow.h"
#include "log.h"
#include "narrow.h"
#include "registry.h"
#include "tool.h"

#include "fuzz_common.h"

#define ERRLEN 256 /* daemon/run/batch_run.c: char err[256] */

/* The daemon's log: not wanted here (log.c writes to the journal). */
void td_log(int level, const char *fmt, ...)
{
    (void)level, (void)fmt;
}

/* registry.c's, for a tool as loaded and one narrow.c derives */
struct td_tool *td_tool_ref(struct td_tool *t)
{
    if (t)
        t->refs++;
    return t;
}

void td_tool_unref(struct td_tool *t)
{
    if (!t || --t->refs > 0)
        return;
    CHECK(t->parent, "a loaded tool's last reference dropped");
    if (t->own_fs)
        td_fsview_free(t->fs);
    if (t->own_egress)
        td_egress_free(t->egress);
    td_tool_unref(t->parent);
    free(t);
}

static struct td_tool tools[4];
static const char *const names[] = {"view", "minimal", "host", "plain"};

static struct td_fsview *view_of(const char *text)
{
    if (!text)
        return NULL;
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    struct td_fsview *f = NULL;
    char err[ERRLEN];
    CHECK(v && td_fsview_parse_lexical("t", v, &f, err, sizeof(err)) == 0, "view %s", text);
    json_decref(v);
    return f;
}

static void setup(void)
{
    td_cfg.work_dir = "/var/lib/toolexecd/work";
    td_cfg.socket_path = "/run/toolexecd/toolexecd.sock";
    const char *views[] = {
        "{\"write\": [\"/srv/data\", \"/w\"], \"read\": [\"/w/ro\", \"/opt\"], "
        "\"hide\": [\"/w/secret\", \"/srv/data/keys\"]}",
        "{\"root\": \"minimal\", \"write\": [\"/w\"], \"read\": [\"/opt/a\", \"/w/ro\"]}",
        "\"host\"", NULL};
    for (int i = 0; i < 4; i++) {
        struct td_tool *t = &tools[i];
        t->refs = 1;
        t->name = (char *)names[i];
        t->file = "/etc/toolexecd/tools.d/t.json";
        t->fs = i == 3 ? NULL : view_of(views[i]);
        if (!t->fs) {
            t->fs = calloc(1, sizeof(*t->fs));
            CHECK(t->fs, "out of memory");
            t->fs->dflt = true;
        }
        t->network = i == 2 ? 1 : i == 3 ? -1 : 0;
        t->timeout_ms = i == 3 ? 0 : 30000;
        if (i < 2) {
            t->limits.memory_mb = 512;
            t->limits.processes = 32;
            json_t *a = json_pack("{s:[s,s,s]}", "allow", "a.example.org:443", "*.b.example.org",
                                  "10.0.0.1:8080");
            char err[ERRLEN];
            CHECK(td_egress_parse(a, &t->egress, err, sizeof(err)) == 0, "egress: %s", err);
            json_decref(a);
        }
    }
}

static bool normalised(const char *p)
{
    size_t n = strlen(p);
    return p[0] == '/' && n > 1 && p[n - 1] != '/' && !strstr(p, "//") && !strstr(p, "/./") &&
           !strstr(p, "/../") && !(n >= 2 && strcmp(p + n - 2, "/.") == 0) &&
           !(n >= 3 && strcmp(p + n - 3, "/..") == 0);
}

/* a is b, or b is below a */
static bool at_or_below(const char *b, const char *a)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

static bool below_any(const char *p, char *const *list)
{
    for (char *const *q = list; q && *q; q++)
        if (at_or_below(p, *q))
            return true;
    return false;
}

static void check_view(const struct td_tool *t, const struct td_fsview *v)
{
    for (int k = 0; k < 3; k++)
        for (char **p = k == 0 ? v->read : k == 1 ? v->write : v->hide; p && *p; p++) {
            CHECK(normalised(*p), "path \"%s\" not normalised", *p);
            CHECK(te_fuzz_valid_utf8(*p), "path not UTF-8");
        }
    const struct td_fsview *o = t->fs;
    for (char **p = v->write; p && *p; p++) {
        CHECK(below_any(*p, o->write), "tool %s: \"%s\" written, not below a writable path",
              t->name, *p);
        /* nowhere the tool hides, nor keeps read-only below a writable path
         * (the tool's own write paths stay: an exposure of its own) */
        bool own = false;
        for (char **q = o->write; q && *q; q++)
            own |= strcmp(*q, *p) == 0;
        CHECK(own || !below_any(*p, o->hide), "tool %s: \"%s\" hidden, made writable", t->name, *p);
        for (char **q = o->read; !own && q && *q; q++)
            CHECK(!(at_or_below(*p, *q) && below_any(*q, o->write)),
                  "tool %s: \"%s\" read-only, made writable", t->name, *p);
        CHECK(!at_or_below(*p, td_cfg.work_dir), "the work directory made writable");
        CHECK(!at_or_below(*p, "/root") && !at_or_below(*p, "/etc/toolexecd/tools.d"),
              "\"%s\": a hidden path made writable", *p);
    }
    CHECK(v->minimal == o->minimal, "minimal changed");
    if (v->minimal)
        for (char **p = v->read; p && *p; p++)
            CHECK(below_any(*p, o->read) || below_any(*p, o->write),
                  "tool %s: \"%s\" read, not shown", t->name, *p);
    for (char **p = o->hide; p && *p; p++) {
        bool kept = false;
        for (char **q = v->hide; q && *q; q++)
            kept |= strcmp(*q, *p) == 0;
        CHECK(kept, "tool %s: hide \"%s\" dropped", t->name, *p);
    }
}

static void check_ok(const struct td_tool *t, json_t *pol, const struct td_tool *out, uint64_t ms,
                     uint64_t ms_in, uint64_t ceiling)
{
    CHECK(out, "success without a tool");
    json_t *to = json_object_get(pol, "timeout_ms");
    if (json_is_null(pol)) /* no policy: the timeout as it came */
        CHECK(ms == ms_in, "timeout %llu, was %llu", (unsigned long long)ms,
              (unsigned long long)ms_in);
    else if (to)
        CHECK(json_is_integer(to) && (uint64_t)json_integer_value(to) == ms && ms > 0,
              "timeout %llu", (unsigned long long)ms);
    else
        CHECK(ms == ceiling, "timeout %llu, ceiling %llu", (unsigned long long)ms,
              (unsigned long long)ceiling);
    if (ceiling && !json_is_null(pol))
        CHECK(ms <= ceiling, "timeout %llu above %llu", (unsigned long long)ms,
              (unsigned long long)ceiling);
    if (out == t) {
        CHECK(!pol || json_is_null(pol) ||
                  (json_is_object(pol) && json_object_size(pol) == (to ? 1 : 0)),
              "a narrowed policy gave the tool itself");
        return;
    }
    CHECK(out->parent == t && !out->warm, "a tool of its own not derived from its tool");
    const uint64_t *a = &out->limits.cpu_ms, *b = &t->limits.cpu_ms;
    for (size_t i = 0; i < sizeof(out->limits) / sizeof(uint64_t); i++)
        if (b[i])
            CHECK(a[i] && a[i] <= b[i], "limit %zu: %llu above %llu", i, (unsigned long long)a[i],
                  (unsigned long long)b[i]);
    int was = t->egress ? 2 : t->network;
    if (was == 0)
        CHECK(!out->egress && out->network == 0, "tool %s: network given", t->name);
    if (was == 2)
        CHECK(out->network == 0, "tool %s: allow-list widened to the network", t->name);
    if (!out->own_egress) /* the tool's, or none ("network": false) */
        CHECK(out->egress == t->egress || !out->egress, "egress changed without its own");
    if (out->own_fs)
        check_view(t, out->fs);
    else
        CHECK(out->fs == t->fs, "view changed without its own");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        setup();
        ready = true;
    }
    json_t *pol =
        json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
    if (!pol)
        return 0;
    for (int i = 0; i < 4; i++) {
        struct td_tool *t = &tools[i];
        char err[ERRLEN] = "";
        struct td_tool *out = (struct td_tool *)1;
        uint64_t ceiling = i == 1 ? 0 : 60000, ms = ceiling;
        if (t->timeout_ms && (!ceiling || t->timeout_ms < ceiling))
            ceiling = t->timeout_ms;
        int rc = td_narrow_tool(t, pol, "calls[0].policy", &out, &ms, err, sizeof(err));
        if (rc == 0) {
            check_ok(t, pol, out, ms, i == 1 ? 0 : 60000, ceiling);
            td_tool_unref(out);
        } else {
            CHECK(rc < 0 && !out, "failure %d with a tool", rc);
            CHECK(err[0] && memchr(err, '\0', sizeof(err)), "empty or unterminated message");
            CHECK(strstr(err, "policy"), "message names no key: %s", err);
            CHECK(te_fuzz_utf8_ok(err), "message not UTF-8: %s", err);
        }
        CHECK(t->refs == 1, "tool %s: %d references left", t->name, t->refs);
    }
    json_decref(pol);
    return 0;
}
