/*
 * registry.c - tool definitions: one JSON file per tool in a directory.
 * Loading is all-or-nothing and strict: an unknown key, a wrong type or a
 * duplicate name is an error naming the file and the field, never ignored.
 *
 * A definition says what runs and as whom ("user": "root"), so only root or
 * the daemon's own uid may be able to change one: a directory or file that
 * someone else owns or may write to is refused (the directory: nothing
 * loads; a file: it alone is left out, with a line naming it and why). So
 * are files that are not regular (a FIFO would block the loop on open or
 * read) and files over TD_TOOL_FILE_MAX. A file others cannot read is never
 * quoted in a message, so a link to a secret leaks nothing into the log.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <grp.h>
#include <pwd.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fsview.h"
#include "egress.h"
#include "learn.h"
#include "learndef.h"
#include "mcpdef.h"
#include "declare.h"
#include "log.h"
#include "defsafe.h"
#include "registry.h"
#include "sysfilter.h"
#include "besteffort.h"
#include "warmdef.h"
#include "toolexec.h"
#include "util.h"

/* The largest definition file read. The largest bundled one is about 1 KiB;
 * a schema with a few thousand enum values still fits. */
#define TD_TOOL_FILE_MAX (1024 * 1024)

struct td_registry *td_tools;

struct td_tool *td_tool_ref(struct td_tool *t)
{
    if (t) /* as td_tool_unref(NULL): a call without a tool holds none */
        t->refs++;
    return t;
}

static void free_strv(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

void td_tool_unref(struct td_tool *t)
{
    if (!t || --t->refs > 0)
        return;
    if (t->parent) { /* narrow.c: only what it narrowed is its own */
        if (t->own_fs)
            td_fsview_free(t->fs);
        if (t->own_egress)
            td_egress_free(t->egress);
        td_tool_unref(t->parent);
        json_decref(t->enforced);
        free(t);
        return;
    }
    json_decref(t->enforced);
    free(t->name);
    free(t->description);
    free(t->file);
    free(t->user);
    free(t->group);
    json_decref(t->schema);
    te_schema_free(t->validator);
    json_decref(t->allow_uids);
    json_decref(t->allow_gids);
    free_strv(t->argv);
    free(t->view_note);
    free_strv(t->env);
    td_sysfilter_conf_free(t->sysfilter);
    td_fsview_free(t->fs);
    td_egress_free(t->egress);
    td_learn_free(t->learned);
    td_mcpdef_free(t->mcp);
    json_decref(t->env_creds);
    json_decref(t->learn_def);
    td_declare_free(t);
    free(t);
}

/* Resolve command[0]: absolute as is; with a '/' relative to the definition's
 * directory; a bare name through the worker's PATH (left bare when absent, so
 * the call reports the exec error). */
static char *resolve_command(const char *dir, const char *cmd)
{
    char *out = NULL;
    if (cmd[0] == '/')
        return strdup(cmd);
    if (strchr(cmd, '/')) {
        /* "../bin/x" as "/etc/toolexecd/bin/x": the way through the
         * definitions directory is hidden from calls (fsview.c), and the
         * view shows a command only by a path without ".." or links on it;
         * its last name is kept (a link to a multi-call program) */
        char real[PATH_MAX];
        if (asprintf(&out, "%s/%s", dir, cmd) < 0)
            return NULL;
        char *slash = strrchr(out, '/');
        *slash = '\0';
        bool found = realpath(out, real) != NULL;
        *slash = '/';
        if (!found || strcmp(slash + 1, ".") == 0 || strcmp(slash + 1, "..") == 0)
            return out;
        char *canon = NULL;
        if (asprintf(&canon, "%s%s", strcmp(real, "/") ? real : "", slash) < 0)
            canon = NULL;
        free(out);
        return canon;
    }
    char path[] = TD_WORKER_PATH;
    char *save = NULL;
    for (char *d = strtok_r(path, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (asprintf(&out, "%s/%s", d, cmd) < 0)
            return NULL;
        if (access(out, X_OK) == 0)
            return out;
        free(out);
    }
    return strdup(cmd);
}

static int parse_tool(const char *dir, const char *file, json_t *def, struct td_tool **out,
                      char *err, size_t errlen)
{
    static const char *const keys[] = {
        "name",           "description", "schema",        "command",       "protocol",
        "context",        "timeout_ms",  "env",           "limits",        "user",
        "group",          "network",     "allow_uids",    "allow_gids",    "max_content_bytes",
        "coerce",         "spill",       "syscalls",      "deny_syscalls", "filesystem",
        "title",          "annotations", "output_schema", "strict",        "start",
        "scopes",         "mcp", /* declare.c */
        "max_forks",             /* template.c */
        "learn",                 /* learndef.c */
        "best_effort",           /* besteffort.c */
        "mcp_server",     "instance",    "instances",     "recycle_calls", "idle_ms", /* mcpdef.c */
        "stderr_to_model"};                                                           /* worker.c */
    const char *key;
    json_t *v;
    if (!json_is_object(def))
        return td_fail(err, errlen, "%s: expected a JSON object", file);
    json_object_foreach(def, key, v)
    {
        size_t i;
        for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (strcmp(key, keys[i]) == 0)
                break;
        const char *near = i == sizeof(keys) / sizeof(keys[0])
                               ? td_near_word(key, keys, sizeof(keys) / sizeof(keys[0]))
                               : NULL;
        if (near)
            return td_fail(err, errlen, "%s: %s: unknown key (did you mean %s?)", file, key, near);
        if (i == sizeof(keys) / sizeof(keys[0]))
            return td_fail(err, errlen, "%s: %s: unknown key", file, key);
    }

    struct td_tool *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->refs = 1;
    int rc = -EINVAL;
#define BAD(...)                                                                                   \
    do {                                                                                           \
        rc = td_fail(err, errlen, __VA_ARGS__);                                                    \
        goto out;                                                                                  \
    } while (0)

    v = json_object_get(def, "name");
    if (!te_json_is_text(v) || !te_tool_name_valid(json_string_value(v)))
        BAD("%s: name: required, [A-Za-z0-9_.-]{1,64}", file);
    t->name = strdup(json_string_value(v));
    t->file = strdup(file);

    v = json_object_get(def, "description");
    if (v && !te_json_is_text(v))
        BAD("%s: description: expected a string", file);
    t->description = strdup(v ? json_string_value(v) : "");

    v = json_object_get(def, "schema");
    if (v && !json_is_object(v))
        BAD("%s: schema: expected a JSON object", file);
    t->schema = v ? json_incref(v) : json_pack("{s:s}", "type", "object");
    char why[512];
    if (te_schema_compile(t->schema, &t->validator, why, sizeof(why)) < 0)
        BAD("%s: schema%s%s", file, why[0] == '/' ? "" : ": ", why);

    v = json_object_get(def, "coerce");
    if (v && !json_is_boolean(v))
        BAD("%s: coerce: expected true or false", file);
    t->coerce = json_is_true(v);

    v = json_object_get(def, "spill");
    if (v && !json_is_boolean(v))
        BAD("%s: spill: expected true or false", file);
    t->spill = json_is_true(v);

    if ((rc = td_mcpdef_parse(dir, file, def, t, err, errlen)) < 0)
        goto out;
    v = json_object_get(def, "command");
    if (v) {
        size_t n = json_array_size(v), i;
        json_t *a;
        if (!json_is_array(v) || n == 0)
            BAD("%s: command: expected a non-empty array of strings", file);
        t->argv = calloc(n + 1, sizeof(char *));
        if (!t->argv) {
            rc = -ENOMEM;
            goto out;
        }
        json_array_foreach(v, i, a)
        {
            if (!te_json_is_text(a) || (i == 0 && json_string_length(a) == 0) ||
                strlen(json_string_value(a)) != json_string_length(a))
                BAD("%s: command[%zu]: expected a non-empty string without NUL", file, i);
            t->argv[i] =
                i == 0 ? resolve_command(dir, json_string_value(a)) : strdup(json_string_value(a));
            if (!t->argv[i]) {
                rc = -ENOMEM;
                goto out;
            }
        }
    }

    t->protocol = TD_PROTO_FRAMED;
    v = json_object_get(def, "protocol");
    if (v) {
        const char *p = te_json_text_value(v);
        if (p && strcmp(p, "framed") == 0)
            t->protocol = TD_PROTO_FRAMED;
        else if (p && strcmp(p, "plain") == 0)
            t->protocol = TD_PROTO_PLAIN;
        else
            BAD("%s: protocol: expected \"framed\" or \"plain\"", file);
    }

    v = json_object_get(def, "context");
    if (v && !json_is_boolean(v))
        BAD("%s: context: expected true or false", file);
    t->context = json_is_true(v);

    v = json_object_get(def, "stderr_to_model");
    if (v && !json_is_boolean(v))
        BAD("%s: stderr_to_model: expected true or false", file);
    t->stderr_hidden = json_is_false(v);

    v = json_object_get(def, "timeout_ms");
    if (v && (!json_is_integer(v) || json_integer_value(v) <= 0))
        BAD("%s: timeout_ms: expected a positive integer", file);
    t->timeout_ms = v ? (uint64_t)json_integer_value(v) : 0;

    v = td_mcpdef_env(def); /* mcp_server.env for a server */
    if (v && !json_is_object(v))
        BAD("%s: env: expected an object of strings", file);
    t->env = calloc(json_object_size(v) + 1, sizeof(char *));
    if (!t->env) {
        rc = -ENOMEM;
        goto out;
    }
    json_t *val;
    json_object_foreach(v, key, val)
    {
        if (!*key || strchr(key, '='))
            BAD("%s: env: invalid variable name \"%s\"", file, key);
        if (strncmp(key, "TOOLEXEC_", 9) == 0)
            BAD("%s: env.%s: TOOLEXEC_* variables are set by the daemon", file, key);
        if (!te_json_is_text(val) || strlen(json_string_value(val)) != json_string_length(val))
            BAD("%s: env.%s: expected a string", file, key);
        if (asprintf(&t->env[t->nenv], "%s=%s", key, json_string_value(val)) < 0) {
            t->env[t->nenv] = NULL;
            rc = -ENOMEM;
            goto out;
        }
        t->nenv++;
    }
    v = json_object_get(def, "limits");
    if (v && !json_is_object(v))
        BAD("%s: limits: expected an object", file);
    json_object_foreach(v, key, val)
    {
        if (!json_is_integer(val) || json_integer_value(val) <= 0)
            BAD("%s: limits.%s: expected a positive integer", file, key);
        if (td_limits_set(&t->limits, key, (uint64_t)json_integer_value(val)) < 0)
            BAD("%s: limits.%s: unknown limit (" TD_LIMIT_NAMES_TEXT ")", file, key);
    }

    const char *lists[2] = {"allow_uids", "allow_gids"};
    for (int k = 0; k < 2; k++) {
        v = json_object_get(def, lists[k]);
        if (!v)
            continue;
        size_t i;
        json_t *id;
        if (!json_is_array(v))
            BAD("%s: %s: expected an array of integers", file, lists[k]);
        json_array_foreach(v, i, id)
        {
            if (!json_is_integer(id) || json_integer_value(id) < 0)
                BAD("%s: %s[%zu]: expected a non-negative integer", file, lists[k], i);
        }
        /* an MCP server's listing tool is the daemon's to run (its
         * tools, made from this definition, keep the lists) */
        if (!t->mcp)
            *(k == 0 ? &t->allow_uids : &t->allow_gids) = json_incref(v);
    }

    v = json_object_get(def, "max_content_bytes");
    if (v && (!json_is_integer(v) || json_integer_value(v) <= 0))
        BAD("%s: max_content_bytes: expected a positive integer", file);
    t->max_content_bytes = v ? (uint64_t)json_integer_value(v) : 0;

    t->network = -1;
    v = json_object_get(def, "network");
    if (json_is_object(v)) {
        char ewhy[512];
        if (td_egress_parse(v, &t->egress, ewhy, sizeof(ewhy)) < 0)
            BAD("%s: network: %s", file, ewhy);
    } else if (v && !json_is_boolean(v))
        BAD("%s: network: expected true, false or an object {\"allow\": [hosts]}", file);
    if (v)
        t->network = json_is_true(v);

    if ((rc = td_sysfilter_parse(file, def, &t->sysfilter, err, errlen)) < 0)
        goto out;
    if ((rc = td_fsview_parse(file, json_object_get(def, "filesystem"), &t->fs, err, errlen)) < 0)
        goto out;
    t->fs->proxy_ca = td_egress_creds(t->egress) != NULL; /* credentials.h */
    if ((rc = td_declare_parse(file, def, t, err, errlen)) < 0)
        goto out;
    if ((rc = td_besteffort_parse(file, def, t, err, errlen)) < 0)
        goto out;
    struct td_warmdef wd;
    if (td_warmdef_parse(file, def, t->argv && t->protocol == TD_PROTO_FRAMED, &wd, err, errlen) <
        0) {
        rc = -EINVAL;
        goto out;
    }
    t->warm = wd.warm;
    t->max_forks = wd.max_forks;
    if ((rc = td_learndef_parse(file, def, t, err, errlen)) < 0)
        goto out;
    const char *names[2] = {"user", "group"};
    for (int k = 0; k < 2; k++) {
        v = json_object_get(def, names[k]);
        if (v && (!te_json_is_text(v) || json_string_length(v) == 0))
            BAD("%s: %s: expected a user or group name", file, names[k]);
        bool known = !v || (k == 0 ? getpwnam(json_string_value(v)) != NULL
                                   : getgrnam(json_string_value(v)) != NULL);
        if (!known)
            BAD("%s: %s: no such %s \"%s\"", file, names[k], names[k], json_string_value(v));
        if (v)
            *(k == 0 ? &t->user : &t->group) = strdup(json_string_value(v));
    }
    if (geteuid() == 0) {
        /* Workers never run as root unless a definition says so. */
        const char *u = t->user                ? t->user
                        : td_cfg.user          ? td_cfg.user
                        : getpwnam("toolexec") ? "toolexec"
                                               : "nobody";
        struct passwd *pw = getpwnam(u);
        if (!pw)
            BAD("%s: user: no such user \"%s\"", file, u);
        t->uid = pw->pw_uid;
        t->gid = pw->pw_gid;
        const char *g = t->group ? t->group : td_cfg.group;
        struct group *gr = g ? getgrnam(g) : NULL;
        if (g && !gr)
            BAD("%s: group: no such group \"%s\"", file, g);
        if (gr)
            t->gid = gr->gr_gid;
        t->switch_user = true;
    }
    *out = t;
    return 0;
#undef BAD
out:
    td_tool_unref(t);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(struct td_tool *const *)a)->name, (*(struct td_tool *const *)b)->name);
}

static bool json_name(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".json") == 0;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read definition NAME in directory dfd: 0 with the text in *text (NUL
 * terminated), or -1 with why it is refused in why. stat first, so a FIFO
 * or a device (a link may point anywhere) is never opened. */
static int read_def(int dfd, const char *name, char **text, size_t *len, struct stat *st, char *why,
                    size_t whylen)
{
    struct stat st2;
    if (fstatat(dfd, name, st, 0) < 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, whylen, "not a regular file");
        return -1;
    }
    if (st->st_size > TD_TOOL_FILE_MAX) {
        snprintf(why, whylen, "%lld bytes, more than the %d a definition may have",
                 (long long)st->st_size, TD_TOOL_FILE_MAX);
        return -1;
    }
    /* O_NONBLOCK: should it have become a FIFO since, open does not wait */
    int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st2) < 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st2.st_dev != st->st_dev || st2.st_ino != st->st_ino) {
        snprintf(why, whylen, "replaced while being read");
        close(fd);
        return -1;
    }
    /* checked on the open file: its mount is the one a read-only
     * exception (defsafe.c) looks at */
    if (td_defs_unsafe(&st2, fd, why, whylen)) {
        close(fd);
        return -1;
    }
    char *buf = malloc(TD_TOOL_FILE_MAX + 1);
    size_t have = 0;
    while (buf && have <= TD_TOOL_FILE_MAX) {
        ssize_t n = read(fd, buf + have, TD_TOOL_FILE_MAX + 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(why, whylen, "%s", strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        have += (size_t)n;
    }
    close(fd);
    if (!buf) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    if (have > TD_TOOL_FILE_MAX) {
        snprintf(why, whylen, "more than the %d bytes a definition may have", TD_TOOL_FILE_MAX);
        free(buf);
        return -1;
    }
    buf[have] = '\0';
    *text = buf;
    *len = have;
    return 0;
}

/* The names of the definitions in dfd, sorted; -1 on error. */
static int list_defs(int dfd, char ***out)
{
    DIR *d = td_opendir_dup(dfd);
    if (!d)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (!json_name(e->d_name))
            continue;
        if (n == cap) {
            char **more = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof(*names));
            if (!more) {
                rc = -1;
                break;
            }
            names = more;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc < 0) {
        for (size_t i = 0; i < n; i++)
            free(names[i]);
        free(names);
        errno = ENOMEM;
        return -1;
    }
    if (n)
        qsort(names, n, sizeof(*names), by_string);
    *out = names;
    return (int)n;
}

int td_registry_load(const char *dir, struct td_registry **out, char *err, size_t errlen)
{
    char absdir[PATH_MAX], why[256];
    char **names = NULL;
    *out = NULL;
    if (!realpath(dir, absdir))
        return td_fail(err, errlen, "%s: %s", dir, strerror(errno));
    int dfd = open(absdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat dst;
    if (dfd < 0 || fstat(dfd, &dst) < 0) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return td_fail(err, errlen, "%s: %s", absdir, strerror(e));
    }
    if (td_defs_unsafe(&dst, dfd, why, sizeof(why))) {
        close(dfd);
        return td_fail(err, errlen, "%s: %s: refusing every definition in it", absdir, why);
    }
    int n = list_defs(dfd, &names);
    if (n < 0) {
        int e = errno;
        close(dfd);
        return td_fail(err, errlen, "%s: %s", absdir, strerror(e));
    }
    struct td_registry *r = calloc(1, sizeof(*r));
    if (r)
        r->tools = calloc((size_t)n + 1, sizeof(*r->tools));
    int rc = r && r->tools ? 0 : -ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        char *path = NULL, *text = NULL;
        size_t len = 0;
        struct stat st;
        if (asprintf(&path, "%s/%s", absdir, names[i]) < 0) {
            rc = -ENOMEM;
            break;
        }
        if (read_def(dfd, names[i], &text, &len, &st, why, sizeof(why)) < 0) {
            /* left out alone: the others still load */
            td_log(TD_LOG_ERR, "%s: refused: %s", path, why);
            free(path);
            continue;
        }
        json_error_t jerr;
        json_t *def = te_json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        free(text);
        if (!def) {
            /* jansson quotes the text near the error ("... near 'root:$y$...'"):
             * only when everyone may read the file anyway */
            char where[64];
            te_json_error_where(&jerr, where, sizeof(where));
            char *near = strstr(jerr.text, " near '");
            if (near && !(st.st_mode & S_IROTH))
                *near = '\0';
            rc = td_fail(err, errlen, "%s: %s: %s", path, where, jerr.text);
        } else {
            rc = parse_tool(absdir, path, def, &r->tools[r->n], err, errlen);
        }
        if (rc == 0)
            r->tools[r->n]->file_mode = st.st_mode;
        json_decref(def);
        free(path);
        if (rc == 0)
            r->n++;
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    close(dfd);
    if (rc == 0 && r->n > 1) {
        qsort(r->tools, r->n, sizeof(*r->tools), by_name);
        for (size_t i = 1; i < r->n; i++)
            if (strcmp(r->tools[i - 1]->name, r->tools[i]->name) == 0)
                rc = td_fail(err, errlen, "%s: name: \"%s\" is already defined in %s",
                             r->tools[i]->file, r->tools[i]->name, r->tools[i - 1]->file);
        if (rc == 0)
            rc = td_declare_check_names(r, err, errlen);
    }
    if (rc) {
        td_registry_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

struct td_tool *td_registry_find(const struct td_registry *r, const char *name)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(name, r->tools[mid]->name);
        if (c == 0)
            return r->tools[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    /* the name the tool is declared under to OpenAI and Anthropic (declare.c) */
    for (size_t i = 0; name && i < r->n; i++)
        if (strcmp(name, r->tools[i]->api_name) == 0)
            return r->tools[i];
    return NULL;
}

json_t *td_registry_list_as(const struct td_registry *r, const char *format)
{
    if (!te_tool_format_valid(format)) /* refused even when there is no tool to format */
        return NULL;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < r->n; i++) {
        if (r->tools[i]->mcp)
            continue; /* an MCP server's listing tool: its tools are listed */
        /* manual-mode tools are the host's own: an API request lists them too */
        json_t *t = td_declare_tool(r->tools[i], format);
        if (!t) {
            json_decref(arr);
            return NULL;
        }
        json_array_append_new(arr, t);
    }
    return arr;
}

json_t *td_registry_list(const struct td_registry *r)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < r->n; i++) {
        struct td_tool *t = r->tools[i];
        if (t->mcp)
            continue;
        json_array_append_new(arr, json_pack("{s:s,s:s,s:O,s:b}", "name", t->name, "description",
                                             t->description, "schema", t->schema, "manual",
                                             t->argv == NULL));
    }
    return arr;
}

void td_registry_free(struct td_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        td_tool_unref(r->tools[i]);
    free(r->tools);
    free(r);
}

/* ---- for defcheck.c (toolexecd --check --tools DIR) --------------- */

int td_registry_list_defs(int dfd, char ***out)
{
    return list_defs(dfd, out);
}

int td_registry_read_def(int dfd, const char *name, char **text, size_t *len, struct stat *st,
                         char *why, size_t whylen)
{
    return read_def(dfd, name, text, len, st, why, whylen);
}

int td_registry_parse_def(const char *dir, const char *file, json_t *def, struct td_tool **out,
                          char *err, size_t errlen)
{
    return parse_tool(dir, file, def, out, err, errlen);
}
