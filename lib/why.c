/*
 * why.c - a sentence for each thing a call's confinement refused it, and
 * the reasons a model reads after the call's content (why.h). No I/O.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolexec.h"
#include "why.h"

/* A run request's "policy" names key (and sub in it, when given): the call
 * ran under a narrowing of that part of the tool's confinement. */
static bool narrows(const json_t *batch, const json_t *call, const char *key, const char *sub)
{
    const json_t *pol[] = {batch, call};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(pol[i], key);
        if (v && (!sub || json_object_get(v, sub)))
            return true;
    }
    return false;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, f);
    int n = vasprintf(&s, f, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

static const char *fs_verb(const char *access)
{
    static const char *const verbs[][2] = {{"read", "Reading"},
                                           {"write", "Writing"},
                                           {"execute", "Executing"},
                                           {"create", "Creating"},
                                           {"remove", "Removing"}};
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(access, verbs[i][0]) == 0)
            return verbs[i][1];
    return "Access to";
}

static const char *fs_cause(const char *rule)
{
    static const char *const causes[][2] = {
        {"hidden by the view", "the tool's view hides it"},
        {"not in the minimal root", "the tool's minimal root does not show it"},
        {"read-only in the view", "the tool's view shows it read-only"},
        {"outside Landlock's rules",
         "Landlock lets the call write only where the tool's definition says"}};
    for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++)
        if (strcmp(rule, causes[i][0]) == 0)
            return causes[i][1];
    return rule;
}

/* A file-system entry: the access and path, the rule, and the key that
 * allows it where one does. */
static char *why_filesystem(const char *path, const char *access, const char *rule,
                            const json_t *batch, const json_t *call)
{
    const char *verb = fs_verb(access);
    if (!strcmp(rule, "hide") && narrows(batch, call, "filesystem", "hide"))
        return fmt("%s %s was refused: the tool's definition or the run request's \"policy\" "
                   "hides it on purpose (\"filesystem\": {\"hide\": [...]}); only whoever wrote "
                   "them can change that.",
                   verb, path);
    if (!strcmp(rule, "hide"))
        return fmt("%s %s was refused: the tool's definition hides it on purpose "
                   "(\"filesystem\": {\"hide\": [...]}); only its operator can change that.",
                   verb, path);
    if (!strcmp(rule, "permissions"))
        return fmt("%s %s was refused by the file's own permissions for the call's user; no "
                   "key of the tool's definition changes them.",
                   verb, path);
    if (!strcmp(access, "execute"))
        return fmt("%s %s was refused: the tool's view mounts it without execution (%s); no "
                   "key of the tool's definition makes it executable.",
                   verb, path, rule);
    /* what is made or removed needs its directory writable */
    bool entry = !strcmp(access, "create") || !strcmp(access, "remove");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (entry && slash)
        slash[slash == dir ? 1 : 0] = '\0';
    const char *key = !strcmp(access, "read") ? "read" : "write";
    const char *target = entry ? dir : path;
    if (narrows(batch, call, "filesystem", NULL))
        return fmt("%s %s was refused: %s; the run request's \"policy\" narrows this call's "
                   "file system, and only that policy and the tool's definition together "
                   "(\"filesystem\": {\"%s\": [\"%s\"]} in each) allow it.",
                   verb, path, fs_cause(rule), key, target);
    return fmt("%s %s was refused: %s; only the tool's definition (\"filesystem\": "
               "{\"%s\": [\"%s\"]}) allows it, within what a run request's \"policy\" "
               "leaves.",
               verb, path, fs_cause(rule), key, target);
}

/* A network entry: a host the call may not reach, or a limit of the
 * egress proxy's. */
static char *why_network(const char *host, long long port, const char *reason, const json_t *batch,
                         const json_t *call)
{
    bool narrowed = narrows(batch, call, "network", NULL);
    if (host && reason && !strcmp(reason, "private_address"))
        return fmt("Network access to %s port %lld was refused: the name resolved only to "
                   "loopback or private addresses, which a listed name never reaches; only "
                   "listing the address itself in the tool's definition (\"network\": "
                   "{\"allow\": [...]})%s allows it.",
                   host, port,
                   narrowed ? " and in the run request's \"policy\", which narrows this call's,"
                            : "");
    if (host && reason)
        return fmt("Network access to %s port %lld was refused: this call's %s limit was "
                   "reached (the tool's definition, \"network\": {\"%s\": N}, sets it).",
                   host, port, reason, reason);
    if (host && narrowed)
        return fmt("Network access to %s port %lld was refused: it is not in this call's "
                   "network allow-list, which the run request's \"policy\" narrows; only that "
                   "policy and the tool's definition together (\"network\": {\"allow\": "
                   "[\"%s:%lld\"]} in each) allow it.",
                   host, port, host, port);
    if (host)
        return fmt("Network access to %s port %lld was refused: it is not in the tool's "
                   "network allow-list; only the tool's definition (\"network\": {\"allow\": "
                   "[\"%s:%lld\"]}) allows it, within what a run request's \"policy\" "
                   "leaves.",
                   host, port, host, port);
    if (reason && !strcmp(reason, "max_connections"))
        return fmt("A network connection was refused: this call had its most proxy "
                   "connections open at once (the tool's definition, \"network\": "
                   "{\"max_connections\": N}, sets that).");
    if (reason)
        return fmt("A network connection was refused: this call made the most proxy "
                   "connections a call may make in all (%s, fixed).",
                   reason);
    return NULL;
}

char *te_why(const json_t *e, const json_t *batch_policy, const json_t *call_policy)
{
    const char *kind = json_string_value(json_object_get(e, "kind"));
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *host = json_string_value(json_object_get(e, "host"));
    const char *reason = json_string_value(json_object_get(e, "reason"));
    const char *cause = json_string_value(json_object_get(e, "cause"));
    long long port = (long long)json_integer_value(json_object_get(e, "port"));
    const char *path = json_string_value(json_object_get(e, "path"));
    const char *access = json_string_value(json_object_get(e, "access"));
    const char *rule = json_string_value(json_object_get(e, "rule"));
    char *s = NULL;
    bool known = true;
    kind = kind ? kind : "";
    if (!strcmp(kind, "filesystem") && path && access && rule)
        s = why_filesystem(path, access, rule, batch_policy, call_policy);
    else if (!strcmp(kind, "syscall") && name)
        s = fmt("The system call %s was refused (EPERM) by the tool's system-call filter; "
                "only the tool's definition (\"syscalls\", \"deny_syscalls\") can allow it.",
                name);
    else if (!strcmp(kind, "network") && (host || reason))
        s = why_network(host, port, reason, batch_policy, call_policy);
    else if (!strcmp(kind, "egress_failure") && host)
        s = fmt("Connecting to %s port %lld failed (not a refusal): %s.", host, port,
                cause ? cause : "unknown");
    else
        known = false;
    if (known)
        return s;
    /* a kind this version does not know: the entry itself */
    char *j = te_json_dumps(e, JSON_COMPACT, NULL);
    s = fmt("Refused: %s", j ? j : "?");
    free(j);
    return s;
}

json_t *te_why_denied(const json_t *denied, const json_t *batch_policy, const json_t *call_policy)
{
    if (!json_array_size(denied))
        return NULL;
    json_t *out = json_array(), *e;
    size_t i;
    json_array_foreach(denied, i, e)
    {
        char *w = te_why(e, batch_policy, call_policy);
        json_t *c = json_deep_copy(e);
        if (!w || !json_is_object(c) || json_object_set_new(c, "why", json_string(w)) < 0 ||
            json_array_append_new(out, c) < 0) {
            free(w);
            json_decref(c);
            json_decref(out);
            return NULL;
        }
        free(w);
    }
    return out;
}

/* The bytes of s that fit in max with room for "...", cut on a character
 * boundary; all of it when it fits. */
static size_t line_len(const char *s, size_t max, bool *cut)
{
    size_t n = strlen(s);
    *cut = n > max;
    if (!*cut)
        return n;
    n = max - 3;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

#define WHY_HEAD "[toolexec] Refused during the call:"

char *te_why_text(const char *text, size_t len, const json_t *denied, size_t *out_len)
{
    size_t n = json_array_size(denied), shown = n < TE_WHY_LINES_MAX ? n : TE_WHY_LINES_MAX;
    size_t cap = len + sizeof("\n\n" WHY_HEAD) + shown * (TE_WHY_LINE_MAX + 3) + 80;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    if (len)
        memcpy(out, text, len);
    size_t p = len;
    p += (size_t)snprintf(out + p, cap - p, "%s" WHY_HEAD, len ? "\n\n" : "");
    for (size_t i = 0; i < shown; i++) {
        const char *w = json_string_value(json_object_get(json_array_get(denied, i), "why"));
        bool cut;
        size_t k = line_len(w ? w : "", TE_WHY_LINE_MAX, &cut);
        p += (size_t)snprintf(out + p, cap - p, "\n- %.*s%s", (int)k, w ? w : "", cut ? "..." : "");
    }
    if (n > shown)
        p += (size_t)snprintf(out + p, cap - p, "\n- and %zu more.", n - shown);
    *out_len = p;
    return out;
}
