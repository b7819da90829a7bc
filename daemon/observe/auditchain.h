/*
 * auditchain.h - the audit file (--audit-file): each call's record as one
 * JSON line carrying "prev_sha256", the SHA-256 of the line before it, a
 * hash chain that continues across rotation and restarts (auditchain.c).
 */
#ifndef TD_AUDITCHAIN_H
#define TD_AUDITCHAIN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* The chain's start, in a fresh file with nothing before it. */
#define TD_AUDITCHAIN_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

/* Opens path for appending (created 0600); its last line, if any, is where
 * the chain goes on from. -1 with a message in err. */
int td_auditchain_open(const char *path, char *err, size_t errlen);
/* SIGHUP: the file again by its name (logrotate moved it away); the chain
 * goes on from the last record written. A non-empty file whose last line
 * is not that record first gets a record {"record": "chain_break",
 * "expected_prev": the head, "found_prev": the file's last line's hash}. */
void td_auditchain_reopen(void);
/* At the end: logs the chain head, closes the file. */
void td_auditchain_close(void);
/* Whether records go to an audit file. */
bool td_auditchain_on(void);
/* Appends one record: ts, batch, call, fields' members and prev_sha256. */
void td_auditchain_append(const char *batch, const char *call, const json_t *fields);

#endif
