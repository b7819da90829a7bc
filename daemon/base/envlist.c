/*
 * envlist.c - an environment built entry by entry (envlist.h). The array
 * doubles as it fills, always with room for the NULL that ends it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envlist.h"

void td_envlist_add(struct td_envlist *e, const char *fmt, ...)
{
    if (e->failed)
        return;
    if (e->n + 1 >= e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        char **v = realloc(e->v, cap * sizeof(*v));
        if (!v) {
            e->failed = true;
            return;
        }
        e->v = v;
        e->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&e->v[e->n], fmt, ap);
    va_end(ap);
    if (rc < 0)
        e->failed = true;
    else
        e->n++;
}

char **td_envlist_finish(struct td_envlist *e)
{
    char **v = e->v;
    if (e->failed || !v) {
        for (size_t i = 0; i < e->n; i++) {
            explicit_bzero(v[i], strlen(v[i]));
            free(v[i]);
        }
        free(v);
        v = e->failed ? NULL : calloc(1, sizeof(*v));
    } else {
        v[e->n] = NULL;
    }
    memset(e, 0, sizeof(*e));
    return v;
}

void td_envlist_free(char **env)
{
    /* wiped: a call's environment may hold a credential (env_credentials) */
    for (char **p = env; p && *p; p++) {
        explicit_bzero(*p, strlen(*p));
        free(*p);
    }
    free(env);
}
