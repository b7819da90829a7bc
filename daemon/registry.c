/*
 * registry.c - tool definitions: one JSON file per tool in a directory.
 * Loading is all-or-nothing and strict: an unknown key, a wrong type or a
 * duplicate name is an error naming the file and the field, never ignored.
 */
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "toolexecd.h"

struct td_registry *td_tools;

struct td_tool *td_tool_ref(struct td_tool *t)
{
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
    free_strv(t->env);
    free(t);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Resolve command[0]: absolute as is; with a '/' relative to the definition's
 * directory; a bare name through the worker's PATH (left bare when absent, so
 * the call reports the exec error). */
static char *resolve_command(const char *dir, const char *cmd)
{
    char *out = NULL;
    if (cmd[0] == '/')
        return strdup(cmd);
    if (strchr(cmd, '/'))
        return asprintf(&out, "%s/%s", dir, cmd) < 0 ? NULL : out;
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
        "name",    "description", "schema",     "command",    "protocol",
        "context", "timeout_ms",  "env",        "limits",     "user",
        "group",   "network",     "allow_uids", "allow_gids", "max_content_bytes",
        "coerce",  "spill"};
    const char *key;
    json_t *v;
    if (!json_is_object(def))
        return fail(err, errlen, "%s: expected a JSON object", file);
    json_object_foreach(def, key, v)
    {
        size_t i;
        for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (strcmp(key, keys[i]) == 0)
                break;
        if (i == sizeof(keys) / sizeof(keys[0]))
            return fail(err, errlen, "%s: %s: unknown key", file, key);
    }

    struct td_tool *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->refs = 1;
    int rc = -EINVAL;
#define BAD(...)                                                                                   \
    do {                                                                                           \
        rc = fail(err, errlen, __VA_ARGS__);                                                       \
        goto out;                                                                                  \
    } while (0)

    v = json_object_get(def, "name");
    if (!json_is_string(v) || !te_tool_name_valid(json_string_value(v)))
        BAD("%s: name: required, [A-Za-z0-9_.-]{1,64}", file);
    t->name = strdup(json_string_value(v));
    t->file = strdup(file);

    v = json_object_get(def, "description");
    if (v && !json_is_string(v))
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
            if (!json_is_string(a) || (i == 0 && json_string_length(a) == 0) ||
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
        const char *p = json_string_value(v);
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

    v = json_object_get(def, "timeout_ms");
    if (v && (!json_is_integer(v) || json_integer_value(v) <= 0))
        BAD("%s: timeout_ms: expected a positive integer", file);
    t->timeout_ms = v ? (uint64_t)json_integer_value(v) : 0;

    v = json_object_get(def, "env");
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
        if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val))
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
            BAD("%s: limits.%s: unknown limit (cpu_ms, memory_mb, processes, open_files, "
                "file_size_mb, output_mb)",
                file, key);
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
        *(k == 0 ? &t->allow_uids : &t->allow_gids) = json_incref(v);
    }

    v = json_object_get(def, "max_content_bytes");
    if (v && (!json_is_integer(v) || json_integer_value(v) <= 0))
        BAD("%s: max_content_bytes: expected a positive integer", file);
    t->max_content_bytes = v ? (uint64_t)json_integer_value(v) : 0;

    t->network = -1;
    v = json_object_get(def, "network");
    if (v && !json_is_boolean(v))
        BAD("%s: network: expected true or false", file);
    if (v)
        t->network = json_is_true(v);

    const char *names[2] = {"user", "group"};
    for (int k = 0; k < 2; k++) {
        v = json_object_get(def, names[k]);
        if (v && (!json_is_string(v) || json_string_length(v) == 0))
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

static int json_file(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return d->d_name[0] != '.' && n > 5 && strcmp(d->d_name + n - 5, ".json") == 0;
}

int td_registry_load(const char *dir, struct td_registry **out, char *err, size_t errlen)
{
    char absdir[PATH_MAX];
    struct dirent **ents = NULL;
    *out = NULL;
    if (!realpath(dir, absdir))
        return fail(err, errlen, "%s: %s", dir, strerror(errno));
    int n = scandir(absdir, &ents, json_file, alphasort);
    if (n < 0)
        return fail(err, errlen, "%s: %s", absdir, strerror(errno));
    struct td_registry *r = calloc(1, sizeof(*r));
    if (r)
        r->tools = calloc((size_t)n + 1, sizeof(*r->tools));
    int rc = r && r->tools ? 0 : -ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        char *path = NULL;
        if (asprintf(&path, "%s/%s", absdir, ents[i]->d_name) < 0) {
            rc = -ENOMEM;
            break;
        }
        json_error_t jerr;
        json_t *def = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        if (!def)
            rc = fail(err, errlen, "%s: line %d column %d: %s", path, jerr.line, jerr.column,
                      jerr.text);
        else
            rc = parse_tool(absdir, path, def, &r->tools[r->n], err, errlen);
        json_decref(def);
        free(path);
        if (rc == 0)
            r->n++;
    }
    for (int i = 0; i < n; i++)
        free(ents[i]);
    free(ents);
    if (rc == 0 && r->n > 1) {
        qsort(r->tools, r->n, sizeof(*r->tools), by_name);
        for (size_t i = 1; i < r->n; i++)
            if (strcmp(r->tools[i - 1]->name, r->tools[i]->name) == 0)
                rc = fail(err, errlen, "%s: name: \"%s\" is already defined in %s",
                          r->tools[i]->file, r->tools[i]->name, r->tools[i - 1]->file);
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
    return NULL;
}

/* One tool as the named LLM API (or MCP) declares tools in a request. */
static json_t *tool_as(const struct td_tool *t, const char *format)
{
    if (strcmp(format, "openai") == 0)
        return json_pack("{s:s,s:{s:s,s:s,s:O}}", "type", "function", "function", "name", t->name,
                         "description", t->description, "parameters", t->schema);
    if (strcmp(format, "openai_responses") == 0)
        return json_pack("{s:s,s:s,s:s,s:O}", "type", "function", "name", t->name, "description",
                         t->description, "parameters", t->schema);
    if (strcmp(format, "anthropic") == 0)
        return json_pack("{s:s,s:s,s:O}", "name", t->name, "description", t->description,
                         "input_schema", t->schema);
    if (strcmp(format, "mcp") == 0)
        return json_pack("{s:s,s:s,s:O}", "name", t->name, "description", t->description,
                         "inputSchema", t->schema);
    return NULL;
}

json_t *td_registry_list_as(const struct td_registry *r, const char *format)
{
    static const char *const formats[] = {"openai", "openai_responses", "anthropic", "mcp"};
    size_t k = 0;
    while (k < 4 && strcmp(format, formats[k]) != 0)
        k++;
    if (k == 4) /* refused even when there is no tool to format */
        return NULL;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < r->n; i++) {
        /* manual-mode tools are the host's own: an API request lists them too */
        json_t *t = tool_as(r->tools[i], format);
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
