/*
 * loopback_up.c - what bringing lo up costs a call in a fresh network
 * namespace ("network": false; sandbox.c step 7d), measured by hand, never
 * as a timed test:
 *
 *   sudo build/bench/loopback_up [PAIRS [N]]
 *
 * PAIRS interleaved rounds of N children each: fork, unshare(CLONE_NEWNET),
 * then exit, against the same with te_loopback_up() before the exit. It
 * prints the time of the ioctls in the child (the daemon's loop waits for
 * that part: its spawn child shares its memory until exec) and the whole
 * per-child delta, which also holds the kernel's teardown of a namespace
 * whose lo is up.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "toolexec.h"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Mean us per child; *up_us: mean of te_loopback_up() alone. */
static double round_of(int n, int lo, int p[2], double *up_us)
{
    double t0 = now_us(), up = 0;
    for (int i = 0; i < n; i++) {
        pid_t c = fork();
        if (c == 0) {
            if (unshare(CLONE_NEWNET) < 0)
                _exit(2);
            double a = now_us();
            if (lo && te_loopback_up() < 0)
                _exit(3);
            double b = now_us() - a;
            _exit(write(p[1], &b, sizeof(b)) == sizeof(b) ? 0 : 4);
        }
        int st;
        double b = 0;
        if (c < 0 || read(p[0], &b, sizeof(b)) != sizeof(b) || waitpid(c, &st, 0) != c ||
            !WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "loopback_up: a child failed (root, or user namespaces, needed)\n");
            exit(1);
        }
        up += b;
    }
    *up_us = up / n;
    return (now_us() - t0) / n;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int pairs = argc > 1 ? atoi(argv[1]) : 10, n = argc > 2 ? atoi(argv[2]) : 100;
    if (pairs < 1 || pairs > 100 || n < 1) {
        fprintf(stderr, "usage: loopback_up [PAIRS (1-100) [N]]\n");
        return 2;
    }
    int p[2];
    if (pipe(p) < 0)
        return 1;
    double delta[100], up[100], ignored;
    for (int r = 0; r < pairs; r++) {
        double a = round_of(n, 0, p, &ignored), b = round_of(n, 1, p, &up[r]);
        delta[r] = b - a;
        printf("netns %.0f us, netns + lo up %.0f us (ioctls %.0f us): delta %.0f us\n", a, b,
               up[r], delta[r]);
    }
    qsort(delta, (size_t)pairs, sizeof(double), by_value);
    qsort(up, (size_t)pairs, sizeof(double), by_value);
    printf("median: ioctls %.0f us in the child; %.0f us per call in all (%.0f-%.0f)\n",
           up[pairs / 2], delta[pairs / 2], delta[0], delta[pairs - 1]);
    return 0;
}
