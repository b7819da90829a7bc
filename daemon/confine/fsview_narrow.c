/*
 * fsview_narrow.c - a call's view narrowed by a run request's "policy"
 * (issue 23): fewer writable paths, fewer read paths (a minimal root),
 * more hidden ones; never more. The narrowed view is parsed as a definition's
 * "filesystem" would be, so it is planned and enforced (mounts, Landlock)
 * exactly as one.
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

static enum shown shown_as(const struct td_fsview *v, const char *path)
{
    struct deepest d = {0, NOT_SHOWN};
    char tools[PATH_MAX];
    for (size_t i = 0; td_fs_hidden[i]; i++)
        consider(&d, td_fs_hidden[i], HIDDEN, path);
    if (td_cfg.tools_dir && realpath(td_cfg.tools_dir, tools))
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

int td_fsview_narrow(const struct td_fsview *v, const char *tool, json_t *pol, const char *key,
                     struct td_fsview **out, char *err, size_t errlen)
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
    struct td_fsview *p;
    int rc = td_fsview_parse(key, pol, &p, err, errlen);
    if (rc < 0)
        return rc;
    bool minimal = v->dflt ? td_fs_default == TD_FS_MINIMAL : v->minimal;
    for (size_t i = 0; p->write && p->write[i]; i++)
        if (shown_as(v, p->write[i]) != WRITABLE) {
            rc = td_fail(err, errlen, "%s.filesystem.write[%zu]: \"%s\" is not writable by tool %s",
                         key, i, p->write[i], tool);
            goto out;
        }
    if (p->read && !minimal) {
        rc = td_fail(err, errlen,
                     "%s.filesystem.read: tool %s's view shows the host's file system read-only "
                     "(not a minimal root): narrow it with \"hide\"",
                     key, tool);
        goto out;
    }
    for (size_t i = 0; p->read && p->read[i]; i++)
        if (shown_as(v, p->read[i]) < READ_ONLY) {
            rc = td_fail(err, errlen, "%s.filesystem.read[%zu]: \"%s\" is not readable by tool %s",
                         key, i, p->read[i], tool);
            goto out;
        }
    json_t *def = json_object(), *read = json_array(), *write = json_array(), *hide = json_array();
    if (minimal)
        json_object_set_new(def, "root", json_string("minimal"));
    char **w = json_object_get(pol, "write") ? p->write : v->write;
    add_all(write, w);
    if (json_object_get(pol, "read")) {
        add_all(read, p->read);
        /* what the tool keeps read-only below a path still writable stays so */
        for (char **q = v->read; q && *q; q++)
            if (under_one(w, *q) && !listed(p->read, *q))
                json_array_append_new(read, json_string(*q));
    } else {
        add_all(read, v->read);
        /* a path no longer writable is still seen, read-only */
        for (char **q = v->write; q && *q; q++)
            if (!listed(w, *q))
                json_array_append_new(read, json_string(*q));
    }
    add_all(hide, v->hide);
    add_all(hide, p->hide);
    json_object_set_new(def, "read", read);
    json_object_set_new(def, "write", write);
    json_object_set_new(def, "hide", hide);
    rc = td_fsview_parse(key, def, out, err, errlen);
    if (rc == 0)
        (*out)->proxy_ca = v->proxy_ca; /* its calls keep their credentials */
    json_decref(def);
out:
    td_fsview_free(p);
    return rc;
}
