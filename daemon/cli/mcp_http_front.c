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
 * SIGTERM drains the front (mcp_http_ready.c): /ready says 503 so that a
 * load balancer moves away, new calls are refused, and the calls running
 * may finish for --drain-timeout seconds; those still running then are
 * answered with the draining error and cancelled, and the front exits 0.
 * SIGINT, a second SIGTERM or --drain-timeout 0 end it at once: every
 * session ends, every connection closes, the daemon cancels what the
 * closed connections ran.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    long long drain_end_ms; /* 0: not draining */
    bool drain_failed;      /* the calls left at drain_end_ms were failed */
};

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
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long long now = (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
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
    te_client *client = cli_connect(f->cli);
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
                       const char *version)
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
    struct mcp_origin o = {.stream = x, .version = version};
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

static const struct mcp_http_core ops = {
    .message = on_message,
    .closed = on_closed,
    .session_end = on_session_end,
};

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

static int loop(struct front *f, sigset_t *unblocked)
{
    size_t max = mcp_http_nfds(f->h);
    struct pollfd *fds = NULL;
    size_t cap = 0;
    for (;;) {
        reap(f);
        int timeout = -1;
        if (stopping(f, &timeout))
            break;
        if (cap < f->ncores + max + 1) {
            cap = f->ncores + max + 1;
            free(fds);
            fds = calloc(cap, sizeof(*fds));
            if (!fds) {
                cli_err("mcp: out of memory");
                return CLI_EXIT_ERROR;
            }
        }
        size_t n = 0;
        for (struct core *c = f->cores; c; c = c->next) {
            fds[n++] = (struct pollfd){.fd = mcp_daemon_fd(&c->m), .events = POLLIN};
            int due = mcp_heartbeats(&c->m);
            if (due >= 0 && (timeout < 0 || due < timeout))
                timeout = due;
        }
        int rfd = mcp_http_ready_fd(f->ready);
        fds[n] = (struct pollfd){.fd = rfd, .events = POLLIN}; /* -1: ignored */
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
        for (struct core *c = f->cores; c && i < n; c = c->next, i++)
            if (fds[i].revents && !c->m.lost)
                mcp_daemon_readable(&c->m);
        if (rfd >= 0 && fds[n].revents)
            mcp_http_ready_readable(f->ready);
        mcp_http_run(f->h, fds + n + 1, nh);
    }
    free(fds);
    return CLI_EXIT_OK;
}

int mcp_http_serve(struct cli *cli, const struct mcp_http_opts *o, const struct mcp *tmpl)
{
    struct front f = {.cli = cli, .tmpl = tmpl, .drain_s = o->drain_s};
    /* the daemon first: a front that cannot reach it says so at once */
    te_client *probe = cli_connect(cli);
    if (!probe)
        return CLI_EXIT_CONNECT;
    te_client_close(probe);
    char err[512];
    f.h = mcp_http_start(o, &ops, &f, err, sizeof(err));
    if (!f.h)
        return cli_usage_error("mcp", "%s", err);
    f.ready = mcp_http_ready_new(f.h, cli->socket_path);
    cli_err("mcp: serving MCP over HTTP at http://%s/mcp", mcp_http_where(f.h));
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
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
    return rc;
}
