/*
 * util.c - small JSON and file helpers shared by the daemon's modules (a
 * leaf).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* a and b differ by at most one edit (or one swap of neighbours) */
static bool one_edit(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), i = 0;
    if (la < lb)
        return one_edit(b, a);
    if (la - lb > 1)
        return false;
    while (i < lb && a[i] == b[i])
        i++;
    if (la > lb) /* one dropped from a at i */
        return strcmp(a + i + 1, b + i) == 0;
    if (i == la)
        return true;
    if (strcmp(a + i + 1, b + i + 1) == 0) /* one changed */
        return true;
    return i + 1 < la && a[i] == b[i + 1] && a[i + 1] == b[i] && strcmp(a + i + 2, b + i + 2) == 0;
}

static bool near(const char *word, const char *w)
{
    size_t lw = strlen(word), l = strlen(w);
    if (strcasecmp(word, w) == 0 || (lw >= 4 && l >= 4 && one_edit(word, w)))
        return true;
    /* timeout -> timeout_ms, deny_syscall -> deny_syscalls */
    size_t k = lw < l ? lw : l;
    const char *longer = lw < l ? w : word;
    return k >= 4 && strncmp(word, w, k) == 0 && longer[k] == '_';
}

const char *td_near_word(const char *word, const char *const *words, size_t n)
{
    const char *found = NULL;
    for (size_t i = 0; i < n; i++)
        if (near(word, words[i])) {
            if (found)
                return NULL;
            found = words[i];
        }
    return found;
}

const char *td_self_exe;

char *td_libexec_find(const char *name, const char *dir)
{
    char self[PATH_MAX];
    ssize_t n = td_self_exe ? (ssize_t)strnlen(td_self_exe, sizeof(self) - 1)
                            : readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (td_self_exe)
        memcpy(self, td_self_exe, (size_t)n);
    char *path = NULL;
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            if (asprintf(&path, "%s/%s", self, name) > 0 && access(path, X_OK) == 0)
                return path;
            free(path);
            path = NULL;
        }
    }
    if (asprintf(&path, "%s/%s", dir, name) > 0 && access(path, X_OK) == 0)
        return path;
    free(path);
    return NULL;
}

uid_t td_euid(void)
{
    static uid_t euid = (uid_t)-1;
    if (euid == (uid_t)-1)
        euid = geteuid();
    return euid;
}
