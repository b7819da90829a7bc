/*
 * tw_procs.c - testworker: processes a call leaves or makes: a grandchild
 * ("grandchild", "setsid-grandchild") that lingers as "linger TOKEN FD", and
 * children held alive against a process limit ("fork-many").
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testworker.h"

json_t *grandchild(const te_call *call)
{
    const json_t *args = call->arguments;
    const char *token = arg_str(args, "token", "no-token");
    int ready[2];
    if (pipe(ready) < 0)
        return te_raised("OSError", "pipe failed", NULL);
    pid_t pid = fork();
    if (pid < 0)
        return te_raised("OSError", "fork failed", NULL);
    if (pid == 0) {
        /* The grandchild re-executes this program as "linger TOKEN FD" so
         * that a test can find it from outside by the token in its command
         * line, whatever PID namespace it lives in. */
        close(ready[0]);
        if (json_is_true(json_object_get(args, "setsid")))
            setsid();
        char fd[16];
        snprintf(fd, sizeof fd, "%d", ready[1]);
        char *const argv[] = {(char *)"testworker", (char *)"linger", (char *)token, fd, NULL};
        execv("/proc/self/exe", argv);
        execv(g_argv[0], argv);
        _exit(126);
    }
    close(ready[1]);
    char byte;
    ssize_t n;
    while ((n = read(ready[0], &byte, 1)) < 0 && errno == EINTR)
        ;
    close(ready[0]);
    if (n != 1)
        return te_error(json_string("grandchild: did not start"));
    const char *then = arg_str(args, "then", "ok");
    if (strcmp(then, "exit") == 0) {
        say("testworker: grandchild forked, exiting with 3\n");
        _exit(3);
    }
    if (strcmp(then, "sleep") == 0) {
        say("testworker: grandchild forked, sleeping\n");
        sleep_forever();
    }
    return te_ok(json_pack("{s:I, s:s}", "grandchild", (json_int_t)pid, "token", token));
}

/* "linger TOKEN FD [BURN_MS]": a grandchild. Lets go of the worker's pipes,
 * burns BURN_MS of CPU when given (test_init_report: whose use the call's
 * init must count), tells its parent it runs, then sleeps 60 s; only a kill
 * by the daemon ends it early. */
int linger_mode(int argc, char **argv)
{
    if (argc > 4) {
        long long burn = atoll(argv[4]);
        struct rusage ru;
        do
            getrusage(RUSAGE_SELF, &ru);
        while ((ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000LL +
                   (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000 <
               burn);
    }
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2)
            close(null);
    }
    if (argc > 3) {
        int fd = atoi(argv[3]);
        write_all(fd, "!", 1);
        close(fd);
    }
    for (int i = 0; i < 600; i++)
        sleep_ms(100);
    return 0;
}

/* "setsid-grandchild": the classic daemon double fork. The worker's child
 * forks the grandchild and exits at once, so the grandchild is an orphan;
 * the grandchild calls setsid(), leaving the worker's process group and
 * session, and lingers. */
json_t *setsid_grandchild(const te_call *call)
{
    const json_t *args = call->arguments;
    const char *token = arg_str(args, "token", "no-token");
    int ready[2];
    if (pipe(ready) < 0)
        return te_raised("OSError", "pipe failed", NULL);
    pid_t child = fork();
    if (child < 0)
        return te_raised("OSError", "fork failed", NULL);
    if (child == 0) {
        close(ready[0]);
        pid_t gc = fork();
        if (gc < 0)
            _exit(1);
        if (gc > 0)
            _exit(0); /* the middle process leaves at once */
        if (setsid() < 0)
            _exit(2);
        char fd[16], burn[24];
        snprintf(fd, sizeof fd, "%d", ready[1]);
        snprintf(burn, sizeof burn, "%lld", arg_int(args, "burn_ms", 0));
        char *const argv[] = {(char *)"testworker",
                              (char *)"linger",
                              (char *)token,
                              fd,
                              arg_int(args, "burn_ms", 0) ? burn : NULL,
                              NULL};
        execv("/proc/self/exe", argv);
        execv(g_argv[0], argv);
        _exit(126);
    }
    close(ready[1]);
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    char byte;
    ssize_t n;
    while ((n = read(ready[0], &byte, 1)) < 0 && errno == EINTR)
        ;
    close(ready[0]);
    if (n != 1)
        return te_error(json_string("setsid-grandchild: did not start"));
    const char *then = arg_str(args, "then", "ok");
    if (strcmp(then, "exit") == 0) {
        say("testworker: setsid grandchild forked, exiting with 3\n");
        _exit(3);
    }
    if (strcmp(then, "sleep") == 0) {
        say("testworker: setsid grandchild forked, sleeping\n");
        sleep_forever();
    }
    return te_ok(json_pack("{s:s}", "token", token));
}

/* "fork-many": children that live until we exit (their read of the pipe
 * returns 0 then), so they all count against a process limit at once. */
json_t *fork_many(const json_t *args)
{
    long long n = arg_int(args, "n", 64), forked = 0;
    int hold[2];
    if (pipe(hold) < 0)
        return te_raised("OSError", "pipe failed", NULL);
    int e = 0;
    for (; forked < n; forked++) {
        pid_t pid = fork();
        if (pid < 0) {
            e = errno;
            break;
        }
        if (pid == 0) {
            char c;
            close(hold[1]);
            while (read(hold[0], &c, 1) < 0 && errno == EINTR)
                ;
            _exit(0);
        }
    }
    return te_ok(json_pack("{s:I, s:o}", "forked", (json_int_t)forked, "errno",
                           e ? errno_json(e) : json_null()));
}
