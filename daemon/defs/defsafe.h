/*
 * defsafe.h - may anyone but root and the daemon change a definition, or
 * the directory of definitions?
 */
#ifndef TD_DEFSAFE_H
#define TD_DEFSAFE_H

#include <stddef.h>
#include <sys/stat.h>

/* NULL when nobody but root and the daemon's uid can change st (fd, when
 * >= 0, is open on it); else why not, written into why. */
const char *td_defs_unsafe(const struct stat *st, int fd, char *why, size_t len);

#endif
