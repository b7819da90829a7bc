/*
 * subject.h - the fronts a daemon trusts to name a subject (--subject-from):
 * an unprivileged process of its own (toolexec mcp --listen) that
 * authenticates its clients (OAuth bearer tokens) and runs each batch for
 * one of them, saying whose in the run request's "subject". Known by the
 * uid its socket connection has (SO_PEERCRED), never by what it says: any
 * other client naming a subject is refused.
 */
#ifndef TD_SUBJECT_H
#define TD_SUBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* How many --subject-from a daemon takes. */
#define TD_SUBJECT_FROM_MAX 16

/* --subject-from USER: a user name or a uid; repeatable. 0, or -1 with err
 * set (an unknown user, too many, the uid -1 a client whose credentials
 * could not be read counts as). */
int td_subject_from_add(const char *user, char *err, size_t errlen);
/* Whether a client of this uid may name a subject. */
bool td_subject_trusted(uid_t uid);

#endif
