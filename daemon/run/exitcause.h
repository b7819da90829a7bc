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
/* A signaled worker that the kernel's OOM killer ended (memory.max): say so
 * in the detail. */
void td_exit_oom(struct td_exit *e, uint64_t memory_mb);

#endif
