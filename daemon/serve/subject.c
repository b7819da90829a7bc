/*
 * subject.c - the fronts trusted to name a subject (see subject.h).
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "subject.h"

static uid_t fronts[TD_SUBJECT_FROM_MAX];
static size_t nfronts;

int td_subject_from_add(const char *user, char *err, size_t errlen)
{
    uid_t uid;
    char *end;
    errno = 0;
    unsigned long n = strtoul(user, &end, 10);
    /* a name first: a user may well be called "1000" */
    struct passwd *pw = *user ? getpwnam(user) : NULL;
    if (pw)
        uid = pw->pw_uid;
    else if (*user && user[0] != '-' && !*end && !errno && n < (uid_t)-1)
        uid = (uid_t)n;
    else {
        /* (uid_t)-1 is what a client whose SO_PEERCRED failed counts as */
        snprintf(err, errlen, "\"%.64s\": no such user, nor a uid below 4294967295", user);
        return -1;
    }
    for (size_t i = 0; i < nfronts; i++)
        if (fronts[i] == uid)
            return 0;
    if (nfronts == TD_SUBJECT_FROM_MAX) {
        snprintf(err, errlen, "at most %d users", TD_SUBJECT_FROM_MAX);
        return -1;
    }
    fronts[nfronts++] = uid;
    return 0;
}

bool td_subject_trusted(uid_t uid)
{
    for (size_t i = 0; i < nfronts; i++)
        if (fronts[i] == uid)
            return true;
    return false;
}
