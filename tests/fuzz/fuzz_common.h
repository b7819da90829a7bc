/*
 * fuzz_common.h - shared helpers for the libFuzzer targets in tests/fuzz/.
 * A failed invariant prints what broke and aborts, which libFuzzer reports
 * as a crash (and saves the input as an artifact).
 */
#ifndef TE_FUZZ_COMMON_H
#define TE_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "\n%s:%d: invariant failed: %s\n  ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static inline int te_fuzz_valid_utf8(const char *s)
{
    json_t *j = json_string(s); /* NULL when s is not valid UTF-8 */
    int ok = j != NULL;
    json_decref(j);
    return ok;
}

/* Error texts from libtoolexec end up as JSON strings (in "error" events and
 * tool-error messages), so they must be valid UTF-8: a message that is not
 * makes json_pack / te_tool_error_new fail and the daemon drop the event.
 * Build with -DTE_FUZZ_NO_UTF8_CHECK (FUZZ_CFLAGS) to tolerate that and look
 * for other bugs. */
#ifdef TE_FUZZ_NO_UTF8_CHECK
#define TE_FUZZ_STRICT_UTF8 0
#else
#define TE_FUZZ_STRICT_UTF8 1
#endif
static inline int te_fuzz_utf8_ok(const char *s)
{
    return !TE_FUZZ_STRICT_UTF8 || te_fuzz_valid_utf8(s);
}

#endif
