/*
 * sandboxrun_check.h - what the command's user must be able to do, checked
 * before it runs, or for its start directory once the call could not enter
 * it (sandboxrun_check.c).
 */
#ifndef TD_SANDBOXRUN_CHECK_H
#define TD_SANDBOXRUN_CHECK_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

/* The --write directories (fs's "write"; NULL: none) writable and run_dir
 * (NULL: none) enterable by uid/gid (switch false: ourselves), the way down to each too
 * with host_view (the command sees the host's file system, --learn). 0, or
 * -1 with what is wrong and what to do said on standard error. */
int td_sbx_check_access(json_t *fs, const char *run_dir, bool host_view, bool switch_user,
                        uid_t uid, gid_t gid);

#endif
