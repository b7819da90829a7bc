/*
 * tw_hostile.c - testworker: victim and hostile (test_hard_identity.py): a call
 * holding a secret, and one trying to reach other calls, the daemon and the
 * terminal. attempt_read and attempt_list also serve fs-probe (tw_fsview.c).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "testworker.h"

json_t *victim_mode(const json_t *args)
{
    const char *secret = getenv("VICTIM_SECRET");
    const char *ready = arg_str(args, "ready", NULL), *release = arg_str(args, "release", NULL);
    if (!secret || !ready || !release)
        return te_error(json_string("victim: needs $VICTIM_SECRET, ready and release"));
    append_line("secret.txt", secret);
    /* written aside and renamed: the test reads it as soon as it exists */
    char cwd[4096], tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", ready);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (!getcwd(cwd, sizeof(cwd)) || fd < 0)
        return te_error(json_string("victim: cannot say where it runs"));
    write_all(fd, cwd, strlen(cwd));
    close(fd);
    if (rename(tmp, ready) < 0)
        return te_error(json_string("victim: rename failed"));
    for (int i = 0; i < 3000 && access(release, F_OK) < 0; i++)
        sleep_ms(10);
    char buf[256] = "";
    fd = open("secret.txt", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    const char *answer = arg_str(args, "answer", "");
    return te_ok(json_pack("{s:s, s:s}", "answer", answer, "secret_file", buf));
}

static json_t *attempt_ok(const char *data, size_t n)
{
    char buf[300];
    snprintf(buf, sizeof(buf), "ok:%.*s", (int)(n > 256 ? 256 : n), data);
    for (char *p = buf; *p; p++)
        if (*p == '\0' || (unsigned char)*p < 32)
            *p = ' ';
    return json_string(buf);
}

json_t *attempt_read(const char *path)
{
    char buf[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno_json(errno);
    ssize_t n = read(fd, buf, sizeof(buf));
    int e = errno;
    close(fd);
    return n < 0 ? errno_json(e) : attempt_ok(buf, (size_t)n);
}

json_t *attempt_list(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return errno_json(errno);
    char buf[256] = "";
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            size_t len = strlen(buf), dn = strlen(de->d_name);
            if (len + dn + 2 > sizeof(buf))
                break;
            memcpy(buf + len, de->d_name, dn);
            memcpy(buf + len + dn, " ", 2);
        }
    closedir(d);
    return attempt_ok(buf, strlen(buf));
}

static json_t *attempt_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno_json(errno);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    close(fd);
    return rc == 0 ? json_string("ok:connected") : errno_json(e);
}

static json_t *attempt_pid(const char *what, long long pid)
{
    char path[64];
    if (strcmp(what, "kill") == 0)
        return kill((pid_t)pid, SIGKILL) == 0 ? json_string("ok:killed") : errno_json(errno);
    if (strcmp(what, "environ") == 0) {
        snprintf(path, sizeof(path), "/proc/%lld/environ", pid);
        return attempt_read(path);
    }
    snprintf(path, sizeof(path), "/proc/%lld/%s", pid,
             strcmp(what, "mem") == 0 ? "mem" : "oom_score_adj");
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return errno_json(errno);
    json_t *r = json_string("ok:opened");
    if (strcmp(what, "oom") == 0 && write(fd, "1000", 4) != 4) {
        json_decref(r);
        r = errno_json(errno);
    }
    close(fd);
    return r;
}

json_t *hostile_mode(const json_t *args)
{
    json_t *out = json_object();
    const char *pid_keys[] = {"environ", "mem", "kill", "oom"};
    for (size_t k = 0; k < 4; k++) {
        json_t *list = json_object_get(args, pid_keys[k]), *v, *res = json_array();
        size_t i;
        json_array_foreach(list, i, v)
        {
            json_array_append_new(res, attempt_pid(pid_keys[k], json_integer_value(v)));
        }
        json_object_set_new(out, pid_keys[k], res);
    }
    const char *path_keys[] = {"read", "list", "connect"};
    json_t *(*fns[])(const char *) = {attempt_read, attempt_list, attempt_connect};
    for (size_t k = 0; k < 3; k++) {
        json_t *list = json_object_get(args, path_keys[k]), *v, *res = json_array();
        size_t i;
        json_array_foreach(list, i, v)
        {
            json_array_append_new(res, fns[k](json_string_value(v)));
        }
        json_object_set_new(out, path_keys[k], res);
    }
    if (json_is_true(json_object_get(args, "tty"))) {
        int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
        json_object_set_new(out, "tty", fd < 0 ? errno_json(errno) : json_string("ok:opened"));
        if (fd >= 0) {
            char c = '#';
            json_object_set_new(out, "tiocsti",
                                ioctl(fd, TIOCSTI, &c) == 0 ? json_string("ok:injected")
                                                            : errno_json(errno));
            close(fd);
        }
    }
    if (json_is_true(json_object_get(args, "socketpair"))) {
        int sv[2], rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
        json_object_set_new(out, "socketpair", rc == 0 ? json_string("ok") : errno_json(errno));
        if (rc == 0)
            close(sv[0]), close(sv[1]);
    }
    json_t *procs = json_array();
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
            json_array_append_new(procs, json_integer(atoll(de->d_name)));
    if (d)
        closedir(d);
    json_object_set_new(out, "procs", procs);
    return te_ok(out);
}
