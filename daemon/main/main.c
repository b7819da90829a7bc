/*
 * main.c - toolexecd: options, start-up, signals and shutdown. Runs in the
 * foreground and logs to stderr; a service manager daemonises it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "bus.h"
#include "calldir.h"
#include "cgroup.h"
#include "config.h"
#include "defcheck.h"
#include "defwarn.h"
#include "containment.h"
#include "credentials.h"
#include "egress.h"
#include "spares.h"
#include "spawner.h"
#include "spawnproc.h"
#include "fsview.h"
#include "fswatch.h"
#include "learndef.h"
#include "identity.h"
#include "instance.h"
#include "listener.h"
#include "log.h"
#include "notify.h"
#include "proxy_tls.h"
#include "reaper.h"
#include "options.h"
#include "sandboxrun.h"
#include "registry.h"
#include "sysfilter.h"
#include "server.h"
#include "spill.h"
#include "stats.h"
#include "metrics.h"
#include "metricshttp.h"
#include "mcplist.h"
#include "audit.h"
#include "auditchain.h"
#include "tail.h"
#include "template.h"
#include "toolexec.h"
#include "worker.h"

static uv_signal_t sigterm, sigint, sighup;
static uv_timer_t shutdown_timer;
static bool signals_closed;

/* Whenever something that keeps the daemon alive ends (a worker, a
 * connection, a timer of ours): once shutting down and nothing is left,
 * close our own handles so uv_run returns. */
static void start_flush(void);

/* The egress proxy's CA for hosts with credential headers (proxy_tls.h):
 * made once a loaded tool has such headers (at start or at a reload), so
 * that a daemon without them writes no bundle into its work directory. */
static void credproxy_setup(void)
{
    char err[PATH_MAX + 256];
    td_fsview_secret_dir = td_credentials_path();
    bool wanted = false;
    for (size_t i = 0; i < td_tools->n && !wanted; i++)
        wanted = td_egress_creds(td_tools->tools[i]->egress) != NULL;
    if (td_fsview_ca_bundle || !wanted)
        return;
    uint64_t t0 = uv_hrtime();
    if (td_tls_setup(td_cfg.work_dir, err, sizeof(err)) < 0) {
        td_log(TD_LOG_WARN, "egress: no TLS for credential headers: %s", err);
        return;
    }
    td_fsview_ca_bundle = td_tls_bundle();
    td_log(TD_LOG_DEBUG, "egress: the proxy's CA made in %llu us, bundle %s",
           (unsigned long long)((uv_hrtime() - t0) / 1000), td_fsview_ca_bundle);
}

static void maybe_exit(void)
{
    if (!td_shutting_down || signals_closed || td_workers_alive())
        return;
    if (td_server_batches() == 0) {
        td_server_stop(); /* subscribers too: nothing more to tell them */
        /* No batch left to wait for: what is left is flushing, whose grace
         * starts now, not when --shutdown-timeout (meant for batches) ends.
         * A tail subscriber that never read kept an idle daemon up for
         * 10 + 5 s. */
        if (td_server_conns())
            start_flush();
    }
    if (td_server_conns())
        return;
    signals_closed = true;
    td_template_shutdown();
    uv_close((uv_handle_t *)&sigterm, NULL);
    uv_close((uv_handle_t *)&sigint, NULL);
    uv_close((uv_handle_t *)&sighup, NULL);
    uv_close((uv_handle_t *)&shutdown_timer, NULL);
    td_metrics_http_stop();
    td_notify_close();
    td_spares_stop();
    td_spawner_stop();
    td_reaper_stop();
    td_spill_stop();
    td_fswatch_stop(); /* every call is over */
}

/* /metrics: the text with the gauges as they stand. */
static char *metrics_render(size_t *len)
{
    struct td_stats_gauges g;
    td_server_gauges(&g);
    return td_metrics_text(&g, len);
}

/* "1 tool", "2 tools" */
#define TOOLS(n) ((n) == 1 ? "tool" : "tools")

/* The live summary systemd shows (notify.c's STATUS=). */
static void notify_status(char *buf, size_t len)
{
    size_t n = td_tools ? td_tools->n : 0;
    snprintf(buf, len, "%zu %s, %u workers running, %u queued, %u batches running, %llu served", n,
             TOOLS(n), td_batch_running(), td_batch_queued(), td_server_batches(),
             (unsigned long long)td_stats_batches_served());
}

/* Once every batch is cancelled, clients get this long to read what they
 * are owed; one that never reads then no longer keeps the daemon up. */
#define FLUSH_GRACE_MS 5000

static void on_flush_timeout(uv_timer_t *t)
{
    td_server_drop_unread();
    maybe_exit();
}

static void start_flush(void)
{
    static bool flushing;
    if (flushing)
        return;
    flushing = true;
    uv_timer_stop(&shutdown_timer);
    uv_timer_start(&shutdown_timer, on_flush_timeout, FLUSH_GRACE_MS, 0);
}

static void on_shutdown_timeout(uv_timer_t *t)
{
    unsigned n = td_server_batches();
    if (n)
        td_log(TD_LOG_WARN, "shutdown: %u batches still running after %u s; cancelling them", n,
               td_cfg.shutdown_timeout_s);
    td_server_cancel_all();
    start_flush();
    maybe_exit();
}

/* First SIGTERM/SIGINT: stop taking work, let in-flight calls finish for
 * --shutdown-timeout, then cancel them; every owed terminal event is still
 * delivered. A second one cancels at once. */
static void on_terminate(uv_signal_t *h, int signum)
{
    const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
    if (td_shutting_down) {
        td_log(TD_LOG_INFO, "%s again: cancelling every batch now", name);
        uv_timer_stop(&shutdown_timer);
        on_shutdown_timeout(&shutdown_timer);
        return;
    }
    td_log(TD_LOG_INFO, "%s: shutting down; %u batches in flight get %u s to finish", name,
           td_server_batches(), td_cfg.shutdown_timeout_s);
    td_shutting_down = true;
    td_notify_stopping();
    td_listeners_stop();
    td_server_stop();
    td_mcplist_stop();
    td_instances_retire(); /* idle MCP servers' pools now, busy ones after their calls */
    uv_timer_start(&shutdown_timer, on_shutdown_timeout, td_cfg.shutdown_timeout_s * 1000ULL, 0);
    maybe_exit();
}

static void online_cpus_update(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    td_cfg.online_cpus = cpus > 0 ? (unsigned)cpus : 1;
}

/* SIGHUP: re-read the tool definitions, all or nothing. Calls in flight keep
 * the definitions they started with (they hold references). */
static void on_reload(uv_signal_t *h, int signum)
{
    if (td_shutting_down)
        return;
    td_auditchain_reopen(); /* after a rotation */
    td_notify_reloading();
    online_cpus_update(); /* CPUs brought on- or offline since */
    struct td_registry *fresh;
    char err[PATH_MAX + 256];
    if (td_registry_load(td_cfg.tools_dir, &fresh, err, sizeof(err)) < 0) {
        td_log(TD_LOG_ERR, "reload rejected, keeping the %zu %s in force: %s", td_tools->n,
               TOOLS(td_tools->n), err);
    } else {
        fresh = td_mcplist_carry(td_tools, fresh);
        td_registry_free(td_tools);
        td_tools = fresh;
        credproxy_setup(); /* before any of its calls' views is planned */
        td_defwarn_loaded(td_tools);
        td_log(TD_LOG_INFO, "reloaded %zu %s from %s", td_tools->n, TOOLS(td_tools->n),
               td_cfg.tools_dir);
        td_server_tools_changed();
        td_template_sync();
        td_spares_drop_all();  /* made for the old definitions */
        td_instances_retire(); /* MCP servers' pools of the old definitions */
        td_mcplist_start(td_server_tools_changed);
    }
    td_notify_ready(notify_status);
}

/* 0, 1 and 2 must be open so no pipe or socket of ours lands on them. */
static void ensure_std_fds(void)
{
    int fd;
    while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= 2)
        fcntl(fd, F_SETFD, 0);
    if (fd > 2)
        close(fd);
}

/* Each client holds a descriptor or two; the soft limit is often 1024
 * (systemd's default), which 500 clients exhaust. Workers get the limit we
 * started with back (select() breaks above 1024). */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    td_cfg.worker_nofile = rl;
    if (rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        td_log(TD_LOG_WARN, "cannot raise the open files soft limit from %llu to %llu: %s",
               (unsigned long long)was, (unsigned long long)rl.rlim_max, strerror(errno));
    else
        td_log(TD_LOG_INFO, "open files: soft limit raised from %llu to the hard limit %llu",
               (unsigned long long)was, (unsigned long long)rl.rlim_max);
}

/* A user without XDG_RUNTIME_DIR (su -, ssh without pam_systemd, a
 * container): the socket in ${TMPDIR:-/tmp}/toolexecd-UID, where the work
 * directory falls back to (calldir.c) and toolexec looks (cli/common.c).
 * Under a shared /tmp another user could have made that directory first to
 * catch the calls: it must be ours, and no one else's to write in. */
static int fallback_socket(char **out)
{
    const char *tmp = getenv("TMPDIR");
    char *dir = NULL;
    if (asprintf(&dir, "%s/toolexecd-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)geteuid()) < 0)
        return -ENOMEM;
    struct stat st;
    int rc = 0;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        td_log(TD_LOG_ERR,
               "XDG_RUNTIME_DIR is not set and %s cannot be made: %s; pass --socket PATH", dir,
               strerror(errno));
    } else if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
               (st.st_mode & 022)) {
        rc = -EPERM;
        td_log(TD_LOG_ERR,
               "XDG_RUNTIME_DIR is not set and %s is not a directory of uid %u's own that "
               "no one else may write to; pass --socket PATH or set TMPDIR",
               dir, (unsigned)geteuid());
    } else if (asprintf(out, "%s/toolexecd.sock", dir) < 0) {
        rc = -ENOMEM;
    }
    free(dir);
    return rc;
}

static int default_socket(char **out)
{
    char path[PATH_MAX];
    int rc = te_default_socket_path(path, sizeof(path));
    if (rc == -ENOENT)
        return fallback_socket(out);
    if (rc < 0)
        return rc;
    if (geteuid() == 0 && mkdir("/run/toolexecd", 0755) < 0 && errno != EEXIST) {
        td_log(TD_LOG_ERR, "cannot create /run/toolexecd: %s", strerror(errno));
        return -errno;
    }
    *out = strdup(path);
    return *out ? 0 : -ENOMEM;
}

int main(int argc, char **argv)
{
    char *socket_path = NULL;
#ifdef M_MMAP_THRESHOLD
    /* Large buffers (frames and results up to --max-frame-bytes) straight
     * from and back to the kernel. glibc otherwise raises this threshold
     * after the first such free and serves them from the heap, where the
     * small allocations of calls still waiting for their reap pin the
     * freed space: 200 calls of a 200 KB result, 12 at a time, grew the
     * daemon from 7.5 to 20-30 MB; fixed at 128 KiB, to 12.5 MB. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
    /* toolexec sandbox's engine: one confined command, no socket */
    if (argc > 1 && strcmp(argv[1], "--sandbox-run") == 0)
        return td_sandboxrun_main(argc - 1, argv + 1);
    /* the spawner, exec'd by the daemon (spawner.c): nothing else runs */
    if (argc > 1 && strcmp(argv[1], TD_SPAWNPROC_ARG) == 0)
        td_spawnproc_main(argc, argv);
    int rc = td_options_parse(argc, argv);
    if (rc >= 0)
        return rc;
    /* the layers a definition may ask for, as the daemon would give them */
    if (td_opts.check && td_opts.tools_given && td_containment_probe_ns(td_opts.containment))
        td_fsview_mount_ns = true;
    if (td_opts.check && td_opts.tools_given)
        return td_defcheck(td_cfg.tools_dir, stdout);
    if (td_opts.check)
        return td_containment_check(td_opts.cgroup_dir);
    if (td_config_resolve() < 0)
        return 2;

    online_cpus_update();
    if (!td_cfg.max_workers) {
        unsigned cpus = td_cfg.online_cpus;
        td_cfg.max_workers = cpus > 4 ? cpus * 4 : 16;
    }
    if (td_log_setup(td_opts.log_format) < 0) {
        fprintf(stderr, "toolexecd: --log-format: expected text or json\n");
        return 2;
    }
    ensure_std_fds();
    raise_nofile();
    /* A client that vanishes must be a failed write, not a dead daemon. */
    signal(SIGPIPE, SIG_IGN);
    /* where it will listen, before any set-up is done and said */
    if (!td_cfg.socket_path && default_socket(&socket_path) < 0)
        return 1;
    if (socket_path)
        td_cfg.socket_path = socket_path;

    if (td_cgroup_setup(td_opts.cgroup_dir) < 0 || td_containment_setup(td_opts.containment) < 0 ||
        td_sysfilter_setup() < 0)
        return 1;
    if (td_confinement_setup(td_opts.require_confinement) < 0)
        return 1;
    if (geteuid() == 0 && td_identity_setup() < 0)
        return 1;
    if (td_tail_setup(td_cfg.tail_group) < 0)
        return 1;
    char err[PATH_MAX + 256];
    if (td_registry_load(td_cfg.tools_dir, &td_tools, err, sizeof(err)) < 0) {
        td_log(TD_LOG_ERR, "invalid tool definitions: %s", err);
        return 1;
    }
    int status = 1;
    td_defwarn_loaded(td_tools); /* the view's covers include the socket */
    td_worker_on_gone(maybe_exit);
    td_server_on_conn_gone(maybe_exit);
    if (td_opts.audit_file && td_auditchain_open(td_opts.audit_file, err, sizeof(err)) < 0) {
        td_log(TD_LOG_ERR, "%s", err);
        goto out_tools;
    }

    td_loop = uv_default_loop();
    td_stats_init();
    td_metrics_init();
    td_audit_init(td_opts.audit_arguments);
    uv_signal_init(td_loop, &sigterm);
    uv_signal_init(td_loop, &sigint);
    uv_signal_init(td_loop, &sighup);
    uv_timer_init(td_loop, &shutdown_timer);
    uv_signal_start(&sigterm, on_terminate, SIGTERM);
    uv_signal_start(&sigint, on_terminate, SIGINT);
    uv_signal_start(&sighup, on_reload, SIGHUP);
    if (td_reaper_start() < 0) {
        td_log(TD_LOG_ERR, "cannot watch SIGCHLD");
        goto out_loop;
    }
    if (!td_opts.fs_refusals)
        td_log(TD_LOG_INFO, "file-system refusals are not reported: --fs-refusals no");
    else if (td_identity_active()) /* a uid is a call only with a uid of its own each */
        td_fswatch_start(0);
    else
        td_log(TD_LOG_INFO, "file-system refusals are not reported: calls are told apart by a "
                            "uid of their own each, a root daemon's (--call-uids)");
    td_learndef_refusals_seen = td_fswatch_active();
    /* Exec'd, it holds none of what was loaded above (the definitions'
     * credentials) or will be (the proxy's CA key). Not having one is no
     * reason to stop: the loop starts calls itself. */
    if (td_opts.use_spawner && td_spawner_start() < 0)
        td_log(TD_LOG_WARN, "no spawner: calls are started by the loop itself");
    /* After the sockets: "another toolexecd is listening" says more than
     * its work directory being in use. */
    if (td_listeners_start() < 0 || td_calldir_setup(td_opts.work_dir) < 0) {
        td_listeners_stop();
        td_reaper_stop();
        goto out_loop;
    }
    credproxy_setup();
    td_worker_setup(); /* once the paths a call must not reach are known */
    if (td_opts.metrics_listen &&
        td_metrics_http_start(td_opts.metrics_listen, td_opts.metrics_timeout, metrics_render, err,
                              sizeof(err)) < 0) {
        td_log(TD_LOG_ERR, "%s", err);
        td_listeners_stop();
        td_reaper_stop();
        goto out_loop;
    }
    if (td_opts.metrics_listen)
        td_log(TD_LOG_INFO, "metrics on http://%s/metrics", td_metrics_http_where());
    td_template_sync();
    char where[2 * PATH_MAX + 64];
    td_log(TD_LOG_INFO, "listening on %s with %zu %s (work dir %s)",
           td_listeners_describe(where, sizeof(where)), td_tools->n, TOOLS(td_tools->n),
           td_cfg.work_dir);
    td_notify_ready(notify_status);
    td_mcplist_start(td_server_tools_changed);
    uv_run(td_loop, UV_RUN_DEFAULT);
    status = 0;
    td_log(TD_LOG_INFO, "stopped");
    goto out_loop_closed;

out_loop:
    td_fswatch_stop();
    td_spares_stop();
    td_spawner_stop(); /* its socket's handle would keep the loop running */
    uv_close((uv_handle_t *)&sigterm, NULL);
    uv_close((uv_handle_t *)&sigint, NULL);
    uv_close((uv_handle_t *)&sighup, NULL);
    uv_close((uv_handle_t *)&shutdown_timer, NULL);
    uv_run(td_loop, UV_RUN_DEFAULT);
out_loop_closed:
    uv_loop_close(td_loop);
out_tools:
    td_auditchain_close();   /* after the last call's record */
    if (td_fsview_ca_bundle) /* the daemon's, not a call's: gone with it */
        unlink(td_fsview_ca_bundle);
    td_calldir_shutdown();
    free(td_cfg.work_dir);
    free(td_init_path);
    td_cgroup_close();
    td_identity_close();
    free(socket_path);
    td_registry_free(td_tools);
    td_stats_free();
    td_metrics_free();
    td_bus_clear();
    return status;
}
