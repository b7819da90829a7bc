/*
 * mcp_http_front.c - `toolexec mcp --listen`'s front: the HTTP transport
 * (mcp_http.h) joined to MCP cores (mcp_int.h), and the poll loop of both.
 *
 * Each session of 2025-11-25 and before gets a core of its own, with a
 * daemon connection of its own: its revision and capabilities, its calls,
 * its tools/list watch and the list changes it is told of are its alone,
 * and ending it (DELETE, expiry) cancels its calls as the end of standard
 * input does on stdio. The requests of 2026-07-28, which have no session,
 * share one core. A request's messages go to its exchange (the core's
 * stream cookie is the exchange); a session's own messages to its GET
 * stream; an exchange whose client went away is the core's
 * mcp_stream_gone(), which cancels its call: the daemon kills the worker.
 *
 * With --resource the front is an OAuth resource server (mcp_http_auth.c):
 * each request's subject goes to the core, which runs its calls for that
 * subject, and a tools/call needs one of its tool's scopes. The tools'
 * scopes come from a connection of the front's own that watches the
 * daemon's tools (format "mcp", whose "_meta" carries them): listed at
 * start, listed again when the daemon says they changed.
 *
 * Nothing here waits on the daemon: every connection to it is non-blocking
 * (te_client_connect_nb). An event that comes in pieces is kept until its
 * line is whole, requests the daemon does not read yet are queued (up to
 * MCP_HTTP_DAEMON_QUEUE a connection, then that request fails) and flushed
 * on POLLOUT, and a daemon whose listen backlog is full refuses a connect at
 * once. A core runs --daemon-batches calls at once on its connection (or,
 * without it, the daemon's --max-client-batches, which its capacity answer
 * tells: 64 until it has); the sessionless requests' core holds the
 * calls past that until one ends (mcp_state.c), rather than open more
 * connections: its tasks, questions (requestState) and subscriptions are
 * that core's, and a retry or tasks/get must find them.
 *
 * SIGTERM drains the front (mcp_http_ready.c): /ready says 503 so that a
 * load balancer moves away, new calls are refused, and the calls running
 * may finish for --drain-timeout seconds; those still running then are
 * answered with the draining error and cancelled, and the front exits 0.
 * SIGINT, a second SIGTERM or --drain-timeout 0 end it at once: every
 * session ends, every connection closes, the daemon cancels what the
 * closed connections ran.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp_auth.h"
#include "mcp_http.h"
#include "mcp_int.h"

struct core {
    struct mcp m;
    struct front *f;
    struct mcp_http_session *s; /* NULL: the sessionless requests' */
    bool ending;                /* its session is over: freed once idle */
    struct core *next;
};

struct front {
    struct cli *cli;
    struct mcp_http *h;
    const struct mcp *tmpl; /* what each core starts with */
    struct core *cores;
    struct core *shared;
    unsigned ncores;
    struct mcp_http_ready *ready;
    unsigned drain_s;
    long long drain_end_ms;   /* 0: not draining */
    bool drain_failed;        /* the calls left at drain_end_ms were failed */
    bool auth;                /* --resource: the tools' scopes are watched */
    te_client *watch;         /* the connection that watches them; NULL: lost */
    long long watch_retry_ms; /* when to connect it again */
    json_t *tools;            /* name -> its declaration, from the last list */
    unsigned batches;         /* a core's bound on its batches (max_batches) */
    bool learn_batches;       /* batches follows the daemon's capacity answer */
};

#define WATCH_RETRY_MS 2000 /* a lost tools' watch, connected again this often */
#define DRAIN_FLUSH_MS 2000 /* the failed calls' answers this long to go out */

static volatile sig_atomic_t stop_signal, nterms;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
    if (sig == SIGTERM)
        nterms++;
}

/* Whether the loop ends now; begins, or goes on with, a drain. */
static bool stopping(struct front *f, int *timeout)
{
    if (!stop_signal)
        return false;
    if (stop_signal != SIGTERM || nterms > 1 || !f->drain_s || !f->ready)
        return true;
    long long now = cli_now_ms();
    if (!f->drain_end_ms) {
        f->drain_end_ms = now + (long long)f->drain_s * 1000;
        mcp_http_drain(f->h);
        cli_err("mcp: SIGTERM: draining, the calls running have %us to finish", f->drain_s);
    }
    size_t left = mcp_http_drain_pending(f->h, false);
    if (!left)
        return true;
    if (now >= f->drain_end_ms && !f->drain_failed) {
        cli_err("mcp: drain: %zu call(s) still running, failed and cancelled", left);
        mcp_http_drain_pending(f->h, true);
        f->drain_failed = true;
    }
    long long end = f->drain_end_ms + (f->drain_failed ? DRAIN_FLUSH_MS : 0);
    if (f->drain_failed && now >= end)
        return true;
    long long due = end - now;
    if (*timeout < 0 || due < *timeout)
        *timeout = (int)(due > 60000 ? 60000 : due);
    return false;
}

/* The sink of a core: a request's messages to its exchange, the session's
 * to its GET stream (2026-07-28 has none: dropped). */
static void sink_send(void *ctx, json_t *msg, const struct mcp_reqctx *req, bool final)
{
    struct core *c = ctx;
    struct mcp_http_x *x = req ? req->stream : NULL;
    if (x && !mcp_http_x_held(c->f->h, x)) {
        json_decref(msg); /* its request is over */
        return;
    }
    if (!x) {
        if (c->s)
            mcp_http_session_send(c->s, msg);
        else
            json_decref(msg);
        return;
    }
    mcp_http_send(x, msg);
    if (final)
        mcp_http_release(x);
}

static void sink_dropped(void *ctx, const struct mcp_reqctx *req)
{
    struct core *c = ctx;
    if (req && req->stream && mcp_http_x_held(c->f->h, req->stream))
        mcp_http_release(req->stream);
}

static const struct mcp_sink_ops sink = {.send = sink_send, .dropped = sink_dropped};

static struct core *core_new(struct front *f, struct mcp_http_session *s)
{
    te_client *client = cli_connect_nb(f->cli, MCP_HTTP_DAEMON_QUEUE);
    struct core *c = client ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
        if (client)
            te_client_close(client);
        return NULL;
    }
    c->f = f;
    c->s = s;
    c->m.tool_timeout = f->tmpl->tool_timeout;
    c->m.heartbeat_ms = f->tmpl->heartbeat_ms;
    c->m.tools_wait_ms = f->tmpl->tools_wait_ms;
    c->m.max_batches = f->batches;
    mcp_tasks_settings(&c->m, f->tmpl);
    mcp_core_init(&c->m, f->cli, client, &sink, c);
    c->next = f->cores;
    f->cores = c;
    f->ncores++;
    return c;
}

static void core_free(struct front *f, struct core *c)
{
    for (struct core **p = &f->cores; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    f->ncores--;
    if (f->shared == c)
        f->shared = NULL;
    if (c->s)
        mcp_http_session_set_data(c->s, NULL);
    mcp_core_free(&c->m); /* what is left is dropped: its exchanges released */
    te_client_close(c->m.client);
    free(c);
}

/* The transport's ops */

static void on_message(void *ctx, struct mcp_http_session *s, struct mcp_http_x *x, json_t *msg,
                       const char *version, const char *subject)
{
    struct front *f = ctx;
    struct core *c = s ? mcp_http_session_data(s) : f->shared;
    if (!c) {
        c = core_new(f, s);
        if (s && c)
            mcp_http_session_set_data(s, c);
        else if (c)
            f->shared = c;
    }
    if (!c) {
        json_t *err =
            json_pack("{s:s,s:O?,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", json_object_get(msg, "id"),
                      "error", "code", RPC_INTERNAL_ERROR, "message", "cannot reach the daemon");
        json_decref(msg);
        mcp_http_send(x, err);
        mcp_http_release(x);
        return;
    }
    /* 2025-11-25's cancel names a request that came on another POST: the
     * core's calls are known by their stream, and the stream is the
     * request's exchange. */
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (!x && s && method && strcmp(method, "notifications/cancelled") == 0) {
        json_t *rid = json_object_get(json_object_get(msg, "params"), "requestId");
        struct mcp_http_x *target = rid ? mcp_http_x_find(f->h, s, rid) : NULL;
        json_decref(msg);
        if (target)
            mcp_stream_gone(&c->m, target);
        return;
    }
    struct mcp_origin o = {.stream = x, .version = version, .subject = subject};
    mcp_feed(&c->m, msg, &o);
}

static void on_closed(void *ctx, struct mcp_http_x *x)
{
    struct front *f = ctx;
    struct mcp_http_session *s = mcp_http_x_session(x);
    struct core *c = s ? mcp_http_session_data(s) : f->shared;
    if (c)
        mcp_stream_gone(&c->m, x);
}

static void on_session_end(void *ctx, struct mcp_http_session *s)
{
    (void)ctx;
    struct core *c = mcp_http_session_data(s);
    if (!c)
        return;
    c->ending = true;
    c->s = NULL;
    mcp_http_session_set_data(s, NULL);
    mcp_end_of_input(&c->m);
}

static const json_t *tool_scopes(void *ctx, const char *tool, bool *known)
{
    struct front *f = ctx;
    const json_t *decl = json_object_get(f->tools, tool);
    *known = decl != NULL;
    return mcp_auth_tool_scopes(decl);
}

static const struct mcp_http_core ops = {
    .message = on_message,
    .closed = on_closed,
    .session_end = on_session_end,
    .tool_scopes = tool_scopes,
};

/* The daemon's list (a "tools" event), as the catalog. */
static void take_tools(struct front *f, const json_t *ev)
{
    json_t *cat = json_object();
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(ev, "tools"), i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        if (name && cat)
            json_object_set(cat, name, (json_t *)t);
    }
    if (cat) {
        json_decref(f->tools);
        f->tools = cat;
    }
}

static json_t *tools_request(bool watch)
{
    return watch ? json_pack("{s:s,s:s,s:b}", "op", "tools", "format", "mcp", "watch", 1)
                 : json_pack("{s:s,s:s}", "op", "tools", "format", "mcp");
}

/* At start, before anything is served: the list, and its watch; waits
 * for the daemon's answer. -1: the daemon refused or went away. */
static int watch_tools(struct front *f)
{
    f->watch = cli_connect_nb(f->cli, MCP_HTTP_DAEMON_QUEUE);
    json_t *req = tools_request(true);
    int rc = f->watch && req ? cli_send(f->cli, f->watch, req) : CLI_EXIT_CONNECT;
    json_decref(req);
    while (rc == CLI_EXIT_OK && !f->tools) {
        json_t *ev;
        int r = te_client_flush(f->watch);
        if (r == 0)
            r = te_client_recv(f->watch, &ev);
        if (r == -EAGAIN) {
            short out = te_client_want_write(f->watch) ? POLLOUT : 0;
            struct pollfd p = {.fd = te_client_fd(f->watch), .events = POLLIN | out};
            if (poll(&p, 1, -1) < 0 && errno != EINTR)
                return cli_recv_failed(f->cli, -errno, "listing the tools");
            continue;
        }
        if (r < 0)
            return cli_recv_failed(f->cli, r, "listing the tools");
        const char *kind = json_string_value(json_object_get(ev, "event"));
        if (kind && strcmp(kind, "tools") == 0)
            take_tools(f, ev);
        else if (kind && strcmp(kind, "error") == 0)
            rc = CLI_EXIT_ERROR;
        json_decref(ev);
    }
    return rc;
}

/* The watch connection is ready: a change asks for the list again, a
 * list replaces the catalog. false: the connection is lost. */
static bool watch_readable(struct front *f, short revents)
{
    if ((revents & POLLOUT) && te_client_flush(f->watch) < 0)
        return false;
    if (!(revents & ~POLLOUT))
        return true;
    do {
        json_t *ev;
        int rc = te_client_recv(f->watch, &ev);
        if (rc == -EAGAIN)
            return true; /* a partial line, kept */
        if (rc < 0)
            return false;
        const char *kind = json_string_value(json_object_get(ev, "event"));
        if (kind && strcmp(kind, "tools") == 0)
            take_tools(f, ev);
        else if (kind && strcmp(kind, "tools_changed") == 0) {
            json_t *req = tools_request(false);
            if (!req || te_client_send(f->watch, req) < 0) {
                json_decref(req);
                json_decref(ev);
                return false;
            }
            json_decref(req);
        }
        json_decref(ev);
    } while (te_client_pending(f->watch));
    return true;
}

/* Cores whose daemon connection failed, or whose session ended and whose
 * calls the daemon has confirmed cancelled. */
static void reap(struct front *f)
{
    for (struct core *c = f->cores, *n; c; c = n) {
        n = c->next;
        if (c->m.lost) {
            cli_err("mcp: lost the daemon connection of a %s", c->s ? "session" : "client");
            mcp_fail_all(&c->m);
            if (c->s) /* its client starts again: 404 */
                mcp_http_session_end(c->s);
            core_free(f, c);
        } else if (c->ending && mcp_idle(&c->m)) {
            core_free(f, c);
        }
    }
}

/* Without the list, no tool is known: a tools/call with a JWT is refused
 * (403) until the daemon is back and has listed them again. */
static void watch_lost(struct front *f)
{
    cli_err("mcp: lost the daemon connection that lists the tools' scopes; tools/call "
            "refused until it is back");
    te_client_close(f->watch);
    f->watch = NULL;
    json_decref(f->tools);
    f->tools = json_object();
    f->watch_retry_ms = cli_now_ms() + WATCH_RETRY_MS;
}

/* Connect the watch again when it is time; else lower *timeout to then. */
static void rewatch(struct front *f, int *timeout)
{
    long long now = cli_now_ms();
    if (now < f->watch_retry_ms) {
        long long due = f->watch_retry_ms - now;
        if (*timeout < 0 || due < *timeout)
            *timeout = (int)due;
        return;
    }
    json_t *req = tools_request(true);
    f->watch = req ? cli_connect_nb(f->cli, MCP_HTTP_DAEMON_QUEUE) : NULL;
    if (f->watch && te_client_send(f->watch, req) < 0) {
        te_client_close(f->watch);
        f->watch = NULL;
    }
    json_decref(req);
    if (!f->watch) {
        f->watch_retry_ms = now + WATCH_RETRY_MS;
        if (*timeout < 0 || WATCH_RETRY_MS < *timeout)
            *timeout = WATCH_RETRY_MS;
    }
}

/* A daemon connection, for poll: POLLOUT too while requests are queued. */
static struct pollfd daemon_pollfd(const te_client *c)
{
    short out = te_client_want_write(c) ? POLLOUT : 0;
    return (struct pollfd){.fd = te_client_fd(c), .events = POLLIN | out};
}

static void daemon_ready(struct core *c, short revents)
{
    int rc = revents & POLLOUT ? te_client_flush(c->m.client) : 0;
    if (rc < 0) {
        c->m.lost = cli_send_failed(c->m.cli, rc);
        return;
    }
    if (revents & ~POLLOUT)
        mcp_daemon_readable(&c->m);
}

/* The daemon's bound, once its capacity answer tells it, for every core. */
static void learn_batches(struct front *f)
{
    unsigned v = f->learn_batches ? mcp_http_ready_batches(f->ready) : 0;
    if (!v || v == f->batches)
        return;
    f->batches = v;
    for (struct core *c = f->cores; c; c = c->next)
        c->m.max_batches = v;
}

static int loop(struct front *f, sigset_t *unblocked)
{
    size_t max = mcp_http_nfds(f->h);
    struct pollfd *fds = NULL;
    size_t cap = 0;
    for (;;) {
        reap(f);
        learn_batches(f);
        int timeout = -1;
        if (stopping(f, &timeout))
            break;
        if (cap < f->ncores + max + 2) { /* the tools' watch, the cores, /ready's, MHD's */
            cap = f->ncores + max + 2;
            free(fds);
            fds = calloc(cap, sizeof(*fds));
            if (!fds) {
                cli_err("mcp: out of memory");
                return CLI_EXIT_ERROR;
            }
        }
        size_t n = 0;
        if (f->auth && !f->watch)
            rewatch(f, &timeout);
        if (f->watch) /* first, when there is one */
            fds[n++] = daemon_pollfd(f->watch);
        for (struct core *c = f->cores; c; c = c->next) {
            int due = mcp_heartbeats(&c->m); /* it may send held calls: first */
            fds[n++] = daemon_pollfd(c->m.client);
            if (due >= 0 && (timeout < 0 || due < timeout))
                timeout = due;
        }
        short ready_events = 0;
        int rfd = mcp_http_ready_fd(f->ready, &ready_events);
        fds[n] = (struct pollfd){.fd = rfd, .events = ready_events}; /* -1: ignored */
        size_t nh = mcp_http_fds(f->h, fds + n + 1, &timeout);
        struct timespec ts = {timeout / 1000, (long)(timeout % 1000) * 1000000};
        if (ppoll(fds, n + 1 + nh, timeout < 0 ? NULL : &ts, unblocked) < 0) {
            if (errno == EINTR)
                continue;
            cli_err("poll: %s", strerror(errno));
            free(fds);
            return CLI_EXIT_ERROR;
        }
        /* the cores as polled: none is freed before reap() */
        size_t i = 0;
        if (f->watch) {
            short re = fds[i++].revents;
            if (re && !watch_readable(f, re))
                watch_lost(f);
        }
        for (struct core *c = f->cores; c && i < n; c = c->next, i++)
            if (fds[i].revents && !c->m.lost)
                daemon_ready(c, fds[i].revents);
        if (rfd >= 0 && fds[n].revents)
            mcp_http_ready_readable(f->ready, fds[n].revents);
        mcp_http_run(f->h, fds + n + 1, nh);
    }
    free(fds);
    return CLI_EXIT_OK;
}

/* The scopes the tools name, for the metadata's scopes_supported
 * (pointers into f->tools, at most max). */
static size_t all_scopes(const struct front *f, const char **out, size_t max)
{
    size_t n = 0;
    const char *name;
    const json_t *t, *v;
    json_object_foreach((json_t *)f->tools, name, t)
    {
        size_t i;
        json_array_foreach(mcp_auth_tool_scopes(t), i, v)
        {
            const char *sc = json_string_value(v);
            bool seen = !sc;
            for (size_t k = 0; k < n && !seen; k++)
                seen = strcmp(out[k], sc) == 0;
            if (!seen && n < max)
                out[n++] = sc;
        }
    }
    return n;
}

static void front_free(struct front *f, struct mcp_auth *auth)
{
    if (f->watch)
        te_client_close(f->watch);
    json_decref(f->tools);
    mcp_auth_close(auth);
}

int mcp_http_serve(struct cli *cli, const struct mcp_http_opts *o, const struct mcp *tmpl,
                   const struct mcp_auth_cfg *auth_cfg)
{
    struct front f = {.cli = cli, .tmpl = tmpl, .drain_s = o->drain_s};
    f.batches = tmpl->max_batches ? tmpl->max_batches : MCP_DAEMON_BATCHES;
    f.learn_batches = !tmpl->max_batches;
    /* the daemon first: a front that cannot reach it says so at once */
    te_client *probe = cli_connect_nb(cli, MCP_HTTP_DAEMON_QUEUE);
    if (!probe)
        return CLI_EXIT_CONNECT;
    te_client_close(probe);
    char err[512];
    struct mcp_http_opts ho = *o;
    struct mcp_auth *auth = NULL;
    if (auth_cfg) {
        f.auth = true;
        int rc = watch_tools(&f);
        if (rc != CLI_EXIT_OK) {
            front_free(&f, NULL);
            return rc;
        }
        const char *scopes[MCP_AUTH_MAX_SCOPES];
        struct mcp_auth_cfg cfg = *auth_cfg;
        cfg.scopes_supported = scopes;
        cfg.nscopes_supported = all_scopes(&f, scopes, MCP_AUTH_MAX_SCOPES);
        auth = mcp_auth_open(&cfg, err, sizeof(err));
        if (!auth) {
            front_free(&f, NULL);
            return cli_usage_error("mcp", "%s", err);
        }
        ho.auth = auth;
    }
    f.h = mcp_http_start(&ho, &ops, &f, err, sizeof(err));
    if (!f.h) {
        front_free(&f, auth);
        return cli_usage_error("mcp", "%s", err);
    }
    f.ready = mcp_http_ready_new(f.h, cli->socket_path);
    if (auth)
        cli_err("mcp: serving MCP over HTTP at http://%s/mcp for %s; bearer tokens needed, "
                "metadata at %s",
                mcp_http_where(f.h), auth_cfg->resource, mcp_auth_prm_url(auth));
    else
        cli_err("mcp: serving MCP over HTTP at http://%s/mcp; no authorization (--resource): "
                "%s",
                mcp_http_where(f.h),
                o->allow_remote ? "anyone who can reach it may call every tool"
                                : "loopback only, anyone on this machine may call every tool");
    signal(SIGPIPE, SIG_IGN);
    sigset_t block, unblocked;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &unblocked);
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int rc = loop(&f, &unblocked);
    /* Cores first: freeing one releases its exchanges, while they exist. */
    while (f.cores)
        core_free(&f, f.cores);
    mcp_http_ready_free(f.ready);
    mcp_http_stop(f.h);
    front_free(&f, auth);
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
    return rc;
}
