/*
 * sha256hex.h - the SHA-256 of some bytes as 64 lower-case hex digits
 * (nettle): the audit record's arguments digest, the audit file's chain
 * (observe/auditchain.c, cli/audit.c), the enforced view's digest.
 */
#ifndef TD_SHA256HEX_H
#define TD_SHA256HEX_H

#include <stddef.h>

#define TD_SHA256_HEX_LEN 64

/* hex gets TD_SHA256_HEX_LEN digits and a NUL. */
void td_sha256_hex(const void *data, size_t len, char *hex);

#endif
