/*
 * worker_start.c - starting a call's process (worker_int.h): warm, as a fork
 * of its tool's template (template.c); cold, through the spawner off the
 * loop (spawner.c, with a spare where one is ready) or here; its
 * environment, uid, directory and cgroup; its pipes on the loop, its request
 * written, its timer started. Also the templates' own spawn.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bus.h"
#include "calldir.h"
#include "cgroup.h"
#include "config.h"
#include "containment.h"
#include "credentials.h"
#include "egress.h"
#include "envlist.h"
#include "fsview.h"
#include "learn.h"
#include "identity.h"
#include "log.h"
#include "proxy.h"
#include "proxy_tls.h"
#include "reaper.h"
#include "registry.h"
#include "sandbox.h"
#include "warmid.h"
#include "sysnotify.h"
#include "spares.h"
#include "spawndesc.h"
#include "spawner.h"
#include "template.h"
#include "toolexec.h"
#include "util.h"
#include "worker.h"
#include "worker_int.h"

static void on_request_written(uv_write_t *req, int status)
{
    struct td_worker *w = req->data;
    /* EPIPE: the worker closed stdin without reading; that is its business. */
    if (status < 0 && status != UV_ECANCELED)
        td_logc(TD_LOG_DEBUG, w->batch_id, w->call_id, "request not fully written: %s",
                uv_strerror(status));
    free(w->reqbody);
    w->reqbody = NULL;
    if (!w->serving || status < 0) /* a serving worker's stdin takes its next calls */
        td_worker_close_handle(w, (uv_handle_t *)&w->in);
}

static void on_call_written(uv_write_t *req, int status)
{
    struct td_worker *w = req->data;
    free(w->sendbody);
    w->sendbody = NULL;
    if (status < 0 && status != UV_ECANCELED)
        td_logc(TD_LOG_DEBUG, w->batch_id, w->call_id, "call not fully written: %s",
                uv_strerror(status));
}

int td_worker_send(struct td_worker *w, const char *batch_id, const char *call_id,
                   const json_t *request, uint64_t timeout_ms)
{
    if (!w->serving || td_wstate_has_result(w->state) || w->sendbody ||
        uv_is_closing((uv_handle_t *)&w->in))
        return -EPIPE;
    char *b = strdup(batch_id), *c = strdup(call_id);
    char *body = te_json_dumps(request, 0, NULL);
    if (!b || !c || !body) {
        free(b);
        free(c);
        free(body);
        return -ENOMEM;
    }
    free(w->batch_id);
    free(w->call_id);
    w->batch_id = b;
    w->call_id = c;
    size_t len = strlen(body);
    te_frame_header((uint32_t)len, w->sendhdr);
    w->sendbody = body;
    uv_buf_t bufs[2] = {uv_buf_init((char *)w->sendhdr, sizeof(w->sendhdr)),
                        uv_buf_init(body, len)};
    w->sendreq.data = w;
    if (uv_write(&w->sendreq, (uv_stream_t *)&w->in, bufs, 2, on_call_written) < 0) {
        free(body);
        w->sendbody = NULL;
        return -EPIPE;
    }
    w->timeout_ms = timeout_ms;
    uv_update_time(td_loop);
    uv_timer_start(&w->timer, td_worker_on_timeout, timeout_ms, 0);
    return 0;
}

long long td_worker_uid(const struct td_worker *w)
{
    return w->run_uid;
}

/* ---- starting ------------------------------------------------------------- */

static bool env_has(const struct td_tool *t, const char *name)
{
    size_t n = strlen(name);
    if (json_object_get(t->env_creds, name))
        return true;
    for (size_t k = 0; k < t->nenv; k++)
        if (strncmp(t->env[k], name, n) == 0 && t->env[k][n] == '=')
            return true;
    return false;
}

/* The proxy of an egress allow-list (egress.h), where the definition's env
 * does not say otherwise. */
static void egress_env(const struct td_tool *t, struct td_envlist *env)
{
    static const char *const vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
                                       "ALL_PROXY"};
    for (size_t k = 0; k < sizeof(vars) / sizeof(vars[0]); k++)
        if (!env_has(t, vars[k]))
            td_envlist_add(env, "%s=" TD_EGRESS_URL, vars[k]);
    const char *no = td_egress_no_proxy(t->egress);
    if (no && !env_has(t, "NO_PROXY"))
        td_envlist_add(env, "NO_PROXY=%s", no);
    /* credential headers: the proxy ends TLS for those hosts with its own
     * CA, in the bundle its view has where the system's was (fsview.c) */
    static const char *const trust[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                        "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"};
    const char *bundle = td_fsview_is_host(t->fs) ? td_fsview_ca_bundle : TD_TLS_VIEW_BUNDLE;
    for (size_t k = 0; td_egress_creds(t->egress) && bundle && k < sizeof(trust) / sizeof(trust[0]);
         k++)
        if (!env_has(t, trust[k]))
            td_envlist_add(env, "%s=%s", trust[k], bundle);
}

/* The most a worker may send: output_mb where set, else --max-frame-bytes;
 * at most what a frame decoder takes (TE_FRAME_MAX_LIMIT). */
static uint32_t output_cap(const struct td_limits *l)
{
    if (!l->output_mb)
        return td_cfg.max_frame;
    return l->output_mb > TE_FRAME_MAX_LIMIT >> 20 ? TE_FRAME_MAX_LIMIT
                                                   : (uint32_t)(l->output_mb << 20);
}

/* An MCP server's env_credentials, each read now from the credentials
 * directory (a small file of the daemon's own, as the proxy's headers are
 * read) into the call's environment: its process tree's alone, never its
 * request, an event or a log line. -1 with *refused, the call's error
 * naming the credential, when one cannot be read. */
static int cred_env(const struct td_worker_spec *s, struct td_envlist *env, json_t **refused)
{
    const char *var;
    json_t *v;
    json_object_foreach(s->tool->env_creds, var, v)
    {
        char *value = NULL, why[512];
        const char *name = json_string_value(v);
        if (td_credential_read(td_credentials_path(), name, &value, why, sizeof(why)) < 0) {
            char detail[700];
            snprintf(detail, sizeof(detail),
                     "could not start the worker: the MCP server's variable %s: %s", var, why);
            td_logc(TD_LOG_WARN, s->batch_id, s->call_id, "env_credentials.%s: %s", var, why);
            *refused = te_tool_error_new(TE_HANDLER_EXIT, s->tool->name, s->call_id, detail,
                                         json_pack("{s:s,s:s,s:s}", "error", "credential",
                                                   "credential", name, "variable", var),
                                         NULL);
            return -1;
        }
        td_envlist_add(env, "%s=%s", var, value);
        explicit_bzero(value, strlen(value));
        free(value);
    }
    return 0;
}

/* A call's environment: PATH unless the definition sets it, the
 * definition's env, its credentials, the call's names, the egress proxy's.
 * NULL: no memory, or *refused (cred_env). */
static char **build_env(const struct td_worker_spec *s, json_t **refused)
{
    struct td_envlist env = {0};
    bool has_path = false;
    for (size_t k = 0; k < s->tool->nenv; k++)
        has_path |= strncmp(s->tool->env[k], "PATH=", 5) == 0;
    if (!has_path)
        td_envlist_add(&env, "PATH=%s", TD_WORKER_PATH);
    for (size_t k = 0; k < s->tool->nenv; k++)
        td_envlist_add(&env, "%s", s->tool->env[k]);
    if (s->tool->env_creds && cred_env(s, &env, refused) < 0) {
        td_envlist_free(td_envlist_finish(&env));
        return NULL;
    }
    td_envlist_add(&env, "TOOLEXEC_TOOL=%s", s->tool->name);
    td_envlist_add(&env, "TOOLEXEC_CALL_ID=%s", s->call_id);
    td_envlist_add(&env, "TOOLEXEC_BATCH=%s", s->batch_id);
    if (s->tool->egress)
        egress_env(s->tool, &env);
    return td_envlist_finish(&env);
}

static int spawn_template(struct td_tool *t, const char *cwd, uid_t uid, gid_t gid,
                          struct td_child *c, struct td_cgroup **cg, const char **what);

void td_worker_setup(void)
{
    td_template_setup(spawn_template);
    td_spawndesc_setup();
}

static json_t *spawn_error(const struct td_worker_spec *s, const char *what, int err)
{
    char detail[256];
    snprintf(detail, sizeof(detail), "could not start the worker: %s: %s", what, strerror(err));
    char msg[128];
    snprintf(msg, sizeof(msg), "%s: %s", what, strerror(err));
    return te_tool_error_new(TE_HANDLER_EXIT, s->tool->name, s->call_id, detail,
                             json_pack("{s:s}", "spawn_error", msg), NULL);
}

static void pipe_open(struct td_worker *w, uv_pipe_t *p, int fd)
{
    uv_pipe_init(td_loop, p, 0);
    p->data = w;
    w->handles++;
    /* UV_EEXIST: libuv still watches this number for a handle whose
     * descriptor someone closed behind its back; that handle would now
     * read this pipe. Never seen on this loop; said loudly if it is. */
    int rc = uv_pipe_open(p, fd);
    if (rc < 0)
        td_logc(TD_LOG_ERR, w->batch_id, w->call_id, "worker pipe (fd %d) not opened: %s", fd,
                uv_strerror(rc));
}

/* Its process forked: false when a kill was asked before (its result
 * taken, or its init reported), so it is killed as it comes
 * (a warm call's, a call the spawner started). */
static bool spawned(struct td_worker *w)
{
    return td_worker_step(w, TD_WE_SPAWNED) && w->state == TD_W_RUNNING;
}

/* ---- warm start (template.c) ------------------------------------------------ */

static void on_warm_forked(void *data, int pidfd)
{
    struct td_worker *w = data;
    w->pidfd = pidfd;
    w->pidfd_pid = td_sandbox_pidfd_pid(pidfd);
    if (!spawned(w)) {
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        td_worker_forked_late(w);
    }
}

/* A call's end that no reaper of ours saw: a warm call's from its template,
 * a cold call's from the spawner (spawner_ops below). */
static void on_warm_exited(void *data, int status, const struct rusage *ru, const char *why)
{
    struct td_worker *w = data;
    static const struct rusage none;
    if (why && !w->warm_why)
        w->warm_why = strdup(why);
    td_worker_on_reaped(w);
    td_worker_on_exit(w, status, ru ? ru : &none);
}

/* Its egress proxy, served on the listener its PID 1 made in its network
 * namespace, as a cold call's (td_worker_start) from here on. */
static void on_warm_listener(void *data, int fd)
{
    struct td_worker *w = data;
    if (td_wstate_has_result(w->state) || w->egress || !w->tool->egress) {
        close(fd);
        return;
    }
    w->egress = td_proxy_start(w->tool->egress, fd, &w->denied, w->batch_id, w->call_id);
}

/* A uid of its own, lent to its PID 1 (warmid.c, template.c) */
static void on_warm_mapped(void *data, uid_t uid)
{
    struct td_worker *w = data;
    if (w->run_uid < 0)
        w->run_uid = uid;
}

static const struct td_warm_ops warm_ops = {on_warm_forked, on_warm_exited, on_warm_listener,
                                            on_warm_mapped};

/* ---- started by the spawner (spawner.c) ------------------------------------- */

static void on_spawned(void *data, pid_t pid, int pidfd, const int handed[TD_HAND_COUNT], int err,
                       const char *what)
{
    struct td_worker *w = data;
    if (err) { /* it never ran: ends as a spawn that failed here would */
        char msg[160];
        snprintf(msg, sizeof(msg), "%s: %s", what, strerror(err));
        td_logc(TD_LOG_WARN, w->batch_id, w->call_id, "%s", msg);
        w->warm_why = strdup(msg);
        w->spawn_failed = true;
        static const struct rusage none;
        td_worker_on_reaped(w);
        td_worker_on_exit(w, 127 << 8, &none);
        return;
    }
    w->pid = pid;
    w->pidfd = pidfd;
    w->pidfd_pid = pid; /* the spawner's child: its pid while it has not exited */
    bool kill = !spawned(w);
    /* from the request to the child's exec: the spawn cost, queueing included */
    td_bus_publish(&(struct td_bus_msg){
        .kind = TD_BUS_SPAWN, .tool = w->tool->name, .us = (uv_hrtime() - w->spawn_t0) / 1000});
    td_logc(TD_LOG_DEBUG, w->batch_id, w->call_id, "started %s as pid %d", w->tool->name, (int)pid);
    if (handed[TD_HAND_PROXY] >= 0 && (td_wstate_has_result(w->state) || !w->tool->egress))
        close(handed[TD_HAND_PROXY]);
    else if (handed[TD_HAND_PROXY] >= 0)
        w->egress = td_proxy_start(w->tool->egress, handed[TD_HAND_PROXY], &w->denied, w->batch_id,
                                   w->call_id);
    /* a finished call's listener is closed: its denied calls then fail
     * (ENOSYS) rather than wait for an answer */
    if (handed[TD_HAND_SECCOMP] >= 0 && td_wstate_has_result(w->state))
        close(handed[TD_HAND_SECCOMP]);
    else if (handed[TD_HAND_SECCOMP] >= 0)
        w->sysn = td_sysnotify_start(handed[TD_HAND_SECCOMP], &w->denied);
    if (kill)
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

/* its end: as a warm call's (on_warm_exited), the spawner's why (it died
 * and took the call with it) in place of the template's. Without a why
 * the spawner reaped it (wait4, then EXITED): its pidfd's process is gone,
 * and a SIGKILL to it (td_worker_on_reaped) could only fail. A template's
 * word is not taken so: it runs the tool's code. */
static void on_spawner_exited(void *data, int status, const struct rusage *ru, const char *why)
{
    struct td_worker *w = data;
    if (why || !ru) {
        on_warm_exited(data, status, ru, why);
        return;
    }
    td_worker_step(w, TD_WE_REAPED);
    td_worker_on_exit(w, status, ru);
}

static const struct td_spawner_ops spawner_ops = {on_spawned, on_spawner_exited};

/* A warm call: the template forks its process; false when it cannot (not
 * ready): the call runs cold. */
static bool start_warm(struct td_worker *w, const struct td_worker_spec *s, struct td_child *c,
                       char **workdir)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
        pipe2(ex, O_CLOEXEC) < 0) {
        int *ps[4] = {in, out, err, ex};
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 2; k++)
                if (ps[i][k] >= 0)
                    close(ps[i][k]);
        return false;
    }
    int network = s->tool->network >= 0 ? s->tool->network : td_cfg.network;
    int theirs[4] = {in[0], out[1], err[1], ex[1]};
    int ours[4] = {in[1], out[0], err[0], ex[0]};
    /* theirs are taken in every case */
    w->warm =
        td_template_call(s->tool, s->call_id, s->batch_id, !network, theirs, &warm_ops, w, workdir);
    if (!w->warm) {
        for (int i = 0; i < 4; i++)
            close(ours[i]);
        return false;
    }
    td_template_call_denials(w->warm, &w->denied);
    fcntl(ex[0], F_SETFL, O_NONBLOCK);
    *c = (struct td_child){.pid = 0, .in = in[1], .out = out[0], .err = err[0], .report = ex[0]};
    for (int k = 0; k < TD_HAND_COUNT; k++) /* nothing handed up: not spawned here */
        c->handed[k] = -1;
    return true;
}

/* The template's spawn: a cold worker's description, in its directory. A
 * warm call's processes share the template's limit: the template, the
 * spare PID 1 it keeps for the next call and the call's PID 1 are not the
 * call's (lib/warm.c, p1_make()), so one call may have as many as a cold one (+3). */
static int spawn_template(struct td_tool *t, const char *cwd, uid_t uid, gid_t gid,
                          struct td_child *c, struct td_cgroup **cg, const char **what)
{
    struct td_worker_spec spec = {.tool = t, .batch_id = "", .call_id = ""};
    json_t *refused = NULL; /* a warm tool has no env_credentials */
    char **env = build_env(&spec, &refused);
    json_decref(refused);
    *cg = NULL;
    *what = "malloc";
    if (!env)
        return -ENOMEM;
    struct td_limits lim;
    struct td_spawndesc d;
    *what = "cgroup";
    int rc = td_spawndesc_cgroup(t, 3, &lim, cg);
    if (rc == 0 && (rc = td_spawndesc_build(&d, TD_SPAWN_TEMPLATE, t, &lim, *cg, cwd, uid, gid, env,
                                            what)) == 0) {
        rc = td_sandbox_spawn(&d.sp, c, what);
        td_spawndesc_free(&d);
    }
    if (rc < 0) {
        td_cgroup_release(*cg);
        *cg = NULL;
    }
    td_envlist_free(env);
    return rc;
}

struct td_worker *td_worker_start(const struct td_worker_spec *s, td_result_cb cb, void *data,
                                  json_t **result)
{
    *result = NULL;
    char *workdir = NULL;
    char **env = NULL;
    json_t *refused = NULL;  /* the call's error when a credential is missing */
    uid_t taken = (uid_t)-1; /* the call's own uid, once taken */
    /* a spare lent to the call (spares.h) until the spawner is asked */
    struct td_spare_grant grant = {.handle = TD_NO_SPARE};
    bool lent = false;
    /* framed: the request object in one frame; plain: the arguments as one
     * line of compact JSON */
    bool plain = s->tool->protocol == TD_PROTO_PLAIN;
    char *body =
        te_json_dumps(plain ? json_object_get(s->request, "arguments") : s->request, 0, NULL);
    struct td_worker *w = calloc(1, sizeof(*w));
    const char *what = "malloc";
    int err = ENOMEM;
    if (!w || !body)
        goto fail;
    w->pidfd = -1;
    /* learn mode: its listener and proxy record into this (learn.h) */
    if (s->tool->learn && !s->tool->learn_refused && !(w->denied.learn = td_learn_new()))
        goto fail;
    w->run_uid = -1;
    struct td_child child;
    if (s->tool->warm && !plain) {
        bool warm = start_warm(w, s, &child, &workdir);
        if (s->start)
            *s->start = warm ? "warm" : "cold";
        if (warm) {
            /* a uid of the call's own is taken by its PID 1 (warmid.c),
             * known once it has forked (on_warm_forked) */
            bool pool = s->tool->switch_user && !s->tool->user && td_identity_active();
            w->run_uid = pool                   ? -1
                         : s->tool->switch_user ? (long long)s->tool->uid
                                                : (long long)td_euid();
            td_spawndesc_limits(s->tool, 0, &w->limits);
            w->max_output = output_cap(&w->limits);
            goto started;
        }
    }
    env = build_env(s, &refused);
    if (!env)
        goto fail;
    /* The call's identity: a root daemon runs a tool that names no user as
     * a uid and gid no other call holds (a group the tool names is kept);
     * its directory; a cgroup where it gets one. All three made ahead with a
     * spare (spares.c), which is then the call's alone. */
    uid_t uid = s->tool->uid;
    gid_t gid = s->tool->gid;
    bool via = td_spawner_active();
    if (via && td_spares_take(s->tool, &grant)) {
        td_logc(TD_LOG_DEBUG, s->batch_id, s->call_id, "takes a spare of %s", s->tool->name);
        lent = true;
        taken = grant.taken;
        uid = grant.uid;
        gid = grant.gid;
        workdir = grant.dir;
        w->cg = grant.cg;
        w->limits = grant.limits;
    } else {
        if (s->tool->switch_user && !s->tool->user && td_identity_active()) {
            what = "call uid";
            if ((err = -td_identity_take(&taken)) > 0)
                goto fail;
            uid = taken;
            gid = s->tool->group ? s->tool->gid : (gid_t)taken;
        }
        int mk = s->tool->switch_user ? td_calldir_make(uid, gid, &workdir, &what)
                                      : td_calldir_make((uid_t)-1, (gid_t)-1, &workdir, &what);
        if (mk < 0) {
            err = -mk;
            goto fail;
        }
        what = "cgroup";
        if ((err = -td_spawndesc_cgroup(s->tool, 0, &w->limits, &w->cg)) > 0) {
            rmdir(workdir);
            goto fail;
        }
    }
    w->max_output = output_cap(&w->limits);
    struct td_spawndesc d;
    if ((err = -td_spawndesc_build(&d, TD_SPAWN_CALL, s->tool, &w->limits, w->cg, workdir,
                                   s->tool->switch_user ? uid : (uid_t)-1, gid, env, &what)) > 0) {
        if (!lent)
            rmdir(workdir);
        goto fail;
    }
    w->cg_memory = d.cg_memory;
    w->run_uid = s->tool->switch_user ? (long long)uid : (long long)td_euid();
    uint64_t t0 = uv_hrtime();
    int rc;
    if (via) { /* off the loop: the spawner starts it (spawner.c) */
        int theirs[TD_SANDBOX_ENDS];
        what = "pipe";
        rc = td_sandbox_pipes(false, &child, theirs);
        if (rc == 0 &&
            (rc = td_spawner_call(&d.sp, theirs, &spawner_ops, w, grant.handle, &what)) < 0) {
            close(child.in), close(child.out), close(child.err), close(child.report);
        }
        if (rc == 0 && lent) { /* the spawner has it: all of it the call's */
            td_spares_taken(&grant);
            lent = false;
        }
    } else {
        rc = td_sandbox_spawn(&d.sp, &child, &what);
        if (rc == 0) /* clone returns once the child has exec'd: the spawn cost */
            td_bus_publish(&(struct td_bus_msg){
                .kind = TD_BUS_SPAWN, .tool = s->tool->name, .us = (uv_hrtime() - t0) / 1000});
    }
    td_spawndesc_free(&d);
    w->via_spawner = via;
    w->spawn_t0 = t0;
    td_envlist_free(env);
    env = NULL;
    if (rc < 0) {
        err = -rc;
        if (!lent)
            rmdir(workdir);
        goto fail;
    }
    if (via && !s->tool->warm && !s->tool->parent) /* the next call's (a narrowed tool: none) */
        td_spares_refill(s->tool);

started:
    w->call_uid = taken;
    if (s->tool->egress && !w->warm && !w->via_spawner) /* NULL if the child failed before
                                                           handing it up; warm:
                                                           on_warm_listener(), spawner:
                                                           on_spawned() */
        w->egress = td_proxy_start(s->tool->egress, child.handed[TD_HAND_PROXY], &w->denied,
                                   s->batch_id, s->call_id);
    else if (child.handed[TD_HAND_PROXY] >= 0)
        close(child.handed[TD_HAND_PROXY]);
    w->tool = td_tool_ref(s->tool);
    w->batch_id = strdup(s->batch_id);
    w->call_id = strdup(s->call_id);
    w->workdir = workdir;
    w->timeout_ms = s->timeout_ms;
    w->pid = child.pid;
    /* the spawner's or the template's process comes later (on_spawned,
     * on_warm_forked) */
    w->state = w->warm || w->via_spawner ? TD_W_STARTING : TD_W_RUNNING;
    w->init = !w->warm && td_call_ns != 0; /* a warm call's PID 1 is the template's fork */
    w->exfd = child.report;
    /* a warm call's PID 1 (lib/warmp1.c) reports as toolexecd-init does;
     * its pipe is non-blocking already (td_sandbox_pipes, start_warm), and
     * uv_poll_init() makes it so besides */
    if ((w->init || w->warm) && w->exfd >= 0 && uv_poll_init(td_loop, &w->expoll, w->exfd) == 0) {
        w->expoll.data = w;
        w->handles++;
        w->expolling = true;
        uv_poll_start(&w->expoll, UV_READABLE, td_worker_on_report);
    }
    if (child.handed[TD_HAND_SECCOMP] >= 0)
        w->sysn = td_sysnotify_start(child.handed[TD_HAND_SECCOMP], &w->denied);
    w->cb = cb;
    w->cb_data = data;
    w->progress_cb = s->progress;
    w->serving = s->serve;
    w->answer_cb = s->answer;
    te_frame_decoder_init(&w->dec, w->max_output);
    pipe_open(w, &w->in, child.in);
    pipe_open(w, &w->out, child.out);
    pipe_open(w, &w->err, child.err);
    uv_timer_init(td_loop, &w->timer);
    w->timer.data = w;
    w->handles++;
    td_worker_counted();
    if (!w->warm && !w->via_spawner)
        td_reaper_watch(w->pid, td_worker_on_reaped, td_worker_on_exit, w);

    /* The request: one frame, then stdin is closed. */
    size_t len = strlen(body);
    te_frame_header((uint32_t)len, w->hdr);
    if (plain)
        body[len++] = '\n'; /* over the NUL: te_json_dumps() allocated len + 1 */
    w->reqbody = body;
    uv_buf_t bufs[2] = {uv_buf_init((char *)w->hdr, sizeof(w->hdr)), uv_buf_init(body, len)};
    w->wreq.data = w;
    if (uv_write(&w->wreq, (uv_stream_t *)&w->in, plain ? bufs + 1 : bufs, plain ? 1 : 2,
                 on_request_written) < 0)
        td_worker_close_handle(w, (uv_handle_t *)&w->in);
    uv_read_start((uv_stream_t *)&w->out, td_worker_alloc_cb, td_worker_on_stdout);
    uv_read_start((uv_stream_t *)&w->err, td_worker_alloc_cb, td_worker_on_stderr);
    /* The timeout counts from now, not from the loop's time cached before
     * the spawn: else it could fire before timeout_ms has passed since the
     * call's start (its duration_ms), which a call that ends on its init's
     * report, at once, then shows (test_metrics: 199.9 ms for 200). */
    uv_update_time(td_loop);
    if (!s->serve) /* a serving worker's timer is its call's (td_worker_send) */
        uv_timer_start(&w->timer, td_worker_on_timeout, s->timeout_ms, 0);
    td_logc(TD_LOG_DEBUG, s->batch_id, s->call_id, "started %s as pid %d", s->tool->name,
            (int)w->pid);
    return w;

fail:
    if (lent) { /* its process lives on: the spare keeps its uid, directory
                 * and cgroup until the spawner says it is gone */
        td_spares_untake(&grant);
        workdir = NULL;
        taken = (uid_t)-1;
        w->cg = NULL;
    }
    td_envlist_free(env);
    free(workdir);
    free(body);
    if (taken != (uid_t)-1) /* no process of the call was started */
        td_identity_give(taken);
    if (w) {
        td_cgroup_release(w->cg);
        td_learn_free(w->denied.learn);
    }
    free(w);
    if (refused) { /* said in the log by cred_env */
        *result = refused;
        return NULL;
    }
    *result = spawn_error(s, what, err);
    td_logc(TD_LOG_WARN, s->batch_id, s->call_id, "%s: %s", what, strerror(err));
    return NULL;
}
