/*
 * toolpaths.c - every path a tool needs, seen through its view.
 *
 * The default view hides /root, /home, /run, /var/lib, /var/tmp and gives
 * each call a /tmp of its own: a tool kept in a home directory, or run
 * from a build tree under /tmp, exists for the daemon and not for its
 * calls, which then fail with "No such file or directory" (exit 127, or
 * the interpreter's own status). Here each path is named with the key
 * that shows it. The command itself is shown by the view where nothing on
 * its way is a symbolic link (fsview.c): it is a problem only then. What
 * is left alone: a C tool's shared libraries (its RUNPATH).
 */
#include <dlfcn.h>
#include <sched.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsview.h"
#include "mcppy.h"
#include "toolpaths.h"

static const char *const interpreters[] = {"sh",      "bash", "dash", "python3", "python",
                                           "python2", "perl", "ruby", "node",    NULL};

bool td_toolpaths_interpreter(const char *cmd)
{
    const char *base = strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd;
    for (const char *const *i = interpreters; *i; i++)
        if (strcmp(base, *i) == 0)
            return true;
    return false;
}

struct out {
    void (*fn)(const char *line, void *arg);
    void *arg;
    unsigned n;
};

/* what (under key) is path; is it in the view? */
static void need(struct out *o, const struct td_tool *t, const char *key, const char *what,
                 const char *path, bool shown_if_canonical)
{
    char real[PATH_MAX], dir[PATH_MAX], line[3 * PATH_MAX + 256];
    if (!path || path[0] != '/' || !realpath(path, real))
        return; /* missing: defcheck's own problem; bare: not in PATH */
    const char *by = td_fsview_hides(t->fs, real);
    if (!by || (shown_if_canonical && strcmp(real, path) == 0))
        return;
    snprintf(dir, sizeof(dir), "%s", real);
    struct stat st;
    char *slash = strrchr(dir, '/');
    if (stat(real, &st) == 0 && !S_ISDIR(st.st_mode) && slash && slash != dir)
        *slash = '\0';
    const char *how = strcmp(by, "/tmp") == 0 || strcmp(by, "/dev") == 0 ? " is each call's own"
                      : strcmp(by, "the minimal root") == 0
                          ? " has only /usr, /bin, /sbin, /lib*, /etc"
                          : " is hidden";
    snprintf(line, sizeof(line),
             "%s: %s%s%s: not in the view of the tool's calls (%s%s), where it would not be "
             "found; show it with \"filesystem\": {\"read\": [\"%s\"]}",
             key, what, what[0] ? " " : "", real, by, how, dir);
    o->fn(line, o->arg);
    o->n++;
}

unsigned td_toolpaths_check(const struct td_tool *t, void (*fn)(const char *line, void *arg),
                            void *arg)
{
    struct out o = {.fn = fn, .arg = arg};
    if (!t || !t->argv || !t->fs || td_fsview_is_host(t->fs))
        return 0;
    const char *cmd = t->argv[0];
    need(&o, t, "command", "", cmd, true);
    /* an MCP server's (mcpdef.c): the bridge is the command, shown as
     * one; the server's own command is a path like any other */
    bool mcp = t->mcp_cmd > 0;
    if (mcp) {
        cmd = t->argv[t->mcp_cmd];
        need(&o, t, "mcp_server.command", "", cmd, false);
    }
    /* ["python3", "/home/u/t.py"]: the interpreter is seen, its script not */
    const char *script = mcp ? t->argv[t->mcp_cmd + 1] : t->argv[1];
    if (script && script[0] == '/' && td_toolpaths_interpreter(cmd))
        need(&o, t, mcp ? "mcp_server.command[1]" : "command[1]", "the script", script, false);
    /* a warm Python MCP server's tool (mcppy.c): each call execs the
     * bridge */
    if (t->mcp_tool && t->warm && t->argv[TD_MCPPY_BRIDGE_ARG])
        need(&o, t, "mcp_server.start", "the MCP bridge", t->argv[TD_MCPPY_BRIDGE_ARG], false);
    /* the SDK's: a warm template loads the daemon's libtoolexec (template.c
     * names it), a Python tool imports toolexec from its PYTHONPATH */
    Dl_info dl;
    if (t->warm && dladdr((void *)te_frame_header, &dl) && dl.dli_fname)
        need(&o, t, "start", "the SDK's library", dl.dli_fname, false);
    for (char **e = t->env; e && *e; e++) {
        if (strncmp(*e, "PYTHONPATH=", 11))
            continue;
        char *copy = strdup(*e + 11), *save = NULL;
        for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save))
            need(&o, t, "env.PYTHONPATH", "", d, false);
        free(copy);
    }
    return o.n;
}

struct join {
    char *s;
};

static void add_line(const char *line, void *arg)
{
    struct join *j = arg;
    char *more = NULL;
    if (asprintf(&more, "%s%s%s", j->s ? j->s : "", j->s ? "; " : "", line) < 0)
        return;
    free(j->s);
    j->s = more;
}

char *td_toolpaths_note(const struct td_tool *t)
{
    struct join j = {0};
    td_toolpaths_check(t, add_line, &j);
    return j.s;
}
