/*
 * tw_calldir.c - testworker: call directories (test_hard_calldir): a tree to
 * remove ("make-tree"), a swap racing its removal ("swap-race"), another call's
 * directory probed ("probe-dir").
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testworker.h"

static void write_file_at(int dfd, const char *name, const char *text)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        write_all(fd, text, strlen(text));
        close(fd);
    }
}

/* path appears atomically, holding text */
static int publish(const char *path, const char *text)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    write_file_at(AT_FDCWD, tmp, text);
    return rename(tmp, path);
}

static int wait_path(const char *path)
{
    for (int i = 0; i < 30000; i++) {
        if (access(path, F_OK) == 0)
            return 0;
        sleep_ms(1);
    }
    return -1;
}

json_t *make_tree(const json_t *args)
{
    char name[64];
    long long deep = arg_int(args, "deep", 0), wide = arg_int(args, "wide", 0);
    if (deep > 0) {
        int fd = open(".", O_RDONLY | O_DIRECTORY);
        for (long long i = 0; i < deep && fd >= 0; i++) {
            mkdirat(fd, "d", 0755);
            int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
            close(fd);
            fd = next;
        }
        if (fd < 0)
            return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
        write_file_at(fd, "bottom", "deep");
        close(fd);
    }
    if (wide > 0) {
        mkdir("w", 0755);
        int fd = open("w", O_RDONLY | O_DIRECTORY);
        for (long long i = 0; i < wide && fd >= 0; i++) {
            snprintf(name, sizeof(name), "f%lld", i);
            int f = openat(fd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (f < 0)
                return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
            close(f);
        }
        if (fd >= 0)
            close(fd);
    }
    const char *bait = arg_str(args, "bait", NULL);
    if (bait) {
        mkdir("a", 0755);
        int fd = open("a", O_RDONLY | O_DIRECTORY);
        for (long long i = 0; fd >= 0 && i < arg_int(args, "fillers", 1000); i++) {
            snprintf(name, sizeof(name), "x%05lld", i);
            write_file_at(fd, name, "filler");
        }
        if (fd >= 0) {
            write_file_at(fd, bait, "bait");
            close(fd);
        }
    }
    const char *secret = arg_str(args, "secret", NULL);
    if (secret)
        write_file_at(AT_FDCWD, "secret.txt", secret);
    json_t *locked = json_object_get(args, "locked");
    if (json_is_true(locked)) {
        mkdir("l", 0755);
        write_file_at(AT_FDCWD, "l/inside", "locked in");
        chmod("l", 0);
    }
    char cwd[4096];
    if (!getcwd(cwd, sizeof(cwd)))
        return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
    const char *report = arg_str(args, "report", NULL);
    if (report && publish(report, cwd) < 0)
        return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
    const char *go = arg_str(args, "go", NULL);
    if (go && wait_path(go) < 0)
        return te_error(json_string("no go"));
    if (strcmp(arg_str(args, "then", "ok"), "sleep") == 0)
        for (;;)
            pause();
    return te_ok(json_pack("{s:s}", "cwd", cwd));
}

json_t *swap_race(const json_t *args)
{
    const char *target = arg_str(args, "target", ""), *link = arg_str(args, "link", "/");
    char dir[4096] = "", a[4200], real[4200], probe[4300];
    if (wait_path(target) < 0)
        return te_error(json_string("no target"));
    FILE *f = fopen(target, "r");
    if (!f || !fgets(dir, sizeof(dir), f))
        return te_error(json_string("unreadable target"));
    fclose(f);
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(real, sizeof(real), "%s/a.real", dir);
    /* watch 64 fillers: the first to go says the walk is inside a/ */
    int afd = open(a, O_RDONLY | O_DIRECTORY);
    if (afd < 0)
        return te_error(json_pack("{s:o}", "errno", errno_json(errno)));
    if (publish(arg_str(args, "ready", "/dev/null/x"), "ready") < 0)
        return te_error(json_string("cannot publish ready"));
    time_t end = time(NULL) + arg_int(args, "seconds", 10);
    bool swapped = false;
    while (time(NULL) < end && !swapped) {
        for (int i = 0; i < 64 && !swapped; i++) {
            snprintf(probe, sizeof(probe), "x%05d", i);
            if (faccessat(afd, probe, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
                swapped = rename(a, real) == 0 && symlink(link, a) == 0;
                break;
            }
        }
        if (access(dir, F_OK) < 0)
            break;
    }
    close(afd);
    while (time(NULL) < end && access(dir, F_OK) == 0)
        sleep_ms(1);
    return te_ok(json_pack("{s:b}", "swapped", swapped));
}

static json_t *errno_or_null(int ok)
{
    return ok ? json_null() : errno_json(errno);
}

json_t *probe_dir(const json_t *args)
{
    const char *work = arg_str(args, "work", "/nonexistent"), *other = arg_str(args, "other", "");
    char path[4200], cwd[4096];
    DIR *d = opendir(work);
    json_t *list_work = errno_or_null(d != NULL);
    if (d)
        closedir(d);
    d = opendir(other);
    json_t *list_other = errno_or_null(d != NULL);
    if (d)
        closedir(d);
    snprintf(path, sizeof(path), "%s/secret.txt", other);
    int fd = open(path, O_RDONLY);
    json_t *read_other = errno_or_null(fd >= 0);
    if (fd >= 0)
        close(fd);
    snprintf(path, sizeof(path), "%s/planted.txt", other);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    json_t *write_other = errno_or_null(fd >= 0);
    if (fd >= 0)
        close(fd);
    return te_ok(json_pack("{s:s, s:o, s:o, s:o, s:o}", "cwd", getcwd(cwd, sizeof(cwd)) ? cwd : "",
                           "list_work", list_work, "list_other", list_other, "read_other",
                           read_other, "write_other", write_other));
}
