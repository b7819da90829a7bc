/*
 * exitcause.c - a worker's exit status to its cause (see exitcause.h).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "exitcause.h"

static const char *signame(int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, len, "SIG%s", abbrev);
    else
        snprintf(buf, len, "SIG%d", sig);
    return buf;
}

void td_exit_decide(int status, const struct rusage *ru, uint64_t cpu_limit_ms, bool framed,
                    struct td_exit *e)
{
    memset(e, 0, sizeof(*e));
    if (WIFSIGNALED(status)) {
        e->signaled = true;
        e->signal = WTERMSIG(status);
        e->core_dumped = WCOREDUMP(status);
        signame(e->signal, e->signame, sizeof(e->signame));
        snprintf(e->detail, sizeof(e->detail), "terminated; signal %d (%s)%s", e->signal,
                 e->signame, e->core_dumped ? ", core dumped" : "");
        /* SIGXCPU is what RLIMIT_CPU sends at the soft limit; SIGKILL at
         * the hard one */
        e->cpu_ms = (long)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
                    (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000;
        e->cpu_limit =
            cpu_limit_ms &&
            (e->signal == SIGXCPU || (e->signal == SIGKILL && (uint64_t)e->cpu_ms >= cpu_limit_ms));
        return;
    }
    e->code = WEXITSTATUS(status);
    snprintf(e->detail, sizeof(e->detail), "exited with status %d%s", e->code,
             framed ? " without a response" : "");
}

static void say(struct td_exit *e, const char *fmt, const struct td_exit_limit *l)
{
    size_t n = strlen(e->detail);
    snprintf(e->detail + n, sizeof(e->detail) - n, fmt, (unsigned long long)l->value, l->name);
}

bool td_exit_limit(struct td_exit *e, const struct td_exit_seen *s, struct td_exit_limit *l)
{
    if (s->oom_kills > 0) {
        *l = (struct td_exit_limit){"memory_mb", s->memory_mb, "oom_kill"};
        say(e, "; out of memory at its limit of %llu MiB (limits.%s)", l);
    } else if (e->cpu_limit) {
        *l = (struct td_exit_limit){"cpu_ms", s->cpu_ms,
                                    e->signal == SIGXCPU ? "SIGXCPU" : "SIGKILL"};
        say(e, "; CPU time at its limit of %llu ms (limits.%s)", l);
    } else if (e->signaled && e->signal == SIGXFSZ && s->file_size_mb) {
        *l = (struct td_exit_limit){"file_size_mb", s->file_size_mb, "SIGXFSZ"};
        say(e, "; a file written at its size limit of %llu MiB (limits.%s)", l);
    } else if (s->pids_refusals > 0 && s->processes) {
        *l = (struct td_exit_limit){"processes", s->processes, "pids.max"};
        say(e, "; new processes refused at its limit of %llu (limits.%s)", l);
    } else {
        return false;
    }
    return true;
}
