/*
 * randhex.h - random bytes from the kernel (getrandom), raw or as
 * lower-case hex: the daemon's call directories and template call names,
 * the MCP front's task handles, session ids and requestState key.
 * Internal to libtoolexec (not in the installed toolexec.h), like
 * sha256hex.h. getrandom reads no file and holds no descriptor, so it is
 * no I/O of the kind lib/ leaves to its callers.
 */
#ifndef TE_RANDHEX_H
#define TE_RANDHEX_H

#include <stddef.h>

/* Fill buf with len random bytes: 0, or -errno (EINTR retried). */
int te_random_bytes(void *buf, size_t len);
/* hex gets 2 * nbytes hex digits of nbytes random bytes, and a NUL:
 * 0, or -errno (hex then holds no id). */
int te_random_hex(char *hex, size_t nbytes);

#endif
