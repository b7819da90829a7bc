/*
 * learn.c - learn mode's record of a call and the proposal made from it
 * (learn.h).
 *
 * How paths become a proposal (toolexecd.tools(5), LEARN MODE): a write
 * proposes the directory it was made in when it made or removed an entry
 * there (O_CREAT, mkdir, unlink, rename), the file itself otherwise; a
 * directory the calls made themselves is climbed out of, so a tool that
 * makes out/a/b and writes in it proposes out, which exists when the
 * proposal is loaded (a definition's paths must). A read proposes the file
 * (four or more in one directory: the directory; a directory opened
 * itself is not proposed, a search of /run must not expose /run), and only
 * where the base
 * view does not show it already (/usr, /etc, ... are shown read-only to
 * every call). Nothing under the call's own directories (/tmp right in it,
 * /dev, /proc, its directory) is proposed. Paths that no longer exist are
 * left out: a probe that found nothing (a module search) needs nothing.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "learn.h"

/* Directories holding this many of the reads are proposed whole. */
#define READS_TO_DIR 4
/* A definition's read and write paths together (fsview.c's MAX_EXPOSED). */
#define MAX_PROPOSED 32

struct td_learn {
    json_t *paths;   /* path -> how (bits) */
    json_t *hosts;   /* "host:port" -> true */
    json_t *sys;     /* name -> true */
    json_t *refused; /* "rule\npath" -> {"path", "how": bits, "rule"} */
    unsigned calls;
    size_t dropped;
};

struct td_learn *td_learn_new(void)
{
    struct td_learn *l = calloc(1, sizeof(*l));
    if (l && (!(l->paths = json_object()) || !(l->hosts = json_object()) ||
              !(l->sys = json_object()) || !(l->refused = json_object()))) {
        td_learn_free(l);
        return NULL;
    }
    return l;
}

void td_learn_free(struct td_learn *l)
{
    if (!l)
        return;
    json_decref(l->paths);
    json_decref(l->hosts);
    json_decref(l->sys);
    json_decref(l->refused);
    free(l);
}

void td_learn_path(struct td_learn *l, const char *path, unsigned how)
{
    if (!l || !path || path[0] != '/')
        return;
    json_t *v = json_object_get(l->paths, path);
    if (v) {
        json_integer_set(v, json_integer_value(v) | how);
        return;
    }
    if (json_object_size(l->paths) >= TD_LEARN_MAX_PATHS) {
        l->dropped++;
        return;
    }
    json_object_set_new(l->paths, path, json_integer(how));
}

void td_learn_host(struct td_learn *l, const char *host, unsigned port)
{
    char key[300];
    if (!l)
        return;
    if (json_object_size(l->hosts) >= TD_LEARN_MAX_PATHS) {
        l->dropped++;
        return;
    }
    /* a bare IPv6 address needs its brackets to carry a port */
    snprintf(key, sizeof(key), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
    json_object_set_new(l->hosts, key, json_true());
}

void td_learn_syscall(struct td_learn *l, const char *name)
{
    if (l)
        json_object_set_new(l->sys, name, json_true());
}

static unsigned access_bits(const char *access)
{
    if (!access)
        return 0;
    if (!strcmp(access, "read"))
        return TD_LEARN_READ;
    if (!strcmp(access, "write"))
        return TD_LEARN_WRITE;
    if (!strcmp(access, "execute"))
        return TD_LEARN_EXEC;
    if (!strcmp(access, "create") || !strcmp(access, "remove"))
        return TD_LEARN_CREATE;
    return 0;
}

static void refused_add(struct td_learn *l, const char *path, unsigned how, const char *rule)
{
    /* one entry a path and rule: a path refused by two rules is two */
    char *key = NULL;
    if (asprintf(&key, "%s\n%s", rule, path) < 0)
        return;
    json_t *v = json_object_get(l->refused, key);
    if (v) {
        json_t *h = json_object_get(v, "how");
        json_integer_set(h, json_integer_value(h) | how);
    } else if (json_object_size(l->refused) >= TD_LEARN_MAX_PATHS)
        l->dropped++;
    else
        json_object_set_new(
            l->refused, key,
            json_pack("{s:s,s:i,s:s}", "path", path, "how", (int)how, "rule", rule));
    free(key);
}

void td_learn_refused(struct td_learn *l, const char *path, const char *access, const char *rule)
{
    unsigned how = access_bits(access);
    /* the C library's look-up of a uid with no passwd entry in systemd's
     * userdb (hidden with /run): harmless, and nothing the tool asked for */
    static const char userdb[] = "/run/systemd/userdb/";
    if (!l || !path || path[0] != '/' || !how || !rule ||
        strncmp(path, userdb, sizeof(userdb) - 1) == 0)
        return;
    /* an O_CREAT open of a file that is there (a shell's >>) writes only
     * the file: its directory is not needed */
    struct stat st;
    if (!strcmp(access, "create") && stat(path, &st) == 0 && S_ISREG(st.st_mode))
        how = TD_LEARN_WRITE;
    refused_add(l, path, how, rule);
}

void td_learn_refusals(struct td_learn *l, const json_t *denied)
{
    size_t i;
    json_t *e;
    json_array_foreach(denied, i, e)
    {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        if (kind && !strcmp(kind, "filesystem"))
            td_learn_refused(l, json_string_value(json_object_get(e, "path")),
                             json_string_value(json_object_get(e, "access")),
                             json_string_value(json_object_get(e, "rule")));
    }
}

void td_learn_merge(struct td_learn *dst, const struct td_learn *src)
{
    const char *k;
    json_t *v;
    if (!dst || !src)
        return;
    json_object_foreach(src->paths, k, v) td_learn_path(dst, k, (unsigned)json_integer_value(v));
    json_object_foreach(src->refused, k, v)
        refused_add(dst, json_string_value(json_object_get(v, "path")),
                    (unsigned)json_integer_value(json_object_get(v, "how")),
                    json_string_value(json_object_get(v, "rule")));
    json_object_update(dst->hosts, src->hosts);
    json_object_update(dst->sys, src->sys);
    dst->dropped += src->dropped;
    dst->calls++;
}

unsigned td_learn_calls(const struct td_learn *l)
{
    return l ? l->calls : 0;
}

/* ---- the proposal ---------------------------------------------------------- */

static bool under(const char *p, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return true;
    return strncmp(p, root, n) == 0 && (p[n] == '/' || p[n] == '\0');
}

static bool under_any(const char *p, const char *const *list)
{
    for (size_t i = 0; list && list[i]; i++)
        if (under(p, list[i]))
            return true;
    return false;
}

static bool is_any(const char *p, const char *const *list)
{
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(p, list[i]) == 0)
            return true;
    return false;
}

/* The real path of p's directory (malloc'd), NULL if there is none. */
static char *real_parent(const char *p)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", p);
    char *slash = strrchr(buf, '/');
    if (!slash)
        return NULL;
    if (slash == buf)
        slash[1] = '\0';
    else
        *slash = '\0';
    return realpath(buf, NULL);
}

static bool never(const char *p, const struct td_learn_base *b)
{
    return under_any(p, b->private) || (b->own && under(p, b->own));
}

/* Climb out of the directories the calls made (made: their real paths). */
static char *out_of_made(char *target, json_t *made)
{
    bool again = true;
    while (target && again) {
        again = false;
        const char *m;
        json_t *v;
        json_object_foreach(made, m, v)
        {
            if (under(target, m) && strcmp(m, "/") != 0) {
                free(target);
                target = real_parent(m);
                again = true;
                break;
            }
        }
    }
    return target;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* set's keys sorted, less those below another key (or below one of
 * cover's): a directory covers what is in it. */
static json_t *minimal_list(json_t *set, json_t *cover)
{
    size_t n = json_object_size(set), k = 0;
    const char **keys = calloc(n + 1, sizeof(*keys));
    json_t *out = json_array();
    if (!keys || !out) {
        free(keys);
        json_decref(out);
        return NULL;
    }
    const char *key;
    json_t *v;
    json_object_foreach(set, key, v) keys[k++] = key;
    qsort(keys, n, sizeof(*keys), cmp_str);
    for (size_t i = 0; i < n; i++) {
        bool covered = false;
        const char *c;
        json_object_foreach(cover, c, v) covered = covered || under(keys[i], c);
        size_t j;
        json_array_foreach(out, j, v) covered = covered || under(keys[i], json_string_value(v));
        if (!covered)
            json_array_append_new(out, json_string(keys[i]));
    }
    free(keys);
    return out;
}

/* Reads: four or more in one directory become the directory. */
static void collapse_reads(json_t *reads, size_t min)
{
    json_t *per_dir = json_object();
    const char *p;
    json_t *v;
    json_object_foreach(reads, p, v)
    {
        char *d = real_parent(p);
        if (d && strcmp(d, "/") != 0 && strcmp(d, p) != 0) {
            json_t *n = json_object_get(per_dir, d);
            json_object_set_new(per_dir, d, json_integer(n ? json_integer_value(n) + 1 : 1));
        }
        free(d);
    }
    json_object_foreach(per_dir, p, v) if ((size_t)json_integer_value(v) >= min)
        json_object_set_new(reads, p, json_true());
    json_decref(per_dir);
}

/* ---- what was refused -------------------------------------------------------- */

/* "/" or a top-level directory (/etc, /home): never proposed whole from a
 * refusal, however many of its files were refused. */
static bool top_level(const char *p)
{
    return p[0] == '/' && !strchr(p + 1, '/');
}

static void not_proposed(json_t *notes, const char *path, unsigned how, const char *rule,
                         const char *why)
{
    const char *access = how & TD_LEARN_EXEC     ? "execute"
                         : how & TD_LEARN_CREATE ? "create"
                         : how & TD_LEARN_WRITE  ? "write"
                                                 : "read";
    json_array_append_new(notes, json_pack("{s:s,s:s,s:s,s:s}", "path", path, "access", access,
                                           "rule", rule, "why", why));
}

/* One refusal: the key that allows it, no wider than it (the file; a
 * directory only for what is made or removed in it, or a directory read
 * itself), into reads or writes; or why not into notes; an operator's
 * "hide" into hidden. */
static void refusal(const char *p, unsigned how, const char *rule, const struct td_learn_base *b,
                    json_t *reads, json_t *writes, json_t *notes, json_t *hidden)
{
    if (!strcmp(rule, "hide")) {
        json_array_append_new(hidden, json_string(p));
        return;
    }
    if (how & TD_LEARN_EXEC) {
        not_proposed(notes, p, TD_LEARN_EXEC, rule,
                     !strcmp(rule, "permissions")
                         ? "the file's own permissions refused it; no key changes them"
                         : "no definition key makes a part of the view executable that "
                           "it mounts without execution (/dev, /run)");
        how &= ~(unsigned)TD_LEARN_EXEC;
        if (!how)
            return;
    }
    if (!strcmp(rule, "permissions")) {
        not_proposed(notes, p, how, rule,
                     "the host's own permissions refused the call's user; no key changes them");
        return;
    }
    if (never(p, b))
        return;
    char *r = realpath(p, NULL);
    struct stat st;
    bool dir = r && stat(r, &st) == 0 && S_ISDIR(st.st_mode);
    if (how & (TD_LEARN_WRITE | TD_LEARN_CREATE)) {
        /* the file itself when it is there and only written; what is made
         * or removed needs its directory */
        char *t = (how & TD_LEARN_CREATE) || !r ? real_parent(p) : strdup(r);
        if (!t)
            not_proposed(notes, p, how, rule, "its directory does not exist on the host");
        else if (top_level(t))
            not_proposed(notes, p, how, rule,
                         "it would make a whole top-level directory writable; make the file "
                         "first, or write it in a directory of its own");
        else if (!never(t, b))
            json_object_set_new(writes, t, json_true());
        free(t);
    } else if (!r)
        not_proposed(notes, p, how, rule, "it does not exist on the host");
    else if (dir && top_level(r))
        not_proposed(notes, p, how, rule,
                     "a whole top-level directory; name the files in it the tool needs");
    else
        json_object_set_new(reads, r, json_true());
    free(r);
}

static void refusals(const struct td_learn *l, const struct td_learn_base *b, json_t *reads,
                     json_t *writes, json_t *out)
{
    json_t *notes = json_array(), *hidden = json_array();
    const char *p;
    json_t *v;
    json_object_foreach(l->refused, p, v)
        refusal(json_string_value(json_object_get(v, "path")),
                (unsigned)json_integer_value(json_object_get(v, "how")),
                json_string_value(json_object_get(v, "rule")), b, reads, writes, notes, hidden);
    if (json_array_size(hidden))
        json_object_set(out, "hidden_on_purpose", hidden);
    if (json_array_size(notes))
        json_object_set(out, "not_proposed", notes);
    json_decref(notes);
    json_decref(hidden);
}

static json_t *filesystem(const struct td_learn *l, const struct td_learn_base *b, json_t *out)
{
    json_t *made = json_object(), *writes = json_object(), *reads = json_object();
    const char *p;
    json_t *v;
    json_object_foreach(l->paths, p, v) if (json_integer_value(v) & TD_LEARN_MKDIR)
    {
        char *r = realpath(p, NULL);
        if (r && !never(r, b))
            json_object_set_new(made, r, json_true());
        free(r);
    }
    json_object_foreach(l->paths, p, v)
    {
        unsigned how = (unsigned)json_integer_value(v);
        if (never(p, b))
            continue;
        if (how & (TD_LEARN_WRITE | TD_LEARN_CREATE | TD_LEARN_MKDIR)) {
            char *t = (how & (TD_LEARN_CREATE | TD_LEARN_MKDIR)) ? NULL : realpath(p, NULL);
            if (!t)
                t = real_parent(p);
            t = out_of_made(t, made);
            if (t && strcmp(t, "/") != 0 && !never(t, b) && !is_any(t, b->scratch))
                json_object_set_new(writes, t, json_true());
            free(t);
        }
        if ((how & TD_LEARN_READ) && !(how & (TD_LEARN_CREATE | TD_LEARN_MKDIR))) {
            char *r = realpath(p, NULL);
            struct stat st;
            if (r && (stat(r, &st) < 0 || S_ISDIR(st.st_mode))) {
                /* a directory opened on the way down (a name service's
                 * search, a listing): not the whole of it */
                free(r);
                r = NULL;
            }
            /* a call's /tmp is its own: the host's is hidden from it too */
            bool shown = r && !under_any(r, b->hidden) && !under_any(r, b->scratch) &&
                         (!b->shown || under_any(r, b->shown));
            bool in_made = false;
            const char *m;
            json_t *mv;
            json_object_foreach(made, m, mv) in_made = in_made || (r && under(r, m));
            if (r && !shown && !never(r, b) && !in_made)
                json_object_set_new(reads, r, json_true());
            free(r);
        }
    }
    collapse_reads(reads, READS_TO_DIR);
    /* what was refused: each as narrow as it was, never collapsed */
    json_t *rreads = json_object();
    refusals(l, b, rreads, writes, out);
    json_t *all = json_deep_copy(reads);
    json_object_update(all, rreads);
    json_t *w = minimal_list(writes, NULL);
    json_t *r = minimal_list(all, writes);
    if (r && w && json_array_size(r) + json_array_size(w) > MAX_PROPOSED) {
        /* too many to load: the reads by their directories */
        json_decref(r);
        collapse_reads(reads, 1);
        json_object_update(reads, rreads);
        r = minimal_list(reads, writes);
    }
    json_decref(all);
    json_decref(rreads);
    json_decref(made);
    json_decref(writes);
    json_decref(reads);
    json_t *fs = json_object();
    if (r && json_array_size(r))
        json_object_set(fs, "read", r);
    if (w && json_array_size(w))
        json_object_set(fs, "write", w);
    if (b->shown)
        json_object_set_new(fs, "root", json_string("minimal"));
    json_decref(r);
    json_decref(w);
    return fs;
}

static json_t *sorted_keys(json_t *set)
{
    return minimal_list(set, NULL); /* no key is a path: none covers another */
}

json_t *td_learn_build(const struct td_learn *l, const struct td_learn_base *b)
{
    json_t *out = json_object();
    if (!out)
        return NULL;
    json_object_set_new(out, "filesystem", filesystem(l, b, out));
    if (json_object_size(l->hosts))
        json_object_set_new(out, "network", json_pack("{s:o}", "allow", sorted_keys(l->hosts)));
    else
        json_object_set_new(out, "network", json_false());
    if (json_object_size(l->sys)) {
        json_t *deny = json_array();
        for (size_t i = 0; b->deny && b->deny[i]; i++)
            if (!json_object_get(l->sys, b->deny[i]))
                json_array_append_new(deny, json_string(b->deny[i]));
        json_object_set_new(out, "syscalls", json_string("off"));
        json_object_set_new(out, "deny_syscalls", deny);
    }
    return out;
}
