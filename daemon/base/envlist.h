/*
 * envlist.h - an environment (char **, NULL-ended) built one entry at a
 * time: it grows as entries are added, so no caller counts them ahead
 * (envlist.c).
 */
#ifndef TD_ENVLIST_H
#define TD_ENVLIST_H

#include <stdbool.h>
#include <stddef.h>

struct td_envlist {
    char **v;
    size_t n, cap;
    bool failed; /* out of memory once: td_envlist_finish() gives NULL */
};

/* Adds one "NAME=value" entry made from fmt. */
void td_envlist_add(struct td_envlist *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The entries, NULL-ended (the caller frees them with td_envlist_free),
 * or NULL if an add ran out of memory (everything freed). Leaves e empty. */
char **td_envlist_finish(struct td_envlist *e);
/* Frees a finished environment, each entry wiped first (NULL: nothing). */
void td_envlist_free(char **env);

#endif
