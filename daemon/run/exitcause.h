/*
 * exitcause.h - what a worker's exit status means, when it exited before
 * its result was known: "terminated; signal 9 (SIGKILL)", the CPU limit,
 * "exited with status 1". Pure: tested in daemon/unit/test_exitcause.c.
 */
#ifndef TD_EXITCAUSE_H
#define TD_EXITCAUSE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

struct td_exit {
    bool signaled;
    int code; /* the exit status, when not signaled */
    int signal;
    bool core_dumped;
    char signame[32]; /* "SIGKILL"; "SIG64" for one without a name */
    bool cpu_limit;   /* RLIMIT_CPU ended it */
    long cpu_ms;      /* user + system, from wait4() */
    char detail[512];
};

/* status: from wait(); ru: the worker's resource use; cpu_limit_ms: its
 * cpu_ms limit (0: none); framed: the tool speaks the framed protocol (an
 * exit is then "without a response"). */
void td_exit_decide(int status, const struct rusage *ru, uint64_t cpu_limit_ms, bool framed,
                    struct td_exit *e);

/* What the kernel saw of a call's limits when it failed: its limits (0: not
 * set) and the counters of its cgroup (0 without one). */
struct td_exit_seen {
    uint64_t memory_mb, processes, file_size_mb, cpu_ms;
    long long oom_kills;     /* memory.events oom_kill: memory.max */
    long long pids_refusals; /* pids.events max: forks pids.max refused */
};

/* The limit a failed call met, as cause.resource_limit: the key of "limits" that
 * sets it, its value in that key's unit, and what showed it. */
struct td_exit_limit {
    const char *name;    /* "memory_mb" */
    uint64_t value;      /* 64 */
    const char *reached; /* "oom_kill", "SIGXCPU", "SIGKILL", "SIGXFSZ", "pids.max" */
};

/* Which of the call's limits its failure shows, the likeliest first: an
 * OOM kill, the CPU limit's signal, SIGXFSZ, then forks refused at
 * pids.max (a tool may fail for it without being killed). Says so in e's
 * detail; false when none. A limit met inside the tool (RLIMIT_AS,
 * RLIMIT_NPROC, RLIMIT_NOFILE, SIGXFSZ ignored) leaves nothing to see
 * from here. */
bool td_exit_limit(struct td_exit *e, const struct td_exit_seen *s, struct td_exit_limit *l);

#endif
