/*
 * tree.h - removing a call's directory tree.
 */
#ifndef TD_TREE_H
#define TD_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Remove a directory tree without blocking the loop (threadpool). */
void td_remove_tree_async(char *path /* taken */);
int td_remove_tree(const char *path);

#endif
