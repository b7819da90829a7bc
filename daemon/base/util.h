/*
 * util.h - small JSON and file helpers (a leaf).
 */
#ifndef TD_UTIL_H
#define TD_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <dirent.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

/* A JSON string from arbitrary bytes: invalid UTF-8 becomes U+FFFD. */
json_t *td_json_text(const char *p, size_t n);
/* {"encoding": "base64", "data", "size_bytes"} for bytes that are not text. */
json_t *td_base64_value(const char *p, size_t n);

/* text written whole to dirfd/file (a cgroup or /proc file: one write);
 * 0 or -errno. */
int td_write_at(int dirfd, const char *file, const char *text);

/* dirfd's entries from the start, on a close-on-exec copy of it (dirfd
 * stays open, closedir() closes the copy); NULL with errno. */
DIR *td_opendir_dup(int dirfd);

/* err (errlen bytes) set from fmt; returns -EINVAL: the one line a parser
 * ends a bad input with (`return td_fail(err, errlen, "%s: ...", key);`). */
int td_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The one of words[0..n) that word was likely meant to be, for a "did you
 * mean" hint: the same but for case, one letter added, dropped, changed or
 * two swapped, or one a prefix of the other at a '_' ("timeout" for
 * "timeout_ms"); NULL when none is or more than one is. */
const char *td_near_word(const char *word, const char *const *words, size_t n);
/* Our own program: NULL for /proc/self/exe; the engine's path where the
 * engine runs as a module in another program (sandboxrun_module.c), whose
 * helpers are beside the engine, not beside that program. */
extern const char *td_self_exe;
/* One of the daemon's helper programs (toolexecd-init,
 * toolexec-mcp-bridge): beside our own program (td_self_exe; a build
 * tree), else installed in dir (TD_LIBEXECDIR); NULL (malloc'd otherwise)
 * when neither is there. */
char *td_libexec_find(const char *name, const char *dir);

/* Our effective uid, asked of the kernel once: it never changes, and
 * geteuid() is a system call on a call's path (a few a call). */
uid_t td_euid(void);

#endif
