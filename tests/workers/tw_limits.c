/*
 * tw_limits.c - testworker: modes that meet a limit or fill a pipe: open
 * files, file size, CPU, a stderr flood, and results that are whole in the
 * stdout pipe when the worker exits ("fill-pipe", "big-exit").
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "testworker.h"

/* "fill-pipe": stdout's pipe grown to hold the whole response, which the
 * worker writes and then exits without anyone reading it (a result that
 * is all in the pipe when the daemon reaps the worker). */
json_t *fill_pipe(const json_t *args)
{
    long long n = arg_int(args, "n", 1 << 20);
    fcntl(1, F_SETPIPE_SZ, (int)(n + 4096));
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        _exit(125);
    memset(buf, 'y', (size_t)n);
    json_t *s = json_stringn(buf, (size_t)n);
    free(buf);
    return te_ok(s);
}

json_t *open_files_mode(void)
{
    static int fds[65536];
    long long opened = 0;
    int e = 0;
    while (opened < (long long)(sizeof fds / sizeof fds[0])) { /* else: no limit */
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            e = errno;
            break;
        }
        fds[opened++] = fd;
    }
    for (long long i = 0; i < opened; i++)
        close(fds[i]);
    struct rlimit rl;
    long long nofile = -2;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        nofile = rl.rlim_cur == RLIM_INFINITY ? -1 : (long long)rl.rlim_cur;
    return te_ok(json_pack("{s:I, s:o, s:I}", "opened", (json_int_t)opened, "errno",
                           e ? errno_json(e) : json_null(), "nofile", (json_int_t)nofile));
}

json_t *write_file_mode(const json_t *args)
{
    if (json_is_true(json_object_get(args, "ignore_sigxfsz")))
        signal(SIGXFSZ, SIG_IGN);
    long long total = arg_int(args, "mb", 2) << 20, written = 0;
    static char chunk[65536];
    memset(chunk, 'f', sizeof chunk);
    int fd = open("big.out", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return te_error(json_pack("{s:o, s:I}", "errno", errno_json(errno), "written", 0));
    while (written < total) {
        size_t want = sizeof chunk;
        if ((long long)want > total - written)
            want = (size_t)(total - written);
        ssize_t n = write(fd, chunk, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return te_error(
                json_pack("{s:o, s:I}", "errno", errno_json(e), "written", (json_int_t)written));
        }
        written += n;
    }
    close(fd);
    return te_ok(json_pack("{s:I}", "written", (json_int_t)written));
}

void __attribute__((noreturn)) spin_forever(void)
{
    volatile unsigned long long x = 0;
    for (;;)
        x++;
}

json_t *stderr_flood_ok(const json_t *args)
{
    long long total = arg_int(args, "mb", 1) << 20, sent = 0;
    static char chunk[65536];
    for (size_t i = 0; i < sizeof chunk; i += 64) {
        memset(chunk + i, '.', 63);
        chunk[i + 63] = '\n';
    }
    while (sent < total) {
        size_t want = sizeof chunk;
        if ((long long)want > total - sent)
            want = (size_t)(total - sent);
        write_all(2, chunk, want);
        sent += (long long)want;
    }
    say("FINAL-MARKER\n");
    return te_ok(json_pack("{s:I}", "bytes", (json_int_t)sent));
}

/* big-exit: a result that needs no reader to be written, so that the
 * daemon meets it only at the exit. */
json_t *big_exit(const json_t *args)
{
    long long pipe_bytes = arg_int(args, "pipe", 1 << 20), n = arg_int(args, "n", 1000000);
    const char *log = arg_str(args, "log", NULL);
    if (log)
        append_line(log, "start");
    if (fcntl(1, F_SETPIPE_SZ, (int)pipe_bytes) < 0)
        return te_error(
            json_pack("{s:s,s:o}", "set_pipe_size", "failed", "errno", errno_json(errno)));
    char *buf = malloc((size_t)n);
    if (!buf)
        _exit(125);
    memset(buf, 'x', (size_t)n);
    json_t *s = json_stringn(buf, (size_t)n);
    free(buf);
    return te_ok(s);
}
