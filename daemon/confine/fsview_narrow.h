/*
 * fsview_narrow.h - a view narrowed by a run request's "policy".
 */
#ifndef TD_FSVIEW_NARROW_H
#define TD_FSVIEW_NARROW_H

#include <jansson.h>

struct td_fsview;

/* v (tool's) narrowed by pol, the policy's "filesystem" object: "write" a
 * subset of v's writable paths (or beneath one), "read" likewise of its
 * read and write paths (a minimal root only), "hide" added. 0 with a view
 * of its own in *out, or -EINVAL with why in err, naming key (e.g.
 * "calls[0].policy") and the entry. */
int td_fsview_narrow(const struct td_fsview *v, const char *tool, json_t *pol, const char *key,
                     struct td_fsview **out, char *err, size_t errlen);

#endif
