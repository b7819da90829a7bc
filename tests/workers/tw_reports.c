/*
 * tw_reports.c - testworker: what a call's process sees of itself: its open
 * descriptors ("fds"), environment and working directory ("env"), the process
 * attributes the daemon set up ("isolation"), its user and groups ("identity").
 */

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testworker.h"

extern char **environ;

json_t *list_fds(void)
{
    json_t *fds = json_array();
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return fds;
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        if (fd == self)
            continue;
        json_array_append_new(fds, json_integer(fd));
    }
    closedir(d);
    /* readdir order is already ascending for /proc/self/fd */
    return fds;
}

/* "SigBlk:\t0000000000000000" -> "0000000000000000" */
static json_t *status_field(const char *name)
{
    char line[256];
    size_t nlen = strlen(name);
    json_t *out = json_null();
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return out;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, name, nlen) == 0 && line[nlen] == ':') {
            char *v = line + nlen + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = '\0';
            out = json_string(v);
            break;
        }
    }
    fclose(f);
    return out;
}

json_t *env_report(void)
{
    json_t *env = json_object();
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char *key = strndup(*e, (size_t)(eq - *e));
        json_object_set_new(env, key, json_string(eq + 1));
        free(key);
    }
    char cwd[4096];
    json_t *entries = json_array();
    DIR *d = opendir(".");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                json_array_append_new(entries, json_string(e->d_name));
        }
        closedir(d);
    }
    int fd = open("scratch", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    bool writable = fd >= 0;
    if (fd >= 0)
        close(fd);
    struct stat st;
    json_t *mode = json_null();
    if (stat(".", &st) == 0)
        mode = json_integer(st.st_mode & 07777);
    return json_pack("{s:o, s:s?, s:o, s:b, s:o}", "env", env, "cwd",
                     getcwd(cwd, sizeof cwd) ? cwd : NULL, "cwd_entries", entries, "cwd_writable",
                     writable, "cwd_mode", mode);
}

json_t *isolation_report(void)
{
    int pdeath = -1;
    prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0);
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    struct rlimit rl;
    long long core = -2;
    if (getrlimit(RLIMIT_CORE, &rl) == 0)
        core = rl.rlim_cur == RLIM_INFINITY ? -1 : (long long)rl.rlim_cur;
    char ns[128];
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = '\0';
    return json_pack("{s:I, s:I, s:I, s:I, s:i, s:i, s:I, s:o, s:o, s:o, s:s, s:I}", "pid",
                     (json_int_t)getpid(), "ppid", (json_int_t)getppid(), "pgid",
                     (json_int_t)getpgid(0), "sid", (json_int_t)getsid(0), "pdeathsig", pdeath,
                     "no_new_privs", nnp, "core_limit", (json_int_t)core, "sigblk",
                     status_field("SigBlk"), "sigign", status_field("SigIgn"), "fds", list_fds(),
                     "pidns", ns, "uid", (json_int_t)getuid());
}

json_t *identity_report(void)
{
    gid_t groups[256];
    int n = getgroups(256, groups);
    json_t *list = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(list, json_integer((json_int_t)groups[i]));
    return json_pack("{s:I, s:I, s:I, s:I, s:o}", "uid", (json_int_t)getuid(), "euid",
                     (json_int_t)geteuid(), "gid", (json_int_t)getgid(), "egid",
                     (json_int_t)getegid(), "groups", list);
}
