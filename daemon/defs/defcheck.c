/*
 * defcheck.c - toolexecd --check --tools DIR: every problem in every
 * definition, before the daemon is started with them.
 *
 * The loader stops at the first problem of the first bad file. Here each
 * file is read and parsed exactly as the loader does (registry.c's own
 * steps), and a problem does not end the look: the key it names is taken
 * out of the definition and the rest parsed again, so a file with three
 * bad keys shows three lines. What the loader lets through is
 * reported too, from the list the daemon logs at each load (defwarn.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "defcheck.h"
#include "defsafe.h"
#include "defwarn.h"
#include "fsview.h"
#include "registry.h"
#include "toolexec.h"

/* A file with more problems than this is reported up to here. */
#define PROBLEMS_PER_FILE_MAX 32

struct check {
    FILE *out;
    unsigned problems, bad_files;
};

static void problem(struct check *c, const char *path, const char *what)
{
    /* the loader's messages start with the file already */
    size_t n = strlen(path);
    if (strncmp(what, path, n) == 0 && what[n] == ':')
        fprintf(c->out, "%s\n", what);
    else
        fprintf(c->out, "%s: %s\n", path, what);
    c->problems++;
}

/* The key a loader message names: "PATH: KEY: ..." or "PATH: KEY[3]: ...". */
static bool named_key(const char *msg, const char *path, char *key, size_t len)
{
    size_t n = strlen(path);
    if (strncmp(msg, path, n) != 0 || strncmp(msg + n, ": ", 2) != 0)
        return false;
    const char *k = msg + n + 2;
    size_t m = strcspn(k, ":[. ");
    if (m == 0 || m >= len || k[m] == ' ')
        return false;
    memcpy(key, k, m);
    key[m] = '\0';
    return true;
}

/* What the loader lets through, as the daemon logs it (defwarn.c) */
struct warned {
    struct check *c;
    const char *path;
};

static void warned_line(const char *line, void *arg)
{
    struct warned *w = arg;
    problem(w->c, w->path, line);
}

/* One definition; its name in *name (for the duplicate check) when it
 * parsed. */
static void check_file(struct check *c, int dfd, const char *dir, const char *file, char **name,
                       bool *bad)
{
    char path[PATH_MAX + 256], why[512], err[1024], key[64];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    char *text = NULL;
    size_t len = 0;
    struct stat st;
    unsigned before = c->problems;
    if (td_registry_read_def(dfd, file, &text, &len, &st, why, sizeof(why)) < 0) {
        problem(c, path, why);
        *bad = true;
        return;
    }
    json_error_t jerr;
    json_t *def = te_json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!def) {
        char where[64];
        te_json_error_where(&jerr, where, sizeof(where));
        snprintf(err, sizeof(err), "%s: %s", where, jerr.text);
        problem(c, path, err);
        *bad = true;
        return;
    }
    struct td_tool *t = NULL;
    bool stand_in = false;
    for (int round = 0; round < PROBLEMS_PER_FILE_MAX; round++) {
        if (td_registry_parse_def(dir, path, def, &t, err, sizeof(err)) == 0)
            break;
        t = NULL;
        problem(c, path, err);
        if (!json_is_object(def) || !named_key(err, path, key, sizeof(key)))
            break;
        /* a bad or missing name: a stand-in, to go on (deleted, it would be
         * reported again as missing) */
        if (strcmp(key, "name") == 0 && !stand_in)
            stand_in = !json_object_set_new(def, "name", json_string("unnamed"));
        else if (json_object_get(def, key))
            json_object_del(def, key);
        else if (strcmp(key, "description") == 0)
            json_object_set_new(def, "description", json_string("-"));
        else
            break;
    }
    struct warned w = {c, path};
    if (t) {
        t->file_mode = st.st_mode;
        td_defwarn(t, td_fsview_mount_ns, warned_line, &w);
    }
    if (t && !stand_in)
        *name = strdup(t->name);
    td_tool_unref(t);
    json_decref(def);
    *bad = c->problems > before;
}

int td_defcheck(const char *dir, FILE *out)
{
    struct check c = {.out = out};
    char absdir[PATH_MAX], why[256];
    if (!realpath(dir, absdir)) {
        fprintf(out, "%s: %s\n", dir, strerror(errno));
        return 1;
    }
    int dfd = open(absdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat dst;
    if (dfd < 0 || fstat(dfd, &dst) < 0) {
        fprintf(out, "%s: %s\n", absdir, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        return 1;
    }
    if (td_defs_unsafe(&dst, dfd, why, sizeof(why)))
        problem(&c, absdir, why);
    char **files = NULL;
    int n = td_registry_list_defs(dfd, &files);
    if (n < 0) {
        fprintf(out, "%s: %s\n", absdir, strerror(errno));
        close(dfd);
        return 1;
    }
    char **names = calloc((size_t)n + 1, sizeof(*names));
    bool *bad = calloc((size_t)n + 1, sizeof(*bad));
    if (!names || !bad) {
        fprintf(out, "toolexecd: out of memory\n");
        c.problems = 1;
    }
    int listed = n;
    if (!names || !bad)
        n = 0;
    for (int i = 0; i < n; i++)
        check_file(&c, dfd, absdir, files[i], &names[i], &bad[i]);
    /* one name, one tool: the loader refuses the whole directory */
    for (int i = 0; i < n; i++)
        for (int j = 0; names[i] && j < i; j++)
            if (names[j] && strcmp(names[i], names[j]) == 0) {
                char what[PATH_MAX + 128];
                snprintf(what, sizeof(what), "name: \"%s\" is already defined in %s/%s", names[i],
                         absdir, files[j]);
                char path[PATH_MAX + 256];
                snprintf(path, sizeof(path), "%s/%s", absdir, files[i]);
                problem(&c, path, what);
                bad[i] = true;
                break;
            }
    for (int i = 0; i < listed; i++) {
        c.bad_files += bad && bad[i];
        free(files[i]);
        if (names)
            free(names[i]);
    }
    free(files);
    free(names);
    free(bad);
    close(dfd);
    if (c.problems)
        fprintf(out, "toolexecd: %u problem%s in %u of %d definition%s in %s\n", c.problems,
                c.problems == 1 ? "" : "s", c.bad_files, n, n == 1 ? "" : "s", absdir);
    else
        fprintf(out, "toolexecd: %d definition%s in %s, no problems\n", n, n == 1 ? "" : "s",
                absdir);
    return c.problems ? 1 : 0;
}
