/*
 * fuzz_learn - learn mode's records and the proposal built from them
 * (daemon/confine/learn.c). What a learning call does reaches the record
 * from the call itself: the paths it names (read from its memory by
 * learnsys.c), the hosts it asks the proxy for, the system calls it makes.
 * The input is a hostile call's, one record a line:
 *
 *   pN PATH   a path touched; N a digit, its how (TD_LEARN_* bits)
 *   h HOST:PORT   a host (the port after the last ':', else 443)
 *   s NAME    a system call
 *   m         this call's record merged into the tool's; the next begins
 *
 * then the tool's record is built into a proposal against the daemon's
 * base, once with the host's root and once with a minimal one.
 *
 * Invariants: the records stay bounded (TD_LEARN_MAX_PATHS); the proposal
 * is an object that serialises; "filesystem" holds "read" and "write"
 * arrays of absolute, real, distinct, sorted paths, none below another of
 * the same list, no read below a write, none of the call's own (/dev,
 * /proc, the work directory) nor "/" written; "network" is false without
 * hosts, else the allow-list of distinct strings, sorted; "syscalls":
 * "off" exactly when system calls were recorded, "deny_syscalls" then the
 * base's set less them.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "learn.h"

#include "fuzz_common.h"

static const char *const hidden[] = {"/root", "/home", "/run", "/var/lib", "/var/tmp", NULL};
static const char *const shown[] = {"/usr", "/bin", "/sbin", "/etc", "/lib", "/lib64", NULL};
static const char *const private_[] = {"/dev", "/proc", NULL};
static const char *const scratch[] = {"/tmp", NULL};
static const char *const deny[] = {"ptrace", "bpf", "mount", "keyctl", "unshare", NULL};
#define OWN "/var/lib/toolexecd/work"

static bool under(const char *p, const char *root)
{
    size_t n = strlen(root);
    return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/' || n == 1);
}

static void check_list(const json_t *a, const char *what, const json_t *writes)
{
    if (!a)
        return;
    CHECK(json_is_array(a) && json_array_size(a), "%s: not a non-empty array", what);
    size_t i;
    json_t *v;
    const char *prev = NULL;
    json_array_foreach(a, i, v)
    {
        const char *p = json_string_value(v);
        CHECK(p && p[0] == '/', "%s[%zu]: not an absolute path", what, i);
        CHECK(!prev || strcmp(prev, p) < 0, "%s: \"%s\" after \"%s\"", what, p, prev);
        CHECK(!prev || !under(p, prev), "%s: \"%s\" below \"%s\"", what, p, prev);
        CHECK(!under(p, "/dev") && !under(p, "/proc") && !under(p, OWN),
              "%s: a call's own \"%s\" proposed", what, p);
        char real[PATH_MAX];
        CHECK(realpath(p, real) && strcmp(real, p) == 0, "%s: \"%s\" not a real path", what, p);
        size_t j;
        json_t *w;
        json_array_foreach(writes, j, w)
            CHECK(!under(p, json_string_value(w)), "read \"%s\" below write \"%s\"", p,
                  json_string_value(w));
        prev = p;
    }
}

static void check_proposal(json_t *out, bool any_host, bool any_sys, const json_t *sys, bool min)
{
    CHECK(json_is_object(out), "no proposal");
    char *text = json_dumps(out, JSON_COMPACT);
    CHECK(text, "the proposal does not serialise");
    free(text);
    json_t *fs = json_object_get(out, "filesystem");
    CHECK(json_is_object(fs), "no filesystem object");
    json_t *w = json_object_get(fs, "write");
    check_list(w, "write", NULL);
    size_t i;
    json_t *v;
    json_array_foreach(w, i, v) CHECK(strcmp(json_string_value(v), "/") != 0, "\"/\" written");
    check_list(json_object_get(fs, "read"), "read", w);
    CHECK(min == json_is_string(json_object_get(fs, "root")), "root: minimal or not");
    json_t *net = json_object_get(out, "network");
    if (!any_host) {
        CHECK(json_is_false(net), "network without a host");
    } else {
        json_t *allow = json_object_get(net, "allow");
        CHECK(json_is_array(allow), "no allow-list");
        const char *prev = NULL;
        json_array_foreach(allow, i, v)
        {
            const char *h = json_string_value(v);
            CHECK(h && h[0] && (!prev || strcmp(prev, h) < 0), "allow[%zu]", i);
            prev = h;
        }
    }
    json_t *off = json_object_get(out, "syscalls");
    CHECK(any_sys == (off != NULL), "syscalls off: %d, recorded %d", off != NULL, any_sys);
    if (off) {
        CHECK(json_is_string(off) && strcmp(json_string_value(off), "off") == 0, "syscalls");
        json_t *d = json_object_get(out, "deny_syscalls");
        size_t n = 0;
        for (size_t k = 0; deny[k]; k++)
            if (!json_object_get(sys, deny[k])) {
                const char *got = json_string_value(json_array_get(d, n++));
                CHECK(got && strcmp(got, deny[k]) == 0, "deny_syscalls[%zu]", n - 1);
            }
        CHECK(json_array_size(d) == n, "deny_syscalls: %zu, want %zu", json_array_size(d), n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct td_learn *tool = td_learn_new(), *call = td_learn_new();
    json_t *sys = json_object(); /* the names recorded, as the record keeps them */
    CHECK(tool && call && sys, "out of memory");
    bool any_host = false;
    unsigned merges = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (line[0] == 'p' && line[1] >= '0' && line[1] <= '9' && line[2] == ' ') {
            td_learn_path(call, line + 3, (unsigned)(line[1] - '0') & 15);
        } else if (line[0] == 'h' && line[1] == ' ') {
            char *colon = strrchr(line + 2, ':');
            unsigned port = 443;
            if (colon && colon > line + 2) {
                *colon = '\0';
                port = (unsigned)strtoul(colon + 1, NULL, 10) & 0xffff;
            }
            td_learn_host(call, line + 2, port);
            /* kept where it makes a key (valid UTF-8, as json_object keys) */
            any_host |= te_fuzz_valid_utf8(line + 2);
        } else if (line[0] == 's' && line[1] == ' ') {
            td_learn_syscall(call, line + 2);
            if (te_fuzz_valid_utf8(line + 2))
                json_object_set_new(sys, line + 2, json_true());
        } else if (line[0] == 'm' && line[1] == '\0') {
            td_learn_merge(tool, call);
            merges++;
            td_learn_free(call);
            call = td_learn_new();
            CHECK(call, "out of memory");
        }
    }
    td_learn_merge(tool, call);
    merges++;
    CHECK(td_learn_calls(tool) == merges, "%u calls for %u merges", td_learn_calls(tool), merges);
    for (int min = 0; min < 2; min++) {
        struct td_learn_base b = {hidden, min ? shown : NULL, private_, scratch, OWN, deny};
        json_t *out = td_learn_build(tool, &b);
        check_proposal(out, any_host, json_object_size(sys) > 0, sys, min);
        json_decref(out);
    }
    json_decref(sys);
    td_learn_free(call);
    td_learn_free(tool);
    free(text);
    return 0;
}
