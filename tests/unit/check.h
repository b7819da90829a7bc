/* check.h - the few assertion macros the unit tests need; a failed check
 * prints where and why, and the test exits non-zero at the end. */
#ifndef TE_CHECK_H
#define TE_CHECK_H
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                   \
            fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, a_ ? a_ : "(null)",   \
                    b_ ? b_ : "(null)");                                                           \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_DONE()                                                                               \
    do {                                                                                           \
        if (check_failures)                                                                        \
            fprintf(stderr, "%d checks failed\n", check_failures);                                 \
        return check_failures ? 1 : 0;                                                             \
    } while (0)
#endif
