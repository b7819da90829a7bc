/*
 * workshared.h - a --work-dir that others may write to but not take over
 * (sticky, like /tmp): the daemon works in a directory of its own in it.
 */
#ifndef TD_WORKSHARED_H
#define TD_WORKSHARED_H

#include <stdbool.h>
#include <sys/stat.h>

/* Sticky, writable by group or others, owned by root or the daemon's uid:
 * nobody else can remove or rename what the daemon makes in it. */
bool td_workshared_is(const struct stat *st);
/* The daemon's own directory in the shared directory fd (at path), made
 * when missing (0711), never through a link: its descriptor, with its path
 * (malloc'd) in *sub; -1 logged. The caller checks its owner and mode. */
int td_workshared_open(int fd, const char *path, char **sub);

#endif
