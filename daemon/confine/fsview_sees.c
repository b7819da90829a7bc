/*
 * fsview_sees.c - does a tool's view show a path?
 *
 * The loader and --check ask it of every path a tool needs (its command,
 * an interpreter's script, the SDK's library): a path the view hides
 * fails every call with "No such file or directory", which names neither
 * the view nor the key that fixes it. The answer follows fsview.c's plan
 * without making one: the deepest hidden, private (/tmp, /dev) or exposed
 * ("read", "write") path above it decides, an exposure winning a tie; in a
 * minimal root, what is under none of them is not there.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fsview.h"

/* a is path or an ancestor of it */
static bool above(const char *a, const char *path)
{
    size_t n = strlen(a);
    return n && strncmp(a, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

struct best {
    const char *by; /* the deepest so far */
    size_t len;
    bool shown;
};

static void consider(struct best *b, const char *a, bool shown, const char *path)
{
    if (!a || !above(a, path))
        return;
    size_t n = strlen(a);
    if (n > b->len || (n == b->len && shown)) {
        b->by = a;
        b->len = n;
        b->shown = shown;
    }
}

static bool minimal_root_has(const char *path)
{
    static const char *const sys[] = {"/usr", "/bin", "/sbin", "/etc"};
    for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
        if (above(sys[i], path))
            return true;
    return strncmp(path, "/lib", 4) == 0;
}

const char *td_fsview_hides(const struct td_fsview *v, const char *path)
{
    static char by[PATH_MAX];
    if (td_fsview_is_host(v) || path[0] != '/')
        return NULL;
    bool minimal = v->dflt ? td_fs_default == TD_FS_MINIMAL : v->minimal;
    char tools[PATH_MAX];
    struct best b = {0};
    for (size_t i = 0; td_fs_hidden[i]; i++)
        consider(&b, td_fs_hidden[i], false, path);
    /* as the view's plan hid it, once one is made: a call's refusals are
     * asked of it for each path (fswatch), a walk of the directory's
     * every component each */
    bool planned;
    const char *hidden = td_fsview_planned_tools(v, &planned);
    if (planned)
        consider(&b, hidden, false, path);
    else if (td_cfg.tools_dir && realpath(td_cfg.tools_dir, tools))
        consider(&b, tools, false, path);
    consider(&b, td_cfg.work_dir, false, path);
    consider(&b, td_cfg.socket_path, false, path);
    consider(&b, td_cfg.events_socket_path, false, path);
    for (char **h = v->hide; h && *h; h++)
        consider(&b, *h, false, path);
    consider(&b, "/tmp", false, path);
    consider(&b, "/dev", false, path);
    for (char **x = v->read; x && *x; x++)
        consider(&b, *x, true, path);
    for (char **x = v->write; x && *x; x++)
        consider(&b, *x, true, path);
    if (b.by && b.shown)
        return NULL;
    if (b.by) {
        snprintf(by, sizeof(by), "%s", b.by);
        return by;
    }
    return minimal && !minimal_root_has(path) ? "the minimal root" : NULL;
}
