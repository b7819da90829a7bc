/*
 * fsview_narrow.h - a view narrowed by a run request's "policy".
 */
#ifndef TD_FSVIEW_NARROW_H
#define TD_FSVIEW_NARROW_H

#include <stddef.h>

#include <jansson.h>

struct td_fsview;

/* v (tool's) narrowed by pol, the policy's "filesystem" object: "write" a
 * subset of v's writable paths (or beneath one), "read" likewise of its
 * read and write paths (a minimal root only), "hide" added (of what it
 * sees). tools: the tools directory its definition came from, resolved
 * (every view hides it; NULL: none). String work only, no look-up (the
 * spawn refuses a path that is or passes a symbolic link). 0 with a view
 * of its own in *out, or < 0 with why in err, naming key (e.g.
 * "calls[0].policy") and the entry as the client sent it. */
int td_fsview_narrow(const struct td_fsview *v, const char *tool, const char *tools, json_t *pol,
                     const char *key, struct td_fsview **out, char *err, size_t errlen);

/* in normalised by string work alone (no look-up): "//" and "/./" dropped,
 * each "/.." taking the component before it (none above the root), no
 * trailing "/"; "/" stays "/". NULL with the result in out, or why not
 * (not absolute, too long for out or PATH_MAX). */
const char *td_path_lexical(const char *in, char *out, size_t outlen);

#endif
