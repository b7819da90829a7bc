/*
 * sandboxrun.c - `toolexecd --sandbox-run` (sandboxrun.h): the daemon's
 * start-up of its confinement layers, one tool made from the options and
 * parsed as a definition, and one call of it built by spawndesc.c and
 * started by sandbox.c, the code every daemon call goes through; only the
 * call's ends differ: its fds 0, 1 and 2 are ours (a terminal too), not
 * pipes to a worker protocol. The loop serves its egress proxy, its seccomp
 * listener, its timeout and its reaping, then its denials are printed and
 * its exit status is ours.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calldir.h"
#include "cgroup.h"
#include "config.h"
#include "containment.h"
#include "denials.h"
#include "learn.h"
#include "learndef.h"
#include "egress.h"
#include "envlist.h"
#include "fswatch.h"
#include "log.h"
#include "proxy.h"
#include "reaper.h"
#include "registry.h"
#include "sandbox.h"
#include "sandboxrun.h"
#include "sandboxrun_check.h"
#include "spawndesc.h"
#include "sysfilter.h"
#include "sysnotify.h"
#include "util.h"

/* Exit statuses of our own (timeout(1) and env(1)'s). */
#define SBX_TIMED_OUT 124
#define SBX_SETUP_FAILED 125

extern char **environ;

int (*td_sbx_proxy_prepare)(char *err, size_t errlen);

/* The one call. */
static struct {
    pid_t pid;
    bool init;
    struct td_cgroup *cg;
    struct td_denials denied;
    struct td_proxy *proxy;
    struct td_sysnotify *sysn;
    uv_timer_t timer;
    uv_signal_t sig[3];
    bool exited, timed_out;
    int killed_by; /* a signal we were sent, passed on as the call's kill */
    int status;
    uint64_t t0;
} call;

static void kill_call(void)
{
    if (call.exited)
        return;
    /* the tool under its init, which then reports and exits; else its group */
    if (!call.init || td_sandbox_kill_tool(call.pid, SIGKILL) < 0)
        kill(-call.pid, SIGKILL);
    if (call.cg)
        td_cgroup_kill(call.cg);
}

static void on_timeout(uv_timer_t *t)
{
    call.timed_out = true;
    kill_call();
}

static void on_signal(uv_signal_t *h, int signum)
{
    if (!call.killed_by)
        call.killed_by = signum;
    kill_call();
}

static void on_reaped(void *data)
{
    /* strays of its group (containment by process group), while its id
     * cannot be another's */
    kill(-call.pid, SIGKILL);
}

static void on_exit_cb(void *data, int status, const struct rusage *ru)
{
    call.exited = true;
    call.status = status;
    uv_timer_stop(&call.timer);
    for (int i = 0; i < 3; i++)
        uv_close((uv_handle_t *)&call.sig[i], NULL);
    uv_close((uv_handle_t *)&call.timer, NULL);
    /* nothing is added to the denials from here on */
    td_proxy_stop(call.proxy);
    call.proxy = NULL;
    td_sysnotify_stop(call.sysn);
    call.sysn = NULL;
    td_reaper_stop();
}

/* The file-system refusal watch (as root with a --user, fswatch.h), loaded
 * on a thread of its own while the call is set up: the verifier's
 * milliseconds run beside the call's namespaces and mounts, not before
 * them. The call's child waits on the gate before it becomes the user
 * (sandbox.c, step 10), and only the user's system calls are watched:
 * nothing the command does goes unseen. */
static struct {
    pthread_t thread;
    bool running, served;
    uid_t uid;
    int gate; /* 1 once the watch is on, or could not be */
} refusal_watch = {.gate = 1};

static void *watch_load(void *arg)
{
    (void)arg;
    if (td_fswatch_load(1) == 0)
        td_fswatch_watch(refusal_watch.uid);
    td_sandbox_gate_open(&refusal_watch.gate);
    return NULL;
}

/* On a thread, or here when now (or no thread can be made). */
static void watch_start(uid_t uid, bool now)
{
    refusal_watch.uid = uid;
    refusal_watch.gate = 0;
    sigset_t all, old;
    sigfillset(&all); /* signals are the loop's */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    refusal_watch.running =
        !now && pthread_create(&refusal_watch.thread, NULL, watch_load, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!refusal_watch.running)
        watch_load(NULL);
}

/* The watch loaded (or not) and its ring served on the loop. */
static void watch_join(void)
{
    if (refusal_watch.running)
        pthread_join(refusal_watch.thread, NULL);
    refusal_watch.running = false;
    if (!refusal_watch.served && td_fswatch_active())
        td_fswatch_serve();
    refusal_watch.served = true;
}

/* The environment: ours, with the proxy's variables for an allow-list and
 * HOME the private directory (the caller's is hidden, as every home is). */
static char **build_env(const struct td_tool *t, const char *home)
{
    static const char *const vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
                                       "ALL_PROXY",  "NO_PROXY",    "no_proxy"};
    struct td_envlist env = {0};
    for (char **e = environ; *e; e++) {
        bool drop = false;
        for (size_t v = 0; t->egress && v < sizeof(vars) / sizeof(vars[0]); v++) {
            size_t len = strlen(vars[v]);
            drop |= strncmp(*e, vars[v], len) == 0 && (*e)[len] == '=';
        }
        drop |= strncmp(*e, "HOME=", 5) == 0;
        if (!drop)
            td_envlist_add(&env, "%s", *e);
    }
    td_envlist_add(&env, "HOME=%s", home);
    for (size_t v = 0; t->egress && v < 5; v++) /* the proxy's, not NO_PROXY */
        td_envlist_add(&env, "%s=" TD_EGRESS_URL, vars[v]);
    const char *no = t->egress ? td_egress_no_proxy(t->egress) : NULL;
    if (no)
        td_envlist_add(&env, "NO_PROXY=%s", no);
    return td_envlist_finish(&env);
}

/* Our ends for the call: copies of 0, 1, 2 (sandbox.c closes what it is
 * given) and the report pipe's write end; its read end in *report. */
static int call_ends(int theirs[TD_SANDBOX_ENDS], int *report)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    for (int i = 0; i < 3; i++)
        if ((theirs[i] = fcntl(i, F_DUPFD_CLOEXEC, TD_HANDOVER_FD + 1)) < 0) {
            int e = errno;
            for (int k = 0; k < i; k++)
                close(theirs[k]);
            close(p[0]), close(p[1]);
            return -e;
        }
    theirs[3] = p[1];
    *report = p[0];
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    return 0;
}

/* The call's status as a shell's: the code, 128+N for signal N. */
static int shell_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return SBX_SETUP_FAILED;
}

static void say_denials(json_t *f)
{
    json_t *list = json_object_get(f, "denied"), *e;
    size_t i;
    json_array_foreach(list, i, e)
    {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        if (kind && strcmp(kind, "network") == 0)
            fprintf(stderr, "toolexec sandbox: denied: network %s:%lld\n",
                    json_string_value(json_object_get(e, "host")),
                    (long long)json_integer_value(json_object_get(e, "port")));
        else if (kind && strcmp(kind, "syscall") == 0)
            fprintf(stderr, "toolexec sandbox: denied: system call %s\n",
                    json_string_value(json_object_get(e, "name")));
        else if (kind && strcmp(kind, "filesystem") == 0)
            fprintf(stderr, "toolexec sandbox: denied: %s %s (%s)\n",
                    json_string_value(json_object_get(e, "access")),
                    json_string_value(json_object_get(e, "path")),
                    json_string_value(json_object_get(e, "rule")));
        else {
            char *s = json_dumps(e, JSON_COMPACT);
            fprintf(stderr, "toolexec sandbox: denied: %s\n", s ? s : "?");
            free(s);
        }
    }
    json_t *more = json_object_get(f, "denied_more");
    if (more)
        fprintf(stderr, "toolexec sandbox: denied: %lld more\n",
                (long long)json_integer_value(more));
    /* the count, where it says more than the list: repeats, and past it */
    json_t *fs = json_object_get(f, "denied_filesystem");
    size_t listed = 0;
    json_array_foreach(list, i, e) listed +=
        !strcmp(json_string_value(json_object_get(e, "kind")) ?: "", "filesystem");
    if (fs && (size_t)json_integer_value(fs) > listed)
        fprintf(stderr, "toolexec sandbox: denied: file-system accesses in all: %lld\n",
                (long long)json_integer_value(fs));
}

static int write_summary(const char *where, json_t *summary)
{
    char *s = json_dumps(summary, JSON_COMPACT);
    if (!s)
        return -1;
    int rc = 0;
    if (strcmp(where, "-") == 0)
        fprintf(stderr, "%s\n", s);
    else {
        FILE *f = fopen(where, "we");
        if (!f || fprintf(f, "%s\n", s) < 0)
            rc = -1;
        if (f && fclose(f) != 0)
            rc = -1;
        if (rc < 0)
            fprintf(stderr, "toolexec sandbox: --json=%s: %s\n", where, strerror(errno));
    }
    free(s);
    return rc;
}

/* Set in the environment of our own re-exec: the layers probed this time. */
#define SBX_PROBED_ENV "TOOLEXECD_SANDBOX_PROBED"

/* The confinement layers; 0 or -1 (logged). Lean, nothing is probed:
 * every layer is assumed (containment.c, td_containment_assume) and only
 * the call's filter is built (sysfilter.c, lazily); a host that lacks a
 * layer fails the call's own clone or set-up, before the command runs,
 * and we run again probed (retry_probed), as the daemon sets them up. */
static int setup_layers(bool lean)
{
    signal(SIGPIPE, SIG_IGN);
    td_cfg.one_shot = true;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        td_cfg.worker_nofile = rl;
    if (td_cgroup_setup(NULL) < 0)
        return -1;
    if (lean && td_containment_assume() == 0) {
        if (td_sysfilter_setup_lazy() < 0)
            return -1;
    } else if (td_containment_setup("auto") < 0 || td_sysfilter_setup() < 0 ||
               td_confinement_setup(false) < 0)
        return -1;
    td_cfg.socket_path = NULL;
    td_cfg.events_socket_path = NULL;
    td_spawndesc_setup();
    return 0;
}

/* Did the lean set-up's guess fail the call before its command ran (its
 * clone, its user namespace, its mounts, its filter's listener)? Then run
 * it again, probed. */
static bool retry_probed(bool lean, const char *what, const struct td_report *rep)
{
    if (!lean)
        return false;
    if (call.pid < 0)
        return strcmp(what, "clone") == 0;
    return rep->failed && rep->step &&
           (strcmp(rep->step, "user namespace") == 0 || strcmp(rep->step, "mount") == 0 ||
            strcmp(rep->step, "seccomp") == 0);
}

/* Our own program again, with the same arguments (argv[0] is the
 * daemon's "--sandbox-run" when toolexecd started us: its argv is one
 * before); run as a module, the engine's program (td_self_exe, the
 * argv[0] it was given); returns only if it cannot. */
static void exec_probed(char **argv)
{
    char **args = strcmp(argv[0], "--sandbox-run") == 0 ? argv - 1 : argv;
    if (setenv(SBX_PROBED_ENV, "1", 1) == 0)
        execv(td_self_exe ? td_self_exe : "/proc/self/exe", args);
    fprintf(stderr, "toolexec sandbox: cannot run again: %s\n", strerror(errno));
}

/* Start the call of t; its pid, or -1 with *what and *err. */
static pid_t start_call(struct td_tool *t, const char *run_dir, char **workdir, int *report,
                        const char **what, int *err)
{
    struct td_limits lim;
    char **env = NULL;
    uid_t uid = t->switch_user ? t->uid : (uid_t)-1;
    gid_t gid = t->switch_user ? t->gid : (gid_t)-1;
    int rc = td_calldir_make(uid, gid, workdir, what);
    if (rc == 0 && !(env = build_env(t, *workdir))) {
        *what = "malloc";
        rc = -ENOMEM;
    }
    if (rc == 0 && (rc = td_spawndesc_cgroup(t, 0, &lim, &call.cg)) < 0)
        *what = "cgroup";
    struct td_spawndesc d;
    bool built = false;
    if (rc == 0)
        built = (rc = td_spawndesc_build(&d, TD_SPAWN_CALL, t, &lim, call.cg, *workdir, uid, gid,
                                         env, what)) == 0;
    if (built) {
        d.sp.run_dir = run_dir;
        d.sp.gate =
            __atomic_load_n(&refusal_watch.gate, __ATOMIC_ACQUIRE) ? NULL : &refusal_watch.gate;
    }
    int theirs[TD_SANDBOX_ENDS];
    if (rc == 0 && (rc = call_ends(theirs, report)) < 0)
        *what = "pipe";
    pid_t pid = -1;
    int handed[TD_HAND_COUNT];
    if (rc == 0) {
        call.t0 = uv_hrtime();
        pid = td_sandbox_start(&d.sp, theirs, handed, what);
        rc = pid < 0 ? (int)pid : 0;
        call.init = d.sp.init;
    }
    if (built)
        td_spawndesc_free(&d);
    td_envlist_free(env);
    *err = -rc;
    if (rc < 0)
        return -1;
    if (handed[TD_HAND_PROXY] >= 0 && t->egress)
        call.proxy = td_proxy_start(t->egress, handed[TD_HAND_PROXY], &call.denied, "sandbox", "1");
    else if (handed[TD_HAND_PROXY] >= 0)
        close(handed[TD_HAND_PROXY]);
    if (handed[TD_HAND_SECCOMP] >= 0)
        call.sysn = td_sysnotify_start(handed[TD_HAND_SECCOMP], &call.denied);
    return pid;
}

/* How the call ended, to stderr and --json; our exit status. */
static int finish(const struct td_sbx_opts *o, const struct td_report *rep, uint64_t ms)
{
    int code;
    json_t *summary = json_object();
    if (rep->failed) {
        const char *step = rep->step ? rep->step : "?";
        bool exec = strcmp(step, "exec") == 0;
        fprintf(stderr, "toolexec sandbox: %s: %s%s\n", step, strerror(rep->err),
                exec && (rep->err == ENOENT || rep->err == EACCES)
                    ? " (is it visible in the sandbox's view? --read PATH shows it)"
                    : "");
        code = exec ? (rep->err == ENOENT ? 127 : 126) : SBX_SETUP_FAILED;
        json_object_set_new(summary, "failed",
                            json_pack("{s:s,s:s}", "step", step, "error", strerror(rep->err)));
    } else {
        int st = rep->have_status ? rep->status : call.status;
        code = shell_status(st);
        if (WIFEXITED(st))
            json_object_set_new(summary, "exit_code", json_integer(WEXITSTATUS(st)));
        else if (WIFSIGNALED(st))
            json_object_set_new(summary, "signal", json_integer(WTERMSIG(st)));
    }
    if (call.timed_out) {
        fprintf(stderr, "toolexec sandbox: timed out after %.3g s: killed\n",
                (double)o->timeout_ms / 1000);
        code = SBX_TIMED_OUT;
    } else if (call.killed_by) {
        code = 128 + call.killed_by;
    }
    json_object_set_new(summary, "status", json_integer(code));
    json_object_set_new(summary, "timed_out", json_boolean(call.timed_out));
    json_object_set_new(summary, "duration_ms", json_integer((json_int_t)ms));
    if (rep->have_usage)
        json_object_set_new(summary, "usage",
                            json_pack("{s:I,s:I,s:I}", "user_ms", (json_int_t)rep->user_ms,
                                      "sys_ms", (json_int_t)rep->sys_ms, "maxrss_kb",
                                      (json_int_t)rep->maxrss_kb));
    json_t *f = td_denials_fields(&call.denied);
    if (f) {
        say_denials(f);
        json_object_update(summary, f);
        json_decref(f);
    } else
        json_object_set_new(summary, "denied", json_array());
    td_denials_clear(&call.denied);
    if (o->json_out)
        write_summary(o->json_out, summary);
    json_decref(summary);
    return code;
}

/* --learn FILE: the definition this run proposes (its own keys, "learn"
 * removed, what the command touched let in), as a tools.d file; "-" is
 * standard error, standard output being the command's. */
static int write_learned(struct td_tool *t, const char *where)
{
    td_learn_merge(t->learned, call.denied.learn);
    json_t *p = td_learndef_proposal(t);
    json_t *def = p ? td_learndef_definition(t, p) : NULL;
    json_decref(p);
    int rc = -1;
    if (def && strcmp(where, "-") == 0)
        rc = json_dumpf(def, stderr, JSON_INDENT(2)) == 0 && fputc('\n', stderr) != EOF ? 0 : -1;
    else if (def)
        rc = json_dump_file(def, where, JSON_INDENT(2));
    if (rc < 0)
        fprintf(stderr, "toolexec sandbox: --learn %s: not written\n", where);
    json_decref(def);
    return rc;
}

int td_sandboxrun_main(int argc, char **argv)
{
    struct td_sbx_opts o;
    int rc = td_sbx_parse(argc, argv, &o);
    if (rc) {
        json_decref(o.def);
        return rc < 0 ? 0 : rc;
    }
    td_log_setup("text");
    td_log_set_level(o.log_level);
    /* a closed 0, 1 or 2 is the command's /dev/null, and no pipe of ours
     * lands there */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
            return SBX_SETUP_FAILED;
    int code = SBX_SETUP_FAILED;
    /* ours, not the command's */
    bool lean = !getenv(SBX_PROBED_ENV), retry = false;
    unsetenv(SBX_PROBED_ENV);
    struct td_tool *t = NULL;
    char *workdir = NULL, cwd[PATH_MAX], err[PATH_MAX + 256];
    if (!getcwd(cwd, sizeof(cwd)))
        snprintf(cwd, sizeof(cwd), "/");
    if (setup_layers(lean) < 0)
        goto out;
    if (td_registry_parse_def(cwd, "toolexec sandbox", o.def, &t, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    /* its --write directories now; its start directory only if the call
     * cannot enter it (below): asking its user costs a process a run */
    bool host_view = t->learn && !t->learn_refused;
    if (td_sbx_check_access(json_object_get(o.def, "filesystem"), NULL, host_view, t->switch_user,
                            t->uid, t->gid) < 0)
        goto out;
    if (t->egress && td_sbx_proxy_prepare && td_sbx_proxy_prepare(err, sizeof(err)) < 0) {
        fprintf(stderr, "toolexec sandbox: its egress proxy cannot parse requests: %s\n", err);
        goto out;
    }
    td_loop = uv_default_loop();
    if (td_reaper_start() < 0 || td_calldir_setup(NULL) < 0)
        goto out;
    uv_timer_init(td_loop, &call.timer);
    static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(td_loop, &call.sig[i]);
        uv_signal_start(&call.sig[i], on_signal, sigs[i]);
    }
    const char *what = "";
    int report = -1, e = 0;
    /* --learn: its listener and proxy record into this (learn.h) */
    if (t->learn && !t->learn_refused && !(call.denied.learn = td_learn_new()))
        goto out;
    /* as root, its file-system refusals (fswatch.h), by the uid it runs as
     * (the --user's: only in our descendants); --learn-refused says first
     * whether it sees them */
    if (geteuid() == 0 && t->switch_user && t->uid != 0)
        watch_start(t->uid, t->learn_refused);
    if (t->learn_refused)
        watch_join();
    if (t->learn_refused && !td_fswatch_active())
        fprintf(stderr,
                "toolexec sandbox: --learn-refused: file-system refusals are seen only "
                "as root with a --user: %s gets the options as given\n",
                o.learn_out);
    call.pid = start_call(t, o.run_dir, &workdir, &report, &what, &e);
    watch_join();
    td_learndef_refusals_seen = td_fswatch_active();
    struct td_report rep = {0};
    uint64_t ms = 0;
    if (call.pid < 0) {
        if (!(retry = retry_probed(lean, what, &rep)))
            fprintf(stderr, "toolexec sandbox: could not set it up: %s: %s\n", what, strerror(e));
        on_exit_cb(NULL, 0, NULL);
        uv_run(td_loop, UV_RUN_DEFAULT);
    } else {
        td_reaper_watch(call.pid, on_reaped, on_exit_cb, NULL);
        if (o.timeout_ms)
            uv_timer_start(&call.timer, on_timeout, o.timeout_ms, 0);
        uv_run(td_loop, UV_RUN_DEFAULT);
        ms = (uv_hrtime() - call.t0) / 1000000;
        td_sandbox_report(report, &rep);
        retry = retry_probed(lean, what, &rep) && !call.killed_by && !call.timed_out;
    }
    /* the call stopped at its chdir: said as a check would have said it
     * before the run, and nothing learned of a run that did not start */
    if (call.pid >= 0 && rep.failed && rep.step && strcmp(rep.step, "chdir") == 0 &&
        td_sbx_check_access(NULL, o.run_dir, host_view, t->switch_user, t->uid, t->gid) < 0)
        goto done;
    if (call.pid >= 0 && !retry) {
        td_fswatch_collect(t->uid, &call.denied, t->fs, t->argv ? t->argv[0] : NULL);
        /* --learn-refused: its record made now, of its refusals alone */
        if (t->learn_refused && !call.denied.learn && !(call.denied.learn = td_learn_new()))
            goto out;
        td_learn_refusals(call.denied.learn, call.denied.list);
        code = finish(&o, &rep, ms);
        if (o.learn_out && write_learned(t, o.learn_out) < 0)
            code = SBX_SETUP_FAILED;
    }
done:
    if (report >= 0)
        close(report);
    if (workdir) { /* here and now: the loop's thread pool would cost more to start */
        int dfd = open(td_cfg.work_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || td_remove_tree_at(dfd, strrchr(workdir, '/') + 1) < 0)
            fprintf(stderr, "toolexec sandbox: %s not removed\n", workdir);
        if (dfd >= 0)
            close(dfd);
    }
    td_fswatch_stop();
    td_calldir_shutdown();
    uv_loop_close(td_loop);
out:
    td_cgroup_release(call.cg);
    td_cgroup_close();
    free(workdir);
    free(td_cfg.work_dir);
    free(td_init_path);
    td_learn_free(call.denied.learn);
    if (t)
        td_tool_unref(t);
    json_decref(o.def);
    free(o.run_dir);
    if (retry)
        exec_probed(argv);
    return code;
}
