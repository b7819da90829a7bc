/*
 * fswatch_verify.c - what the kernel's verifier does with fswatch.bpf.c,
 * measured by hand, never as a timed test:
 *
 *   sudo build/bench/fswatch_verify [N]
 *
 * Both embedded objects (with bpf_loop, and the fallback without it) loaded
 * N times each (default 20), interleaved, as fswatch.c loads a one-shot
 * run's (its tables sized for one uid), with the verifier's statistics
 * asked for (log_level 4: BPF_LOG_STATS). It prints, per object: the
 * instructions the verifier walked ("processed"), its states, and the
 * median and quartiles of its own "verification time" and of the whole
 * load's CPU (libbpf's probes included on the first one only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <bpf/libbpf.h>

#include "fswatch_noloop_obj.h"
#include "fswatch_obj.h"

static char logbuf[1 << 20];

static int silent(enum libbpf_print_level l, const char *f, va_list ap)
{
    (void)l, (void)f, (void)ap;
    return 0;
}

static double cpu_ms(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
           (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void quartiles(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    printf("  %-18s median %7.3f ms  (q1 %.3f, q3 %.3f)\n", what, v[n / 2], v[n / 4],
           v[(3 * n) / 4]);
}

/* One load: 0 and *us, the verifier's time, and the stats line in stats. */
static int load(const unsigned char *obj, size_t len, double *us, double *cpu, char *stats,
                size_t slen)
{
    struct bpf_object *o = bpf_object__open_mem(obj, len, NULL);
    if (!o)
        return -1;
    bpf_map__set_max_entries(bpf_object__find_map_by_name(o, "calls"), 1);
    bpf_map__set_max_entries(bpf_object__find_map_by_name(o, "ring"), 1 << 18);
    struct bpf_program *p = bpf_object__find_program_by_name(o, "fsw_sys_exit");
    logbuf[0] = 0;
    bpf_program__set_log_level(p, 4);
    bpf_program__set_log_buf(p, logbuf, sizeof(logbuf));
    double c = cpu_ms();
    int rc = bpf_object__load(o);
    *cpu = cpu_ms() - c;
    bpf_object__close(o);
    const char *t = strstr(logbuf, "verification time ");
    const char *s = strstr(logbuf, "processed ");
    if (rc < 0 || !t || !s)
        return -1;
    *us = atof(t + strlen("verification time ")) / 1e3;
    snprintf(stats, slen, "%.*s", (int)strcspn(s, "\n"), s);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20;
    if (n < 1 || n > 1000)
        n = 20;
    libbpf_set_print(silent);
    struct {
        const char *name;
        const unsigned char *obj;
        size_t len;
        double *ver, *cpu;
        char stats[256];
    } o[] = {
        {"with bpf_loop", td_fswatch_obj, sizeof(td_fswatch_obj), NULL, NULL, ""},
        {"without bpf_loop", td_fswatch_obj_noloop, sizeof(td_fswatch_obj_noloop), NULL, NULL, ""}};
    for (int k = 0; k < 2; k++)
        if (!(o[k].ver = calloc((size_t)n, sizeof(double))) ||
            !(o[k].cpu = calloc((size_t)n, sizeof(double))))
            return 1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++)
            if (load(o[k].obj, o[k].len, &o[k].ver[i], &o[k].cpu[i], o[k].stats,
                     sizeof(o[k].stats)) < 0) {
                fprintf(stderr, "%s: not loaded (root, CAP_BPF and CAP_PERFMON?)\n", o[k].name);
                return 1;
            }
    for (int k = 0; k < 2; k++) {
        printf("%s, %d loads: %s\n", o[k].name, n, o[k].stats);
        quartiles("verification time", o[k].ver, n);
        quartiles("load's CPU", o[k].cpu, n);
    }
    return 0;
}
