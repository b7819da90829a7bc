/*
 * warmview.h - a warm call's file-system view (lib/warm.c): the view the
 * template's fork requests give (the daemon's step 7c), kept while they say
 * the same; the mounts each call's P1 makes of it (the template's directory
 * covered, fresh /tmp and /dev, the call's own directory bound back); and
 * its Landlock layer in P2. Internal to libtoolexec.
 */
#ifndef TE_WARMVIEW_H
#define TE_WARMVIEW_H

#include <jansson.h>

#include "warmcall.h"

/* A fork request's "view" (NULL: none) taken: 0, or -1 when it is not one.
 * The same for every call of a template: kept, with its plans (and a spare
 * made in it: te_warm_view_gen()), while the frames say the same. */
int te_warm_view_parse(const json_t *v);

/* One more at each change of the view. */
unsigned te_warm_view_gen(void);

/* In the template, before P1 is cloned: which mounts below each fresh path
 * a call's fresh tmpfs gets back (once per template; a failure is kept for
 * P1 to report). */
void te_warm_view_plan(void);

/* The template's directory (the cwd) under a tmpfs, into which the call's
 * own is bound back later (te_warm_view_call_dir()): the same view as a cold call's,
 * where the work directory is covered and only the call's directory is
 * bound back. Through descriptors (the new mount API), never by path: the
 * work directory's ancestors need not let the call's user through (a cold
 * call passes them as root). With every mount private first, the view's
 * fresh /tmp and /dev (refresh()) and a /proc of the call's namespace: all
 * of P1's mounts that are not the call's, so a spare P1 makes them before
 * its call is known. *here: the template's directory itself, below the
 * cover (the way to the call's); *cover: the cover as the call will see it,
 * reopened through a fresh /tmp cloned over it. */
int te_warm_view_base_mounts(int *here, int *cover, const struct te_warm_id *id);

/* The call's directory (dir, in the template's: here) bound into the cover
 * (te_warm_view_base_mounts()), which is read-only from then on, and made the cwd. 0,
 * -1 (a mount step failed) or -2 (the chdir), with errno set. */
int te_warm_view_call_dir(int here, int cover, const char *dir);

/* In P2, after the mounts: the view's Landlock layer (its write paths), or
 * without one te_warm_fence(ll_abi). 0, or -1 with errno. */
int te_warm_view_landlock(int ll_abi);

#endif
