/*
 * identity.c - a uid of its own for each call of a root daemon.
 *
 * Calls of a tool that names no "user" run as a uid (and a gid of the same
 * number) taken from a reserved range (--call-uids, TD_CALL_UIDS_DEFAULT),
 * which no other running call holds: a call cannot signal, ptrace or read
 * the files of another, whatever they leave in /proc or on disk. This is
 * systemd's DynamicUser and Android's per-app uid, without the names: the
 * uids need no passwd entry, and a range holding one is refused at start.
 *
 * The pool is a ring, taken at the head and given back at the tail, so a
 * uid is used again only after every other one of the range has been:
 * even if a process of an earlier call could remain (a kernel without PID
 * namespaces, where a setsid() stray escapes its process group), 65536
 * calls pass before its uid is another call's.
 */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <stdint.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fswatch.h"
#include "identity.h"
#include "log.h"

/* A bound on the ring's memory (4 bytes a uid). */
#define RANGE_MAX (1u << 20)

static uid_t first, last;
static bool wanted = true;
static uid_t *ring;
static size_t cap, head, count;

int td_identity_parse(const char *spec, char *err, size_t errlen)
{
    if (strcmp(spec, "no") == 0) {
        wanted = false;
        return 0;
    }
    unsigned long long a, b;
    int n = -1;
    if (sscanf(spec, "%llu-%llu%n", &a, &b, &n) != 2 || n != (int)strlen(spec) || spec[0] == '-' ||
        a == 0 || b < a || b >= (1ull << 31) || b - a + 1 > RANGE_MAX) {
        snprintf(err, errlen,
                 "\"%s\": expected FIRST-LAST (1 <= FIRST <= LAST < 2^31, at most %u uids) or no",
                 spec, RANGE_MAX);
        return -1;
    }
    wanted = true;
    first = (uid_t)a;
    last = (uid_t)b;
    return 0;
}

int td_identity_setup(void)
{
    if (!wanted)
        return 0;
    if (!first) {
        char err[128];
        td_identity_parse(TD_CALL_UIDS_DEFAULT, err, sizeof(err));
    }
    /* A call's uid comes back once it is reaped, which may be just after
     * its slot went to the next call (a cancel): room for twice as many. */
    if ((uint64_t)(last - first) + 1 < 2 * (uint64_t)td_cfg.max_workers) {
        td_log(TD_LOG_ERR, "--call-uids %u-%u: %u uids, fewer than twice --max-workers (%u)",
               (unsigned)first, (unsigned)last, (unsigned)(last - first + 1), td_cfg.max_workers);
        return -1;
    }
    /* One pass over the users and groups the system knows (NSS included):
     * a uid of the range that is someone's would give that someone's files
     * to a call. */
    struct passwd *pw;
    setpwent();
    while ((pw = getpwent()))
        if (pw->pw_uid >= first && pw->pw_uid <= last) {
            td_log(TD_LOG_ERR, "--call-uids %u-%u: holds user %s (%u)", (unsigned)first,
                   (unsigned)last, pw->pw_name, (unsigned)pw->pw_uid);
            endpwent();
            return -1;
        }
    endpwent();
    struct group *gr;
    setgrent();
    while ((gr = getgrent()))
        if (gr->gr_gid >= first && gr->gr_gid <= last) {
            td_log(TD_LOG_ERR, "--call-uids %u-%u: holds group %s (%u)", (unsigned)first,
                   (unsigned)last, gr->gr_name, (unsigned)gr->gr_gid);
            endgrent();
            return -1;
        }
    endgrent();
    cap = (size_t)(last - first) + 1;
    ring = malloc(cap * sizeof(*ring));
    if (!ring) {
        td_log(TD_LOG_ERR, "--call-uids: out of memory");
        return -1;
    }
    for (size_t i = 0; i < cap; i++)
        ring[i] = first + (uid_t)i;
    head = 0;
    count = cap;
    td_log(TD_LOG_INFO, "calls of tools without a \"user\" each run as a uid of their own, %u-%u",
           (unsigned)first, (unsigned)last);
    return 0;
}

bool td_identity_active(void)
{
    return ring != NULL;
}

bool td_identity_in_range(uid_t uid)
{
    return ring && uid >= first && uid <= last;
}

int td_identity_take(uid_t *uid)
{
    if (!count)
        return -EAGAIN;
    *uid = ring[head];
    head = (head + 1) % cap;
    count--;
    td_fswatch_watch(*uid); /* a uid is a call: its file-system refusals are its own */
    return 0;
}

void td_identity_give(uid_t uid)
{
    if (!ring || uid < first || uid > last || count == cap)
        return;
    td_fswatch_unwatch(uid);
    ring[(head + count) % cap] = uid;
    count++;
}

void td_identity_close(void)
{
    free(ring);
    ring = NULL;
    cap = head = count = 0;
}
