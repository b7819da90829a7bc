/*
 * bench.c - the cost of a call through toolexecd against the cost of the
 * same worker run by a plain fork+exec+pipe loop, measured in the same run.
 *
 *   bench SOCKET WORKER [CALLS]
 *
 * SOCKET is a running toolexecd whose tool "echo" runs WORKER (a trivial
 * framed tool). For concurrency 1 and 16 it times CALLS calls both ways and
 * prints per-call costs and the ratio daemon / plain. A third line times
 * single-call batches one after another (the full socket round trip per
 * call) against the plain loop at concurrency 1.
 *
 *   bench --plain WORKER CALLS CONCURRENCY
 *
 * runs only the plain loop, for a timer outside (bench/confine.py);
 * BENCH_WRAP="bwrap ..." runs each worker through that command line, and
 * BENCH_NS=1 (root) starts each worker in a new mount and PID namespace
 * with only what any mount-namespace confinement must do there (every
 * mount private, a /proc of its own): the kernel's floor under the
 * default view, without the view.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "toolexec.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, int err)
{
    fprintf(stderr, "bench: %s: %s\n", what, strerror(err));
    exit(1);
}

/* ---- baseline: fork + exec + pipes, c in flight ---- */

struct slot {
    pid_t pid;
    int out;
};

static const char request[] = "{\"tool\":\"echo\",\"arguments\":{\"x\":1}}";

/* BENCH_WRAP="bwrap --ro-bind / / ...": the plain loop runs the worker
 * through that command line (bench/confine.sh: bubblewrap). */
static char *wrap[32];
static int nwrap;
static bool in_ns; /* BENCH_NS=1 */

static void spawn(const char *worker, struct slot *s)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
        die("pipe", errno);
    pid_t pid = in_ns ? (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0)
                      : fork();
    if (pid < 0)
        die("fork", errno);
    if (pid == 0) {
        if (in_ns && (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                      mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0))
            _exit(126);
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (nwrap) {
            wrap[nwrap] = (char *)worker;
            execv(wrap[0], wrap);
        }
        execl(worker, worker, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    uint8_t hdr[4];
    te_frame_header(sizeof(request) - 1, hdr);
    if (write(in[1], hdr, 4) != 4 || write(in[1], request, sizeof(request) - 1) < 0)
        die("write", errno);
    close(in[1]);
    s->pid = pid;
    s->out = out[0];
}

static double plain_loop(const char *worker, int calls, int conc)
{
    struct slot *slots = calloc((size_t)conc, sizeof(*slots));
    struct pollfd *pfd = calloc((size_t)conc, sizeof(*pfd));
    int started = 0, done = 0;
    double t0 = now();
    for (int i = 0; i < conc && started < calls; i++, started++)
        spawn(worker, &slots[i]);
    for (int i = started; i < conc; i++)
        slots[i].out = -1;
    while (done < calls) {
        for (int i = 0; i < conc; i++)
            pfd[i] = (struct pollfd){.fd = slots[i].out, .events = POLLIN};
        if (poll(pfd, (nfds_t)conc, -1) < 0 && errno != EINTR)
            die("poll", errno);
        for (int i = 0; i < conc; i++) {
            if (slots[i].out < 0 || !(pfd[i].revents & (POLLIN | POLLHUP)))
                continue;
            char buf[4096];
            ssize_t n = read(slots[i].out, buf, sizeof(buf));
            if (n > 0)
                continue;
            /* EOF: the response is in, the worker is exiting */
            close(slots[i].out);
            slots[i].out = -1;
            if (in_ns) /* as the daemon does: not waiting for the teardown
                        * of the namespaces behind the exit */
                while (waitpid(-1, NULL, WNOHANG) > 0)
                    ;
            else
                waitpid(slots[i].pid, NULL, 0);
            done++;
            if (started < calls) {
                spawn(worker, &slots[i]);
                started++;
            }
        }
    }
    double t = now() - t0;
    while (in_ns && wait(NULL) > 0)
        ;
    free(slots);
    free(pfd);
    return t / calls;
}

/* ---- through the daemon ---- */

static te_client *connect_or_die(const char *sock)
{
    te_client *c;
    int rc = te_client_connect(sock, &c);
    if (rc < 0)
        die(sock, -rc);
    return c;
}

/* Run one batch of n echo calls at concurrency conc; returns when its
 * batch_completed arrives. */
static void run_batch(te_client *c, int n, int conc)
{
    json_t *calls = json_array();
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "c%d", i);
        json_array_append_new(
            calls, json_pack("{s:s,s:s,s:{s:i}}", "id", id, "name", "echo", "arguments", "x", 1));
    }
    json_t *req = json_pack("{s:s,s:o,s:i}", "op", "run", "calls", calls, "max_concurrency", conc);
    int rc = te_client_send(c, req);
    json_decref(req);
    if (rc < 0)
        die("send", -rc);
    int ok = 0;
    for (;;) {
        json_t *ev;
        if ((rc = te_client_recv(c, &ev)) < 0)
            die("recv", -rc);
        const char *name = json_string_value(json_object_get(ev, "event"));
        if (strcmp(name, "tool_execution_completed") == 0 &&
            json_object_get(json_object_get(ev, "result"), "ok"))
            ok++;
        if (strcmp(name, "error") == 0)
            fprintf(stderr, "bench: %s\n", json_string_value(json_object_get(ev, "message")));
        bool end = strcmp(name, "batch_completed") == 0 || strcmp(name, "error") == 0;
        json_decref(ev);
        if (end)
            break;
    }
    if (ok != n) {
        fprintf(stderr, "bench: only %d of %d calls succeeded\n", ok, n);
        exit(1);
    }
}

static double daemon_batch(const char *sock, int calls, int conc)
{
    te_client *c = connect_or_die(sock);
    double t0 = now();
    run_batch(c, calls, conc);
    double t = now() - t0;
    te_client_close(c);
    return t / calls;
}

static double daemon_round_trips(const char *sock, int calls)
{
    te_client *c = connect_or_die(sock);
    double t0 = now();
    for (int i = 0; i < calls; i++)
        run_batch(c, 1, 1);
    double t = now() - t0;
    te_client_close(c);
    return t / calls;
}

int main(int argc, char **argv)
{
    char *w = getenv("BENCH_WRAP") ? strdup(getenv("BENCH_WRAP")) : NULL;
    for (char *save = NULL, *t = w ? strtok_r(w, " ", &save) : NULL; t && nwrap < 30;
         t = strtok_r(NULL, " ", &save))
        wrap[nwrap++] = t;
    in_ns = getenv("BENCH_NS") && strcmp(getenv("BENCH_NS"), "1") == 0;
    if (argc < 3) {
        fprintf(stderr, "usage: bench SOCKET WORKER [CALLS]\n"
                        "       bench --plain WORKER CALLS CONCURRENCY\n");
        return 2;
    }
    if (strcmp(argv[1], "--plain") == 0) {
        /* the plain loop alone (through BENCH_WRAP if set), for a timer
         * outside: bench/confine.sh */
        plain_loop(argv[2], argc > 3 ? atoi(argv[3]) : 300, argc > 4 ? atoi(argv[4]) : 1);
        return 0;
    }
    const char *sock = argv[1], *worker = argv[2];
    int calls = argc > 3 ? atoi(argv[3]) : 2000;
    /* warm up both paths (page cache, the daemon's allocations) */
    plain_loop(worker, 50, 4);
    daemon_batch(sock, 50, 4);

    printf("%-34s %12s %12s %8s\n", "mode", "plain us", "daemon us", "ratio");
    const int concs[] = {1, 16};
    for (size_t i = 0; i < 2; i++) {
        int conc = concs[i];
        /* interleave the two so drift on the host hits both alike */
        double p1 = plain_loop(worker, calls / 2, conc);
        double d1 = daemon_batch(sock, calls / 2, conc);
        double p2 = plain_loop(worker, calls / 2, conc);
        double d2 = daemon_batch(sock, calls / 2, conc);
        double p = (p1 + p2) / 2, d = (d1 + d2) / 2;
        char label[64];
        snprintf(label, sizeof(label), "one batch, concurrency %d", conc);
        printf("%-34s %12.1f %12.1f %8.2f\n", label, p * 1e6, d * 1e6, d / p);
    }
    int rt = calls / 4;
    double p = plain_loop(worker, rt, 1);
    double d = daemon_round_trips(sock, rt);
    printf("%-34s %12.1f %12.1f %8.2f\n", "1-call batches, one at a time", p * 1e6, d * 1e6, d / p);
    return 0;
}
