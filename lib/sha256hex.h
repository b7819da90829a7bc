/*
 * sha256hex.h - the SHA-256 of some bytes as 64 lower-case hex digits
 * (nettle): the audit record's arguments digest, the audit file's chain
 * (daemon/observe/auditchain.c, the client's audit verify), the enforced
 * view's digest, the MCP front's requestState. Internal to libtoolexec
 * (not in the installed toolexec.h): shared by the daemon and the client.
 */
#ifndef TE_SHA256HEX_H
#define TE_SHA256HEX_H

#include <stddef.h>

#define TE_SHA256_HEX_LEN 64

/* hex gets TE_SHA256_HEX_LEN digits and a NUL. */
void te_sha256_hex(const void *data, size_t len, char *hex);

#endif
