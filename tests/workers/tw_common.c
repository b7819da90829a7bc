/*
 * tw_common.c - testworker: the helpers every mode uses: writing (all of a
 * buffer, a line to stderr, a raw or JSON frame, a line appended to a file),
 * sleeping, the call's arguments, an errno as its name.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testworker.h"

void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            _exit(120);
        }
        p += n;
        len -= (size_t)n;
    }
}

void say(const char *text)
{
    write_all(2, text, strlen(text));
}

void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

void __attribute__((noreturn)) sleep_forever(void)
{
    for (;;)
        pause();
}

const char *arg_str(const json_t *args, const char *key, const char *dflt)
{
    const json_t *v = json_object_get(args, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

long long arg_int(const json_t *args, const char *key, long long dflt)
{
    const json_t *v = json_object_get(args, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

/* argv[2] when given, else the string argument key, else dflt. */
const char *param(const json_t *args, const char *key, const char *dflt)
{
    if (g_argc > 2)
        return g_argv[2];
    return arg_str(args, key, dflt);
}

void write_frame_raw(const char *body, size_t len)
{
    uint8_t hdr[TE_FRAME_HEADER_LEN];
    te_frame_header((uint32_t)len, hdr);
    write_all(1, hdr, sizeof hdr);
    write_all(1, body, len);
}

void write_frame_json(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        _exit(121);
    write_frame_raw(s, strlen(s));
    free(s);
}

void append_line(const char *path, const char *what)
{
    char line[64];
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        _exit(122);
    int n = snprintf(line, sizeof line, "%s %ld\n", what, (long)getpid());
    write_all(fd, line, (size_t)n);
    close(fd);
}

json_t *errno_json(int e)
{
    const char *name = strerrorname_np(e);
    return name ? json_string(name) : json_integer(e);
}
