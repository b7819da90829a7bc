/*
 * cleanup.h - release on every exit of a scope (__attribute__((cleanup))):
 * a json_t *, a heap pointer or a descriptor declared with one of these is
 * released whichever return leaves the function, so a new early return
 * cannot leak it (a request freed only at the end of a 112-line
 * chain leaked on its one early return). To hand the value on instead,
 * take it out with te_steal() / te_steal_fd().
 *
 *     te_autojson json_t *req = json_loadb(...);
 *     te_autofree char *s = strdup(...);
 *     te_autofd int fd = open(...);
 *
 * Initialise every such variable where it is declared (NULL, -1): the
 * cleanup also runs for an exit before any assignment.
 */
#ifndef TE_CLEANUP_H
#define TE_CLEANUP_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

static inline void te_cleanup_free_(void *p)
{
    free(*(void **)p);
}

static inline void te_cleanup_json_(json_t **p)
{
    json_decref(*p); /* NULL is nothing */
}

/* errno survives: the caller may be returning -errno of an earlier call */
static inline void te_cleanup_fd_(int *fd)
{
    if (*fd >= 0) {
        int e = errno;
        close(*fd);
        errno = e;
    }
}

#define te_autofree __attribute__((cleanup(te_cleanup_free_)))
#define te_autojson __attribute__((cleanup(te_cleanup_json_)))
#define te_autofd __attribute__((cleanup(te_cleanup_fd_)))

static inline void *te_steal_ptr_(void *pp)
{
    void **p = pp;
    void *v = *p;
    *p = NULL;
    return v;
}

/* The pointer in *pp, which is left NULL (its cleanup then does nothing). */
#define te_steal(pp) ((__typeof__(*(pp)))te_steal_ptr_(pp))

/* The descriptor in *fd, which is left -1. */
static inline int te_steal_fd(int *fd)
{
    int v = *fd;
    *fd = -1;
    return v;
}

#endif
