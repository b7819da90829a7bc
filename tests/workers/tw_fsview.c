/*
 * tw_fsview.c - testworker: file-system views (test_confine_fs):
 * "fs-probe" reads, lists, writes and stats the paths it is given.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testworker.h"

static json_t *attempt_write(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno_json(errno);
    ssize_t n = write(fd, "written\n", 8);
    int e = errno;
    close(fd);
    return n != 8 ? errno_json(e) : json_string("ok:written");
}

static json_t *attempt_stat(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno_json(errno);
    char buf[64];
    snprintf(buf, sizeof(buf), "ok:%o %lld", (unsigned)(st.st_mode & 07777), (long long)st.st_size);
    return json_string(buf);
}

/* fs-probe: for each of read, list, write (create and write a file), stat
 * ("ok:MODE SIZE"): the paths arguments name, each attempt "ok:..." or an
 * errno name; also "cwd". */
json_t *fs_probe(const json_t *args)
{
    json_t *out = json_object();
    const char *keys[] = {"read", "list", "write", "stat"};
    json_t *(*fns[])(const char *) = {attempt_read, attempt_list, attempt_write, attempt_stat};
    for (size_t k = 0; k < 4; k++) {
        json_t *list = json_object_get(args, keys[k]), *v, *res = json_array();
        size_t i;
        json_array_foreach(list, i, v)
        {
            json_array_append_new(res, fns[k](json_string_value(v)));
        }
        json_object_set_new(out, keys[k], res);
    }
    char cwd[4096];
    json_object_set_new(out, "cwd", json_string(getcwd(cwd, sizeof(cwd)) ? cwd : ""));
    return te_ok(out);
}
