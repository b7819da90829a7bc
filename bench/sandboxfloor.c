/*
 * sandboxfloor.c - the confinement floor: a call's sandbox built
 * by the daemon's own code (spawndesc.c, then sandbox.c, as every cold call
 * and `toolexecd --sandbox-run` are), started in a plain loop: no event
 * loop, no spawner, no messages, no client. What is left above this in a
 * daemon's call is the daemon's; this is what the confinement costs.
 *
 *   sandboxfloor [LAYER...] WORKER CALLS CONCURRENCY
 *
 * A root daemon's defaults, set up as main.c does: each call a uid of its
 * own (the default --call-uids range) and a directory of its own, in PID,
 * mount and IPC namespaces with the default view, Landlock, the default
 * seccomp filter with its listener, rlimits, toolexecd-init as PID 1 (and
 * a cgroup where the daemon would make one), started as the spawner starts
 * them (its bounding set emptied once: td_sandbox_bset_once). The request frame is written,
 * the response read to EOF and checked ({"ok":{"x":1}}), the call over
 * when its init reports the tool's status, as the daemon's call is; inits
 * are reaped as they go without waiting for the namespaces' teardown, as
 * the daemon does (bench.c's BENCH_NS loop the same). Prints
 * "us_per_call N", the loop's time alone (not the set-up's probes), and
 * "us_start_per_call N", of it the time from clone() to the child's exec
 * (the spawner's own time for a call, which no other call overlaps).
 *
 * LAYER, one layer changed at a time (bench/floor_layers.py runs each):
 *   --no-landlock   no Landlock ruleset (step 11a)
 *   --no-seccomp    no system-call filter, no listener (11b)
 *   --host-view     the host's file system, work dir covered (7b), not the
 *                   default view (7c): "filesystem": "host"
 *   --uid tool      the tool's user (nobody) for every call: --call-uids no
 *   --uid daemon    no user switch at all (root, bounding set kept)
 *   --no-init       the tool is PID 1 itself, no toolexecd-init
 *   --net-none      a network namespace per call ("network": false); the
 *                   default ("network" unset, --default-network yes) has none
 *   --bset-per-call the bounding set emptied in each call's child (step 9b)
 *                   rather than once for this loop, as the spawner does
 *   --filter FILE   this classic BPF (struct sock_filter as the kernel takes
 *                   them) in place of the default filter, with its listener:
 *                   another shape of it to compare (bench/seccomp_attach)
 * Root only. Meant to be run by hand (bench/spawn.py, floor_layers.py),
 * never as a timed test.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calldir.h"
#include "cgroup.h"
#include "config.h"
#include "containment.h"
#include "identity.h"
#include "log.h"
#include "registry.h"
#include "sandbox.h"
#include "spawndesc.h"
#include "sysfilter.h"
#include "toolexec.h"

static struct {
    bool no_landlock, no_seccomp, host_view, no_init, net_none, bset_per_call;
    enum { UID_POOL, UID_TOOL, UID_DAEMON } uid;
    struct sock_fprog filter; /* --filter FILE; len 0: the default's */
} off;

static const char request[] = "{\"tool\":\"echo\",\"arguments\":{\"x\":1}}";

struct slot {
    pid_t pid;
    int in, out, err, report;
    int handed[TD_HAND_COUNT];
    uid_t uid; /* taken from the pool; (uid_t)-1: none */
    char *dir;
    struct td_cgroup *cg;
    bool out_eof, rep_done;
    size_t got;
    char buf[512];
    struct td_report rep;
};

/* inits not reaped yet, with the uid each gives back */
static struct {
    pid_t pid;
    uid_t uid;
} * unreaped;
static size_t n_unreaped, cap_unreaped;
static int work_fd = -1;
static char **env;
/* time in td_sandbox_start(), the clone to the child's exec: the spawner's
 * own time for a call (CLONE_VFORK suspends it until then) */
static double in_start;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "sandboxfloor: %s: %s\n", what, why);
    exit(1);
}

static void reap(int flags)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, flags)) > 0)
        for (size_t i = 0; i < n_unreaped; i++)
            if (unreaped[i].pid == pid) {
                if (unreaped[i].uid != (uid_t)-1)
                    td_identity_give(unreaped[i].uid);
                unreaped[i] = unreaped[--n_unreaped];
                break;
            }
}

/* The daemon's worker_start.c, cold path, without its loop: the uid, the
 * directory, the cgroup, the description, the pipes, the start, the
 * request. */
static void start(struct td_tool *t, struct slot *s)
{
    const char *what = "call uid";
    uid_t uid = t->uid;
    gid_t gid = t->gid;
    s->uid = (uid_t)-1;
    int rc = 0;
    if (off.uid == UID_POOL) {
        if ((rc = td_identity_take(&s->uid)) < 0)
            die(what, strerror(-rc));
        uid = s->uid;
        gid = (gid_t)s->uid;
    }
    if (off.uid == UID_DAEMON)
        uid = (uid_t)-1, gid = (gid_t)-1;
    if ((rc = td_calldir_make(uid, gid, &s->dir, &what)) < 0)
        die(what, strerror(-rc));
    struct td_limits lim;
    if ((rc = td_spawndesc_cgroup(t, 0, &lim, &s->cg)) < 0)
        die("cgroup", strerror(-rc));
    struct td_spawndesc d;
    if ((rc = td_spawndesc_build(&d, TD_SPAWN_CALL, t, &lim, s->cg, s->dir, uid, gid, env, &what)) <
        0)
        die(what, strerror(-rc));
    /* one layer off: the description changed where sandbox.c reads it */
    if (off.no_landlock)
        d.sp.landlock_abi = 0;
    if (off.filter.len && d.sp.filter)
        d.sp.filter = &off.filter;
    if (off.no_seccomp) {
        d.sp.filter = NULL;
        d.sp.filter_notify = false;
        d.sp.hand_over = d.sp.proxy_port > 0;
    }
    if (off.host_view)
        d.sp.fs = NULL;
    if (off.no_init) {
        d.sp.argv = t->argv;
        d.sp.init = false;
    }
    if (off.net_none)
        d.sp.ns_flags |= CLONE_NEWNET;
    struct td_child c;
    int theirs[TD_SANDBOX_ENDS];
    if ((rc = td_sandbox_pipes(false, &c, theirs)) < 0)
        die("pipe", strerror(-rc));
    double t0 = now();
    pid_t pid = td_sandbox_start(&d.sp, theirs, s->handed, &what);
    in_start += now() - t0;
    if (pid < 0)
        die(what, strerror((int)-pid));
    td_spawndesc_free(&d);
    /* Its seccomp listener, made and handed up as the daemon's is, closed
     * at once: no loop here answers it (sysnotify.c), and a call's denied
     * system call then fails (ENOSYS) rather than wait for an answer. */
    if (s->handed[TD_HAND_SECCOMP] >= 0) {
        close(s->handed[TD_HAND_SECCOMP]);
        s->handed[TD_HAND_SECCOMP] = -1;
    }
    s->pid = pid;
    s->in = c.in, s->out = c.out, s->err = c.err, s->report = c.report;
    s->out_eof = s->rep_done = false;
    s->got = 0;
    s->rep = (struct td_report){0};
    uint8_t hdr[4];
    te_frame_header(sizeof(request) - 1, hdr);
    if (write(s->in, hdr, 4) != 4 || write(s->in, request, sizeof(request) - 1) < 0)
        die("write", strerror(errno));
    close(s->in);
}

/* Its response checked, its ends closed, its directory removed, its init
 * left to be reaped when it is gone. */
static void finish(struct slot *s)
{
    uint32_t len = s->got >= 4 ? (uint32_t)((uint8_t)s->buf[0] << 24 | (uint8_t)s->buf[1] << 16 |
                                            (uint8_t)s->buf[2] << 8 | (uint8_t)s->buf[3])
                               : 0;
    s->buf[s->got < sizeof(s->buf) ? s->got : sizeof(s->buf) - 1] = '\0';
    if (s->rep.failed)
        die(s->rep.step ? s->rep.step : "set-up", strerror(s->rep.err));
    if (s->got < 4 || len != s->got - 4 || !strstr(s->buf + 4, "\"ok\":{\"x\":1}"))
        die("response", s->got > 4 ? s->buf + 4 : "(none)");
    close(s->out), close(s->err), close(s->report);
    for (int k = 0; k < TD_HAND_COUNT; k++)
        if (s->handed[k] >= 0)
            close(s->handed[k]);
    if (td_remove_tree_at(work_fd, strrchr(s->dir, '/') + 1) < 0)
        die(s->dir, "not removed");
    free(s->dir);
    td_cgroup_release(s->cg);
    if (n_unreaped == cap_unreaped) {
        cap_unreaped = cap_unreaped ? 2 * cap_unreaped : 64;
        unreaped = realloc(unreaped, cap_unreaped * sizeof(*unreaped));
        if (!unreaped)
            die("malloc", strerror(ENOMEM));
    }
    unreaped[n_unreaped].pid = s->pid;
    unreaped[n_unreaped++].uid = s->uid;
    reap(WNOHANG);
}

static double floor_loop(struct td_tool *t, int calls, int conc)
{
    struct slot *slots = calloc((size_t)conc, sizeof(*slots));
    struct pollfd *pfd = calloc(2 * (size_t)conc, sizeof(*pfd));
    if (!slots || !pfd)
        die("malloc", strerror(ENOMEM));
    int started = 0, done = 0;
    double t0 = now();
    for (int i = 0; i < conc; i++) {
        slots[i].pid = 0;
        if (started < calls) {
            start(t, &slots[i]);
            started++;
        }
    }
    while (done < calls) {
        for (int i = 0; i < conc; i++) {
            struct slot *s = &slots[i];
            bool on = s->pid > 0;
            pfd[2 * i] = (struct pollfd){.fd = on && !s->out_eof ? s->out : -1, .events = POLLIN};
            pfd[2 * i + 1] =
                (struct pollfd){.fd = on && !s->rep_done ? s->report : -1, .events = POLLIN};
        }
        if (poll(pfd, 2 * (nfds_t)conc, -1) < 0 && errno != EINTR)
            die("poll", strerror(errno));
        for (int i = 0; i < conc; i++) {
            struct slot *s = &slots[i];
            if (s->pid <= 0)
                continue;
            if (pfd[2 * i].revents) {
                char tmp[4096];
                ssize_t n = read(s->out, tmp, sizeof(tmp));
                if (n > 0) {
                    size_t room = sizeof(s->buf) - 1 - s->got;
                    size_t k = (size_t)n < room ? (size_t)n : room;
                    memcpy(s->buf + s->got, tmp, k);
                    s->got += k;
                } else if (n == 0 || errno != EINTR) {
                    s->out_eof = true;
                }
            }
            /* the init's last word (the tool's status), or the pipe's end
             * (no init: closed at exec) */
            if (pfd[2 * i + 1].revents && td_sandbox_report_more(s->report, &s->rep) != 0)
                s->rep_done = true;
            if (!s->out_eof || !s->rep_done)
                continue;
            finish(s);
            s->pid = 0;
            done++;
            if (started < calls) {
                start(t, s);
                started++;
            }
        }
    }
    double secs = now() - t0;
    free(slots);
    free(pfd);
    return secs / calls;
}

/* --filter: classic BPF as the kernel takes it (struct sock_filter). */
static void load_filter(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0 ||
        st.st_size % sizeof(struct sock_filter) ||
        st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
        die(path, "not a classic BPF program");
    off.filter.filter = malloc((size_t)st.st_size);
    if (!off.filter.filter || read(fd, off.filter.filter, (size_t)st.st_size) != st.st_size)
        die(path, "cannot read it");
    off.filter.len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
    close(fd);
}

/* A socket at path, for the view to cover as it covers the daemon's. */
static void make_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        die(path, strerror(errno));
}

int main(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--no-landlock") == 0)
            off.no_landlock = true;
        else if (strcmp(argv[i], "--no-seccomp") == 0)
            off.no_seccomp = true;
        else if (strcmp(argv[i], "--host-view") == 0)
            off.host_view = true;
        else if (strcmp(argv[i], "--no-init") == 0)
            off.no_init = true;
        else if (strcmp(argv[i], "--net-none") == 0)
            off.net_none = true;
        else if (strcmp(argv[i], "--bset-per-call") == 0)
            off.bset_per_call = true;
        else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
            load_filter(argv[++i]);
        else if (strcmp(argv[i], "--uid") == 0 && i + 1 < argc && strcmp(argv[i + 1], "tool") == 0)
            off.uid = UID_TOOL, i++;
        else if (strcmp(argv[i], "--uid") == 0 && i + 1 < argc &&
                 strcmp(argv[i + 1], "daemon") == 0)
            off.uid = UID_DAEMON, i++;
        else
            break;
    }
    if (argc - i != 3 || geteuid() != 0) {
        fprintf(stderr,
                "usage (root): sandboxfloor [--no-landlock] [--no-seccomp] [--host-view] "
                "[--uid tool|daemon] [--no-init] [--net-none] [--bset-per-call] [--filter FILE] "
                "WORKER CALLS CONCURRENCY\n");
        return 2;
    }
    const char *worker = argv[i];
    int calls = atoi(argv[i + 1]), conc = atoi(argv[i + 2]);
    if (calls < 1 || conc < 1)
        die("CALLS and CONCURRENCY", "expected at least 1");
    char worker_abs[PATH_MAX];
    if (!realpath(worker, worker_abs))
        die(worker, strerror(errno));

    /* main.c's start-up of the layers, for a root daemon */
    td_log_setup("text");
    td_log_set_level(TD_LOG_WARN);
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        td_cfg.worker_nofile = rl;
    td_cfg.max_workers = (unsigned)conc;
    if (td_cgroup_setup(NULL) < 0 || td_containment_setup("auto") < 0 || td_sysfilter_setup() < 0 ||
        td_confinement_setup(false) < 0 || td_identity_setup() < 0)
        die("set-up", "a layer failed (see above)");
    if (!td_call_ns)
        die("set-up", "no PID namespace per call (is toolexecd-init beside this program?)");
    if (!off.bset_per_call && td_sandbox_bset_once() < 0) /* as the spawner */
        die("set-up", "the bounding set");
    /* a daemon's work directory and socket, in a directory of our own */
    char base[] = "/dev/shm/te-floor-XXXXXX", work[64], sock[64];
    if (access("/dev/shm", W_OK) < 0)
        memcpy(base, "/tmp", 4);
    if (!mkdtemp(base) || chmod(base, 0755) < 0)
        die("mkdtemp", strerror(errno));
    snprintf(work, sizeof(work), "%s/work", base);
    snprintf(sock, sizeof(sock), "%s/s.sock", base);
    if (mkdir(work, 0755) < 0)
        die(work, strerror(errno));
    make_socket(sock);
    td_cfg.socket_path = sock;
    if (td_calldir_setup(work) < 0)
        die(work, "not usable");
    work_fd = open(td_cfg.work_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    td_spawndesc_setup();
    /* the tool: {"name": "echo", "command": [WORKER]}, the daemon's parse */
    char err[PATH_MAX + 256];
    struct td_tool *t = NULL;
    json_t *def = json_pack("{s:s,s:[s]}", "name", "echo", "command", worker_abs);
    if (td_registry_parse_def(base, "echo.json", def, &t, err, sizeof(err)) < 0)
        die("definition", err);
    json_decref(def);
    /* worker_start.c's environment */
    static char *envs[] = {"PATH=" TD_WORKER_PATH, "TOOLEXEC_TOOL=echo", "TOOLEXEC_CALL_ID=c",
                           "TOOLEXEC_BATCH=b", NULL};
    env = envs;

    floor_loop(t, conc < 8 ? 8 : conc, conc); /* warm-up: page cache, the view's plan */
    in_start = 0;
    double per = floor_loop(t, calls, conc);
    printf("us_per_call %.1f\nus_start_per_call %.1f\n", per * 1e6, in_start / calls * 1e6);
    reap(0);
    td_tool_unref(t);
    td_calldir_shutdown();
    close(work_fd);
    unlink(sock);
    rmdir(work);
    rmdir(base);
    free(unreaped);
    return 0;
}
