/*
 * fsview_narrow.c - a call's view narrowed by a run request's "policy"
 * (toolexecd-protocol(7), policy): fewer writable paths, fewer read paths (a minimal root),
 * more hidden ones; never more. The narrowed view is a definition's
 * "filesystem" as the plan sees it, so it is planned and enforced (mounts,
 * Landlock) exactly as one.
 *
 * All string work, on the loop: a client's path is normalised lexically
 * ("//", "/./", "/../") and checked against what the tool's view shows,
 * never looked up. A lookup as the daemon would stall the loop on a hung
 * mount and tell any client what exists where it may not look and where a
 * link points; an error echoes only what the client sent. A path that is a
 * symbolic link, or passes through one, fails at the spawn, which opens
 * each path of the view without following links (sandbox_mounts.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "fsview.h"
#include "fsview_narrow.h"
#include "toolexec.h"
#include "util.h"

const char *td_path_lexical(const char *in, char *out, size_t outlen)
{
    if (in[0] != '/')
        return "not an absolute path";
    size_t n = 0;
    for (const char *c = in; *c;) {
        while (*c == '/')
            c++;
        const char *end = strchrnul(c, '/');
        size_t len = (size_t)(end - c);
        if (len == 2 && c[0] == '.' && c[1] == '.') {
            while (n > 0 && out[--n] != '/') /* the last component off; none above the root */
                ;
        } else if (len && !(len == 1 && c[0] == '.')) {
            if (n + 1 + len >= outlen || n + 1 + len >= PATH_MAX)
                return "too long";
            out[n++] = '/';
            memcpy(out + n, c, len);
            n += len;
        }
        c = end;
    }
    if (outlen < 2)
        return "too long";
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
    return NULL;
}

/* path is one of list's, or beneath one */
static bool under_one(char *const *list, const char *path)
{
    for (char *const *p = list; p && *p; p++) {
        size_t n = strlen(*p);
        if (strncmp(path, *p, n) == 0 && (path[n] == '\0' || path[n] == '/'))
            return true;
    }
    return false;
}

/* What v makes of path: the deepest entry at or above it decides, as in
 * fsview.c's plan, a tie going to the stricter (hidden, then read-only).
 * A narrowing may only name a path its tool shows as it asks: a "write"
 * where the tool writes, a "read" where it reads or writes; never a path
 * the tool hides (its "hide", the daemon's own, the defaults) or keeps
 * read-only below a writable one, which naming it would otherwise expose
 * (an exposure wins over a cover of the same path in the plan). */
enum shown { NOT_SHOWN, HIDDEN, READ_ONLY, WRITABLE };

struct deepest {
    size_t len;
    enum shown how;
};

static void consider(struct deepest *d, const char *a, enum shown how, const char *path)
{
    size_t n = a ? strlen(a) : 0;
    if (!n || strncmp(a, path, n) != 0 || (path[n] != '\0' && path[n] != '/' && n > 1))
        return;
    if (n > d->len || (n == d->len && how < d->how)) {
        d->len = n;
        d->how = how;
    }
}

static enum shown shown_as(const struct td_fsview *v, const char *tools, const char *path)
{
    struct deepest d = {0, NOT_SHOWN};
    for (size_t i = 0; td_fs_hidden[i]; i++)
        consider(&d, td_fs_hidden[i], HIDDEN, path);
    consider(&d, tools, HIDDEN, path);
    const char *const daemon_own[] = {td_cfg.work_dir,
                                      td_cfg.socket_path,
                                      td_cfg.events_socket_path,
                                      td_fsview_secret_dir,
                                      "/tmp",
                                      "/dev"};
    for (size_t i = 0; i < sizeof(daemon_own) / sizeof(daemon_own[0]); i++)
        consider(&d, daemon_own[i], HIDDEN, path);
    for (char **h = v->hide; h && *h; h++)
        consider(&d, *h, HIDDEN, path);
    for (char **x = v->read; x && *x; x++)
        consider(&d, *x, READ_ONLY, path);
    for (char **x = v->write; x && *x; x++)
        consider(&d, *x, WRITABLE, path);
    return d.how;
}

static bool listed(char *const *list, const char *path)
{
    for (char *const *p = list; p && *p; p++)
        if (strcmp(*p, path) == 0)
            return true;
    return false;
}

static void add_all(json_t *a, char *const *list)
{
    for (char *const *p = list; p && *p; p++)
        json_array_append_new(a, json_string(*p));
}

static void free_strv(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

/* What a narrowing's list (name: "read", "write" or "hide") asks of the
 * tool's view v, and how a path must be shown there to be named in it. */
static bool allowed(const char *name, enum shown how)
{
    if (strcmp(name, "write") == 0)
        return how == WRITABLE;
    if (strcmp(name, "read") == 0)
        return how >= READ_ONLY;
    return how != HIDDEN; /* hide: what the tool sees (or the minimal root's own) */
}

/* The policy's list name, each path normalised and checked against v:
 * *out NULL-terminated (NULL without the key). 0, or < 0 with err naming
 * the entry and echoing it as the client sent it. */
static int client_paths(const struct td_fsview *v, const char *tool, const char *tools, json_t *pol,
                        const char *name, const char *key, char ***out, char *err, size_t errlen)
{
    json_t *a = json_object_get(pol, name), *x;
    size_t i;
    *out = NULL;
    if (!a)
        return 0;
    if (!json_is_array(a))
        return td_fail(err, errlen, "%s.filesystem.%s: expected an array of paths", key, name);
    char **l = calloc(json_array_size(a) + 1, sizeof(char *));
    if (!l)
        return td_fail(err, errlen, "%s: out of memory", key);
    json_array_foreach(a, i, x)
    {
        char norm[PATH_MAX];
        const char *p = te_json_text_value(x), *bad = NULL;
        int rc = 0;
        if (!p || strlen(p) != json_string_length(x))
            rc = td_fail(err, errlen, "%s.filesystem.%s[%zu]: expected a path", key, name, i);
        else if ((bad = td_path_lexical(p, norm, sizeof(norm))) ||
                 (strcmp(norm, "/") == 0 && (bad = "the whole root")))
            rc = td_fail(err, errlen, "%s.filesystem.%s[%zu]: \"%s\": %s", key, name, i, p, bad);
        else if (!allowed(name, shown_as(v, tools, norm)))
            rc = td_fail(err, errlen, "%s.filesystem.%s[%zu]: \"%s\" is not %s by tool %s", key,
                         name, i, p,
                         strcmp(name, "write") == 0  ? "writable"
                         : strcmp(name, "read") == 0 ? "readable"
                                                     : "seen",
                         tool);
        else if (!(l[i] = strdup(norm)))
            rc = td_fail(err, errlen, "%s: out of memory", key);
        if (rc < 0) {
            free_strv(l);
            return rc;
        }
    }
    *out = l;
    return 0;
}

int td_fsview_narrow(const struct td_fsview *v, const char *tool, const char *tools, json_t *pol,
                     const char *key, struct td_fsview **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!json_is_object(pol))
        return td_fail(err, errlen, "%s.filesystem: expected an object (read, write, hide)", key);
    const char *k;
    json_t *x;
    json_object_foreach(pol, k, x)
    {
        if (strcmp(k, "read") && strcmp(k, "write") && strcmp(k, "hide"))
            return td_fail(err, errlen,
                           "%s.filesystem.%s: not a key a policy narrows (read, write, hide)", key,
                           k);
    }
    if (td_fsview_is_host(v))
        return td_fail(err, errlen,
                       "%s.filesystem: tool %s sees the host's file system (no view of its own): "
                       "there is no view to narrow",
                       key, tool);
    bool minimal = v->dflt ? td_fs_default == TD_FS_MINIMAL : v->minimal;
    char **pw = NULL, **pr = NULL, **ph = NULL;
    int rc = client_paths(v, tool, tools, pol, "write", key, &pw, err, errlen);
    if (rc == 0 && json_object_get(pol, "read") && !minimal)
        rc = td_fail(err, errlen,
                     "%s.filesystem.read: tool %s's view shows the host's file system read-only "
                     "(not a minimal root): narrow it with \"hide\"",
                     key, tool);
    if (rc == 0)
        rc = client_paths(v, tool, tools, pol, "read", key, &pr, err, errlen);
    if (rc == 0)
        rc = client_paths(v, tool, tools, pol, "hide", key, &ph, err, errlen);
    if (rc < 0)
        goto out;
    json_t *def = json_object(), *read = json_array(), *write = json_array(), *hide = json_array();
    if (minimal)
        json_object_set_new(def, "root", json_string("minimal"));
    char **w = pw ? pw : v->write;
    add_all(write, w);
    if (pr) {
        add_all(read, pr);
        /* what the tool keeps read-only below a path still writable stays so */
        for (char **q = v->read; q && *q; q++)
            if (under_one(w, *q) && !listed(pr, *q))
                json_array_append_new(read, json_string(*q));
    } else {
        add_all(read, v->read);
        /* a path no longer writable is still seen, read-only */
        for (char **q = v->write; q && *q; q++)
            if (!listed(w, *q))
                json_array_append_new(read, json_string(*q));
    }
    add_all(hide, v->hide);
    add_all(hide, ph);
    json_object_set_new(def, "read", read);
    json_object_set_new(def, "write", write);
    json_object_set_new(def, "hide", hide);
    /* every path is the tool's own or one checked above: no lookup */
    rc = td_fsview_parse_lexical(key, def, out, err, errlen);
    if (rc == 0)
        (*out)->proxy_ca = v->proxy_ca; /* its calls keep their credentials */
    json_decref(def);
out:
    free_strv(pw);
    free_strv(pr);
    free_strv(ph);
    return rc;
}
