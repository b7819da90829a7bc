/*
 * fsview.h - a call's view of the file system: the "filesystem" key of a
 * tool definition, the daemon's default (--filesystem) and the plan the
 * worker's child runs in its mount namespace (sandbox.h, step 7c).
 */
#ifndef TD_FSVIEW_H
#define TD_FSVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "sandbox.h"

struct td_fsprep;
struct td_fsview {
    bool dflt;                    /* no "filesystem": the daemon's --filesystem */
    bool host;                    /* "filesystem": "host": no view of its own */
    bool minimal;                 /* "root": "minimal" */
    char **read, **write, **hide; /* NULL-terminated; absolute, normalised, existing
                                     (a narrowed view's: normalised only) */
    struct td_fsprep *prep;       /* the plan, made at the first call */
    bool proxy_ca;                /* its calls trust the proxy's CA (proxy_tls.h) */
    bool lexical; /* td_fsview_parse_lexical's: its paths never looked up (the plan's
                     covers and exposures made as the child finds them) */
};
/* Set at start (main.c): the bundle of the system's roots and the egress
 * proxy's CA, bound over the system bundle in the view of a tool with
 * proxy_ca; and the credentials directory, hidden in every view. */
extern const char *td_fsview_ca_bundle;
extern const char *td_fsview_secret_dir;
/* What a call may put in its /tmp, and in /dev (its /dev/shm): the
 * tmpfs options, also sent to warm templates (template.c) */
#define TD_FS_TMP_OPTS "mode=1777,size=64m,nr_inodes=16384"
#define TD_FS_DEV_OPTS "mode=0755,size=16m,nr_inodes=4096"
/* --filesystem: the view of tools whose definition has no "filesystem" */
enum td_fs_default { TD_FS_VIEW, TD_FS_MINIMAL, TD_FS_HOST };
extern enum td_fs_default td_fs_default;

/* What the default view hides (NULL-terminated), besides the tools and
 * work directories and the daemon's sockets. */
extern const char *const td_fs_hidden[];

/* "filesystem" of definition file (v as read, NULL: none); 0 with *out, or
 * -EINVAL with a message naming file and key in err. */
int td_fsview_parse(const char *file, json_t *v, struct td_fsview **out, char *err, size_t errlen);
/* The same for a view whose paths were checked already against another
 * (fsview_narrow.c): each only absolute and normalised as a string, never
 * looked up in the file system (the spawn opens each without following a
 * symbolic link). */
int td_fsview_parse_lexical(const char *key, json_t *v, struct td_fsview **out, char *err,
                            size_t errlen);
void td_fsview_free(struct td_fsview *v);
/* The view of a tool (v: its "filesystem"; cmd its program, shown even in
 * the hidden tools directory or a minimal root, as is init, toolexecd-init):
 * in *plan
 * the plan for its child's mount namespace (NULL: the host's, unchanged),
 * in *ll_write what Landlock lets it write besides its directory (NULL: no
 * Landlock). mount_ns: whether calls get a mount namespace (containment).
 * Made at the first call and kept; 0 or -ENOMEM. */
int td_fsview_plan(struct td_fsview *v, const char *cmd, const char *init, bool mount_ns,
                   const struct td_fsplan **plan, const char *const **ll_write);
/* Does the tool see the host's file system ("host", or --filesystem host
 * for a definition without the key)? */
bool td_fsview_is_host(const struct td_fsview *v);
/* Does a call of a tool with view v see path (absolute, symbolic links
 * resolved)? NULL when it does; else what hides it: a hidden path, "/tmp"
 * or "/dev" (a call's own), or "the minimal root". fsview_sees.c. */
const char *td_fsview_hides(const struct td_fsview *v, const char *path);
/* The tools directory as v's plan hides it, resolved once when the plan
 * was made (NULL: it was not there); *known false: no plan yet. */
const char *td_fsview_planned_tools(const struct td_fsview *v, bool *known);
/* The Landlock ABI this kernel offers (0: none), probed once. */
int td_fsview_landlock_abi(void);
/* The paths every view hides (n of them), for learn mode's base. */
const char *const *td_fsview_default_hidden(size_t *n);
/* Whether calls get a mount namespace, so a view (td_fsview_setup's). */
extern bool td_fsview_mount_ns;
/* At start: say what calls see (a warning where it is the host's). */
void td_fsview_setup(bool mount_ns);

#endif
