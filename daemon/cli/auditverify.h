/*
 * auditverify.h - the check of the audit file's hash chain, line by line
 * (auditverify.c): what `toolexec audit verify` runs on each line, and the
 * fuzz target fuzz_audit too. No file I/O: the caller reads the lines.
 */
#ifndef CLI_AUDITVERIFY_H
#define CLI_AUDITVERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "sha256hex.h"

/* Where the chain stands: the hash the next line must carry and whose
 * line that is (for the messages). */
struct auditverify {
    FILE *out; /* where each problem is printed, one line each */
    char expect[TE_SHA256_HEX_LEN + 1];
    char where[512]; /* "FILE:LINE", empty before the first line */
    unsigned long breaks, records;
    const char *head; /* --head: a hash some line must have, or NULL */
    bool head_seen;
};

/* A chain that starts from 64 zeros (a fresh log), printing to out. */
void auditverify_init(struct auditverify *v, FILE *out);
/* Also look for the line whose SHA-256 is head (a chain head the daemon
 * logged; 64 zeros: the empty log's). */
void auditverify_head(struct auditverify *v, const char *head);
/* One line of path (line number lineno): its bytes without the newline;
 * ended says whether a newline followed it. */
void auditverify_line(struct auditverify *v, const char *path, unsigned long lineno,
                      const char *line, size_t len, bool ended);

#endif
