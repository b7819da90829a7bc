/*
 * util.c - small JSON and file helpers shared by the daemon's modules (a
 * leaf).
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "toolexec.h"
#include "util.h"

json_t *td_json_text(const char *p, size_t n)
{
    json_t *s = json_stringn(p, n);
    if (s)
        return s;
    /* Not valid UTF-8: replace each bad byte with U+FFFD. */
    char *out = malloc(n * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = te_utf8_seq(p + i, n - i);
        if (l) {
            memcpy(out + o, p + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    s = json_stringn(out, o);
    free(out);
    return s;
}

/* Base64 (RFC 4648) by hand: an encoder is a dozen lines, not worth a
 * dependency on a crypto or utility library. */
json_t *td_base64_value(const char *p, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *in = (const unsigned char *)p;
    size_t olen = (n + 2) / 3 * 4;
    char *out = malloc(olen + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? alphabet[v & 63] : '=';
    }
    json_t *obj = json_pack("{s:s,s:s%,s:I}", "encoding", "base64", "data", out, olen, "size_bytes",
                            (json_int_t)n);
    free(out);
    return obj;
}

int td_write_at(int dirfd, const char *file, const char *text)
{
    int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int e = n < 0 ? errno : EIO;
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -e;
}

DIR *td_opendir_dup(int dirfd)
{
    /* F_DUPFD_CLOEXEC, not dup(): the copy must not outlive us in a child */
    int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return NULL;
    }
    /* the copy shares dirfd's position: a listing before this one left it
     * at the end */
    rewinddir(d);
    return d;
}

int td_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}
