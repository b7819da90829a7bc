/*
 * seccomp_attach.c - what attaching a call's system-call filter costs,
 * measured by hand, never as a timed test:
 *
 *   sudo build/bench/seccomp_attach [PAIRS [N [FILE.bpf...]]]
 *
 * The daemon's default filter (sysfilter.c, the common one with the host's
 * network, as a default call gets it) and a one-instruction ALLOW, each
 * attached with and without a listener, the default's listener also handed
 * up as sandbox.c does (a datagram socket pair, SCM_RIGHTS), and any
 * classic-BPF FILE given (struct sock_filter as the kernel takes them, e.g.
 * another layout of the filter to compare), with its listener handed up:
 * PAIRS interleaved rounds of N forked children each, which set
 * no_new_privs, attach and exit. It prints, medians: the filter's length;
 * "attach", the seccomp() call in the child (the kernel's copy, checks,
 * conversion to eBPF, JIT and constant-action cache; with the hand-over,
 * the sendmsg too): the daemon waits for that part, its spawn child shares
 * its memory until exec; "parent", the hand-over's other end (the socket
 * pair, the receive, the closes: the listener's, the child gone, frees the
 * filter); "child", the whole fork to reaped (with the exit, less the
 * system calls below); and, after the attach, the mean time of a getppid()
 * and a close(-1), which the cache lets through without running the filter.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "report.h"
#include "sandbox.h"
#include "sysfilter.h"

#define SYSCALLS 200
#define LISTENER SECCOMP_FILTER_FLAG_NEW_LISTENER

struct variant {
    const char *name;
    struct sock_fprog prog; /* len 0: no filter at all */
    unsigned flags;
    bool hand; /* the listener handed up as sandbox.c does (step 1a, 11b) */
    double *attach, *child, *per_syscall, *up; /* one per child */
    size_t n;
};

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* One round of n children into v's samples. shared: the child's attach
 * time, its per-syscall time and its loop's whole time. */
static int round_of(struct variant *v, int n, volatile double *shared)
{
    for (int i = 0; i < n; i++) {
        double t0 = now_us(), up = 0;
        int ho[2] = {-1, -1};
        if (v->hand && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ho) < 0)
            return -1;
        up += now_us() - t0;
        pid_t c = fork();
        if (c == 0) {
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                (v->hand && dup2(ho[1], TD_HANDOVER_FD) < 0))
                _exit(2);
            double a = now_us();
            if (v->prog.len) {
                long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, v->flags, &v->prog);
                if (fd < 0 || (v->hand && td_sandbox_hand_over(TD_HAND_SECCOMP, (int)fd) < 0))
                    _exit(3);
                if (v->flags & SECCOMP_FILTER_FLAG_NEW_LISTENER)
                    close((int)fd);
            }
            double b = now_us();
            for (int k = 0; k < SYSCALLS; k++) {
                syscall(SYS_getppid);
                syscall(SYS_close, -1);
            }
            double loop = now_us() - b;
            shared[0] = b - a;
            shared[1] = loop / (2 * SYSCALLS);
            shared[2] = loop;
            _exit(0);
        }
        int st;
        if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "seccomp_attach: %s: child failed\n", v->name);
            return -1;
        }
        if (v->hand) {
            double u = now_us();
            int handed[TD_HAND_COUNT] = {-1, -1};
            close(ho[1]);
            td_sandbox_recv_handed(ho[0], MSG_DONTWAIT, handed);
            close(ho[0]);
            if (handed[TD_HAND_SECCOMP] < 0)
                return -1;
            close(handed[TD_HAND_SECCOMP]);
            up += now_us() - u;
        }
        v->up[v->n] = up;
        v->attach[v->n] = shared[0];
        v->per_syscall[v->n] = shared[1];
        v->child[v->n++] = now_us() - t0 - shared[2];
    }
    return 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp);
    return n ? v[n / 2] : 0;
}

static int load_file(const char *path, struct sock_fprog *prog)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0 ||
        st.st_size % sizeof(struct sock_filter) ||
        st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
        fprintf(stderr, "seccomp_attach: %s: not a classic BPF program\n", path);
        return -1;
    }
    struct sock_filter *f = malloc((size_t)st.st_size);
    if (!f || read(fd, f, (size_t)st.st_size) != st.st_size)
        return -1;
    close(fd);
    prog->filter = f;
    prog->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
    return 0;
}

int main(int argc, char **argv)
{
    int pairs = argc > 1 ? atoi(argv[1]) : 5;
    int n = argc > 2 ? atoi(argv[2]) : 500;
    if (td_sysfilter_setup() < 0)
        return 1;
    const struct td_sysfilter *def = td_sysfilter_get(NULL, TD_NET_HOST);
    static struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog one = {.len = 1, .filter = &allow};
    struct variant vs[16] = {
        {"no filter", {0, NULL}, 0, false, NULL, NULL, NULL, NULL, 0},
        {"allow, 1 insn", one, 0, false, NULL, NULL, NULL, NULL, 0},
        {"allow, 1 insn, listener", one, LISTENER, false, NULL, NULL, NULL, NULL, 0},
        {"default", def->prog, 0, false, NULL, NULL, NULL, NULL, 0},
        {"default, listener", def->prog, LISTENER, false, NULL, NULL, NULL, NULL, 0},
        {"default, listener handed up", def->prog, LISTENER, true, NULL, NULL, NULL, NULL, 0},
    };
    int nv = 6;
    for (int i = 3; i < argc && nv < 16; i++, nv++) {
        vs[nv].name = argv[i];
        vs[nv].flags = LISTENER;
        vs[nv].hand = true;
        if (load_file(argv[i], &vs[nv].prog) < 0)
            return 1;
    }
    volatile double *shared =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return 1;
    for (int i = 0; i < nv; i++) {
        size_t total = (size_t)pairs * (size_t)n;
        vs[i].attach = calloc(total, sizeof(double));
        vs[i].child = calloc(total, sizeof(double));
        vs[i].per_syscall = calloc(total, sizeof(double));
        vs[i].up = calloc(total, sizeof(double));
        if (!vs[i].attach || !vs[i].child || !vs[i].per_syscall || !vs[i].up)
            return 1;
    }
    for (int p = 0; p < pairs; p++)
        for (int i = 0; i < nv; i++)
            if (round_of(&vs[i], n, shared) < 0)
                return 1;
    printf("%d rounds x %d children; us, medians\n", pairs, n);
    printf("  %-30s %5s %8s %8s %8s %12s\n", "filter", "insns", "attach", "parent", "child",
           "per syscall");
    for (int i = 0; i < nv; i++)
        printf("  %-30s %5u %8.1f %8.1f %8.1f %12.3f\n", vs[i].name, vs[i].prog.len,
               median(vs[i].attach, vs[i].n), median(vs[i].up, vs[i].n),
               median(vs[i].child, vs[i].n), median(vs[i].per_syscall, vs[i].n));
    return 0;
}
