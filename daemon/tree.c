/*
 * tree.c - removing a call's directory tree, on the loop's threadpool.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "tree.h"

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(path) < 0 && errno != ENOENT)
        td_log(TD_LOG_WARN, "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

int td_remove_tree(const char *path)
{
    /* FTW_PHYS: never follow a symlink a tool planted out of its directory. */
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

struct remove_req {
    uv_work_t req;
    char *path;
};

static void remove_work(uv_work_t *req)
{
    struct remove_req *r = req->data;
    td_remove_tree(r->path);
}

static void remove_done(uv_work_t *req, int status)
{
    struct remove_req *r = req->data;
    free(r->path);
    free(r);
}

void td_remove_tree_async(char *path)
{
    /* Most tools leave their directory empty: one rmdir() here is cheaper
     * than a trip through the threadpool. */
    if (rmdir(path) == 0 || errno == ENOENT) {
        free(path);
        return;
    }
    struct remove_req *r = malloc(sizeof(*r));
    if (!r) {
        td_remove_tree(path);
        free(path);
        return;
    }
    r->path = path;
    r->req.data = r;
    if (uv_queue_work(td_loop, &r->req, remove_work, remove_done) < 0) {
        td_remove_tree(path);
        free(path);
        free(r);
    }
}
