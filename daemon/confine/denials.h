/*
 * denials.h - what a call's confinement refused it, kept as data for its
 * tool_execution_completed event ("denied"). The layers that refuse (the
 * seccomp notification listener, the egress proxy) and the watch on the
 * file system's refusals (fswatch.c) add entries to the call's list; the worker hands the list up
 * with the result. A denial never decides the outcome: the tool saw the error its system call got.
 */
#ifndef TD_DENIALS_H
#define TD_DENIALS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Entries kept per call; the rest are only counted ("denied_more"). */
#define TD_DENIALS_MAX 32
/* system call numbers below this are remembered as noted; x86-64 has ~460 */
#define TD_DENIALS_SEEN_MAX 1024
/* address families below this are remembered as noted; Linux has ~46 */
#define TD_DENIALS_AF_MAX 64

struct td_denials {
    json_t *list; /* array of distinct entries, NULL until the first */
    size_t more;  /* distinct entries past TD_DENIALS_MAX */
    /* file-system refusals, listed or not (fswatch.c): a flood of them is
     * one entry a path, at most TD_DENIALS_MAX, and this count */
    uint64_t fs_count;
    /* system call numbers noted already (sysnotify.c), of sys_arch: a tool
     * looping on a denied call pays no lookup per call */
    uint32_t sys_arch;
    unsigned char sys_seen[TD_DENIALS_SEEN_MAX / 8];
    /* the same for socket(), by address family (below TD_DENIALS_AF_MAX):
     * each family is an entry of its own */
    unsigned char af_seen[TD_DENIALS_AF_MAX / 8];
    /* learn mode (learn.h): where the listener and the proxy record what
     * they let through instead of refusing; NULL: the call is confined.
     * Its owner (the worker) frees it, not td_denials_clear(). */
    struct td_learn *learn;
};

/* Add entry (stolen), e.g. {"kind":"syscall","name":"ptrace"}. An entry
 * equal to one already kept is not added again: a tool that retries a
 * refused call a thousand times shows it once. */
void td_denials_add(struct td_denials *d, json_t *entry);
void td_denials_syscall(struct td_denials *d, const char *name);
/* A refused socket(): named with its address family, "socket(AF_PACKET)"
 * ("socket(99)" for one without a name), so the entry says what was
 * asked for rather than a bare "socket". name_out (len > 0) gets the name. */
void td_denials_socket(struct td_denials *d, uint64_t family, char *name_out, size_t len);
void td_denials_network(struct td_denials *d, const char *host, unsigned port);
/* A refused file-system access: path as the call named it, access one of
 * "read", "write", "execute", "create", "remove", rule what refused it. */
void td_denials_filesystem(struct td_denials *d, const char *path, const char *access,
                           const char *rule);
/* The fields a completed event gains, {"denied":[...]} and, past the cap,
 * "denied_more": n, and with file-system refusals their count,
 * "denied_filesystem": n; NULL when nothing was denied. */
json_t *td_denials_fields(const struct td_denials *d);
void td_denials_clear(struct td_denials *d);

#endif
