/*
 * learn.h - learn mode: what a call touched, recorded
 * while it ran permissively, and the definition fragment that would let
 * the same calls run with no denials. This file and learn.c hold no
 * kernel part: the record and the builder of the proposal, testable as a
 * unit. learnsys.c reads a call's paths from its seccomp notifications and
 * says what the daemon's default view and filter already give.
 */
#ifndef TD_LEARN_H
#define TD_LEARN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* How a path was touched (bits): READ opened for reading; WRITE the file
 * itself written (O_WRONLY, O_RDWR, O_TRUNC, truncate); CREATE an entry
 * made or removed in its directory (O_CREAT, unlink, rename); MKDIR a
 * directory the call made. */
#define TD_LEARN_READ 1
#define TD_LEARN_WRITE 2
#define TD_LEARN_CREATE 4
#define TD_LEARN_MKDIR 8
/* (refusals only) the path executed */
#define TD_LEARN_EXEC 16

/* Distinct paths (and hosts) kept per record; the rest are counted, not
 * kept: a record, a tool's of all its calls too, stays bounded. */
#define TD_LEARN_MAX_PATHS 4096

struct td_learn;

struct td_learn *td_learn_new(void);
void td_learn_free(struct td_learn *l);
/* path absolute, as the call named it (resolved against its directory) */
void td_learn_path(struct td_learn *l, const char *path, unsigned how);
void td_learn_host(struct td_learn *l, const char *host, unsigned port);
void td_learn_syscall(struct td_learn *l, const char *name);
/* A file-system refusal of the call (denials.h's entry: path as the call
 * named it, access "read", "write", "execute", "create" or "remove", the
 * rule that refused it): proposed as a key that allows it where one does
 * and that is no wider than what was refused; an operator's "hide" never. */
void td_learn_refused(struct td_learn *l, const char *path, const char *access, const char *rule);
/* Each "filesystem" entry of a call's "denied" list (denials.h) into l. */
void td_learn_refusals(struct td_learn *l, const json_t *denied);
/* Add what src holds to dst (a tool's record of all its calls). */
void td_learn_merge(struct td_learn *dst, const struct td_learn *src);
/* The calls merged into a record (td_learn_merge counts each). */
unsigned td_learn_calls(const struct td_learn *l);

/* What a call gets without asking: the base the proposal is made against. */
struct td_learn_base {
    const char *const *hidden;  /* hidden by the view (and below), NULL-terminated */
    const char *const *shown;   /* with "root": "minimal": all that is shown; NULL: the host's */
    const char *const *private; /* a call's own (/dev, /proc): never proposed */
    const char *const *scratch; /* a call's own writable directories (/tmp): writes right
                                 * in them are not proposed, below them they are */
    const char *own;            /* the call's own directory's parent (the work directory) */
    const char *const *deny;    /* the filter's default denied system calls, NULL-terminated */
};

/* The fragment of a definition: {"filesystem": {"read": [...], "write":
 * [...]}, "network": {"allow": [...]} or false, and, when the calls made
 * system calls the filter refuses, "syscalls": "off" with "deny_syscalls":
 * the rest of the default set}. Paths are real (symbolic links resolved)
 * and existing, as a definition's must be. With refusals: the paths an
 * operator's "hide" refused in "hidden_on_purpose" (never proposed), and
 * the refusals no key allows, or none as narrow as what was refused, in
 * "not_proposed" ({"path", "access", "rule", "why"}). NULL: out of memory. */
json_t *td_learn_build(const struct td_learn *l, const struct td_learn_base *b);

#endif
