/*
 * defwarn.c - the problems of a definition that loads, for both readers.
 *
 * The loader refuses what it cannot run (registry.c); what it lets
 * through fails later, at a call, or leaks: a command that is missing or
 * not executable, an interpreter's missing script, what the tool's view
 * hides (toolpaths.c), "env" values other than the plainly public ones
 * (LANG, PYTHONPATH...) in a file every user may read, an MCP server's
 * env_credentials that cannot be read now. Both
 * toolexecd --check and the daemon's load (start and reload) take the
 * list from here, so the two never disagree.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "containment.h"
#include "credentials.h"
#include "defwarn.h"
#include "log.h"
#include "toolpaths.h"

struct out {
    void (*fn)(const char *line, void *arg);
    void *arg;
    unsigned n;
};

static void say(struct out *o, const char *line)
{
    o->fn(line, o->arg);
    o->n++;
}

static void check_command(struct out *o, const struct td_tool *t)
{
    char what[PATH_MAX + 128];
    const char *cmd = t->argv[0];
    struct stat st;
    if (cmd[0] != '/') {
        snprintf(what, sizeof(what), "command: %s: not found in the workers' PATH (%s)", cmd,
                 TD_WORKER_PATH);
        say(o, what);
        return;
    }
    if (stat(cmd, &st) < 0) {
        snprintf(what, sizeof(what), "command: %s: %s", cmd, strerror(errno));
        say(o, what);
        return;
    }
    if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
        snprintf(what, sizeof(what), "command: %s: not executable (%s, mode %04o)", cmd,
                 S_ISREG(st.st_mode) ? "a file" : "not a regular file",
                 (unsigned)(st.st_mode & 07777));
        say(o, what);
        return;
    }
    /* ["python3", "tool.py"]: the script is what usually goes missing */
    const char *script = t->argv[1];
    if (!script || script[0] == '-' || !strchr(script, '/') || !td_toolpaths_interpreter(cmd))
        return;
    if (access(script, R_OK) < 0) {
        snprintf(what, sizeof(what), "command[1]: %s: %s", script, strerror(errno));
        say(o, what);
    }
}

static void view_line(const char *line, void *arg)
{
    say(arg, line);
}

/* Names whose values say where things are or how to behave, never a
 * secret: the examples' LANG and PYTHONPATH are no reason to warn. */
static bool secret_env(char *const *env)
{
    static const char *const plain[] = {"LANG=",
                                        "LANGUAGE=",
                                        "LC_",
                                        "TZ=",
                                        "PATH=",
                                        "HOME=",
                                        "TERM=",
                                        "PYTHONPATH=",
                                        "PYTHONHOME=",
                                        "PYTHONDONTWRITEBYTECODE=",
                                        "PYTHONUNBUFFERED=",
                                        "PYTHONIOENCODING=",
                                        "NODE_PATH=",
                                        "PERL5LIB=",
                                        "RUBYLIB=",
                                        NULL};
    for (; env && *env; env++) {
        const char *const *p = plain;
        while (*p && strncmp(*env, *p, strlen(*p)) != 0)
            p++;
        if (!*p)
            return true;
    }
    return false;
}

unsigned td_defwarn(const struct td_tool *t, bool views, void (*fn)(const char *line, void *arg),
                    void *arg)
{
    struct out o = {.fn = fn, .arg = arg};
    char what[128];
    if (t->argv)
        check_command(&o, t);
    if (views)
        td_toolpaths_check(t, view_line, &o);
    /* an MCP server's env_credentials are read at each call: one missing
     * now fails them all until it is there, which is worth saying before */
    const char *var;
    json_t *cred;
    json_object_foreach(t->mcp ? t->env_creds : NULL, var, cred)
    {
        char *value = NULL, why[400], line[600];
        if (td_credential_read(td_credentials_path(), json_string_value(cred), &value, why,
                               sizeof(why)) == 0) {
            explicit_bzero(value, strlen(value));
            free(value);
            continue;
        }
        snprintf(line, sizeof(line),
                 "mcp_server.env_credentials.%s: %s (its calls fail until it is)", var, why);
        say(&o, line);
    }
    if (secret_env(t->env) && (t->file_mode & S_IROTH)) {
        snprintf(what, sizeof(what),
                 "has \"env\" and every user may read it (mode %04o): chmod o-r to keep its "
                 "values secret",
                 (unsigned)(t->file_mode & 07777));
        say(&o, what);
    }
    return o.n;
}

static void warn_line(const char *line, void *arg)
{
    td_log(TD_LOG_WARN, "%s: %s", ((const struct td_tool *)arg)->file, line);
}

void td_defwarn_loaded(struct td_registry *r)
{
    /* no mount namespace per call: no view to miss anything */
    bool views = td_call_ns & CLONE_NEWNS;
    for (size_t i = 0; r && i < r->n; i++) {
        struct td_tool *t = r->tools[i];
        /* said once a load, not at each call (or each template restart) */
        td_defwarn(t, views, warn_line, t);
        if (views)
            t->view_note = td_toolpaths_note(t);
    }
}
