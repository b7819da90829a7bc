/*
 * auditchain.c - the audit file (--audit-file), tamper-evident: each line
 * is one record, compact JSON, whose "prev_sha256" is the SHA-256 (hex) of
 * the previous line's exact bytes, without its newline. The first record
 * of a fresh file with nothing before it carries 64 zeros
 * (TD_AUDITCHAIN_GENESIS). After a restart the daemon goes on from the
 * file's own last line. So whoever changes, removes, reorders or cuts
 * records breaks the chain where `toolexec audit verify` shows it.
 *
 * SIGHUP reopens the file by its name, and the daemon trusts its memory
 * (the hash of the last line it wrote, the head) over the file: an empty
 * file (logrotate moved the old one away, or copytruncate emptied it) goes
 * on from the head, so its first record names the old file's last line.
 * A file whose last line is not the head (records cut off its tail, or
 * another file put in its place) gets a "chain_break" record first, which
 * names both hashes and chains from the head: the cut stays visible to
 * verify, which a chain from the file's last line would have hidden. The
 * head is logged at each open, reopen and at the end, so a tail cut while
 * the daemon was stopped can be checked against the log.
 *
 * A line is written with one write() on an O_APPEND descriptor, so a
 * reader never sees half a record unless the disk filled up; the line
 * left without its newline then is ended before the next one, and the
 * chain goes on from its bytes (verify reports it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auditchain.h"
#include "log.h"
#include "toolexec.h"
#include "util.h"
#include "sha256hex.h"

static char *file_path;
static int fd = -1;
static char last[TE_SHA256_HEX_LEN + 1] = TD_AUDITCHAIN_GENESIS;

/* The hash of the last line of f (read) into found; ends a line cut short
 * with its newline (on w). 1, 0 when the file is empty (found untouched),
 * or -1. */
static int last_line_hash(int f, int w, char *found)
{
    struct stat st;
    if (fstat(f, &st) < 0)
        return -1;
    if (st.st_size == 0)
        return 0;
    off_t end = st.st_size, start;
    char c;
    if (pread(f, &c, 1, end - 1) != 1)
        return -1;
    bool cut = c != '\n';
    if (!cut)
        end--;
    /* back to the newline before the last line, a block at a time */
    char buf[4096];
    for (start = end; start > 0;) {
        off_t from = start > (off_t)sizeof(buf) ? start - (off_t)sizeof(buf) : 0;
        ssize_t n = pread(f, buf, (size_t)(start - from), from);
        if (n != start - from)
            return -1;
        char *nl = memrchr(buf, '\n', (size_t)n);
        if (nl) {
            start = from + (nl - buf) + 1;
            break;
        }
        start = from;
    }
    size_t len = (size_t)(end - start);
    char *line = malloc(len ? len : 1);
    if (!line || pread(f, line, len, start) != (ssize_t)len) {
        free(line);
        return -1;
    }
    te_sha256_hex(line, len, found);
    free(line);
    if (cut && write(w, "\n", 1) != 1)
        return -1;
    return 1;
}

/* path opened for appending; *found the hash of its last line (1), or the
 * file empty (0). The descriptor, or -1. */
static int open_file(const char *path, char *found, int *nonempty)
{
    int f = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (f < 0)
        return -1;
    /* a second descriptor to read from: ours is write-only */
    int r = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (r < 0 || (*nonempty = last_line_hash(r, f, found)) < 0) {
        int e = errno;
        if (r >= 0)
            close(r);
        close(f);
        errno = e;
        return -1;
    }
    close(r);
    return f;
}

int td_auditchain_open(const char *path, char *err, size_t errlen)
{
    free(file_path);
    file_path = strdup(path);
    int nonempty = 0;
    if (!file_path || (fd = open_file(path, last, &nonempty)) < 0) {
        snprintf(err, errlen, "--audit-file %s: %s", path, strerror(errno));
        return -1;
    }
    td_log(TD_LOG_INFO, "audit file %s: chain head %s (%s)", path, last,
           nonempty ? "its last line" : "a fresh log");
    return 0;
}

void td_auditchain_reopen(void)
{
    if (!file_path)
        return;
    char found[TE_SHA256_HEX_LEN + 1];
    int nonempty = 0;
    int f = open_file(file_path, found, &nonempty);
    if (f < 0) {
        /* keep writing where we were rather than lose records */
        td_log(TD_LOG_ERR, "audit file %s: cannot reopen: %s; still writing the old one", file_path,
               strerror(errno));
        return;
    }
    close(fd);
    fd = f;
    if (!nonempty || strcmp(found, last) == 0) {
        td_log(TD_LOG_INFO, "audit file %s: reopened (%s), chain head %s", file_path,
               nonempty ? "as it was" : "empty: rotated", last);
        return;
    }
    td_log(TD_LOG_WARN,
           "audit file %s: reopened, its last line hashes to %s, not to the last record "
           "written, %s: records were cut off its tail or the file replaced; a chain_break "
           "record marks it and the chain goes on from %s",
           file_path, found, last, last);
    json_t *mark = json_pack("{s:s,s:s,s:s}", "record", "chain_break", "expected_prev", last,
                             "found_prev", found);
    if (mark)
        td_auditchain_append(NULL, NULL, mark);
    else
        td_log(TD_LOG_ERR, "audit file %s: out of memory, the chain_break record lost", file_path);
    json_decref(mark);
}

void td_auditchain_close(void)
{
    if (fd >= 0) {
        td_log(TD_LOG_INFO, "audit file %s: closed, chain head %s", file_path, last);
        close(fd);
    }
    fd = -1;
    free(file_path);
    file_path = NULL;
}

bool td_auditchain_on(void)
{
    return fd >= 0;
}

void td_auditchain_append(const char *batch, const char *call, const json_t *fields)
{
    if (fd < 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    json_t *o = json_pack("{s:f}", "ts", ts.tv_sec + ts.tv_nsec / 1e9);
    if (o && batch)
        json_object_set_new(o, "batch", td_json_text(batch, strlen(batch)));
    if (o && call)
        json_object_set_new(o, "call", td_json_text(call, strlen(call)));
    if (o)
        json_object_update_missing(o, (json_t *)fields);
    if (o)
        json_object_set_new(o, "prev_sha256", json_string(last));
    size_t len = 0;
    char *text = o ? te_json_dumps(o, 0, &len) : NULL;
    json_decref(o);
    char *line = text ? realloc(text, len + 1) : NULL;
    if (!line) {
        free(text);
        td_log(TD_LOG_ERR, "audit file %s: out of memory, a record lost", file_path);
        return;
    }
    line[len] = '\n';
    ssize_t n = write(fd, line, len + 1);
    if (n == (ssize_t)(len + 1)) {
        te_sha256_hex(line, len, last);
    } else {
        td_log(TD_LOG_ERR, "audit file %s: %s", file_path,
               n < 0 ? strerror(errno) : "short write (disk full?)");
        /* what did reach the file is a line of the chain, ended here */
        if (n > 0) {
            te_sha256_hex(line, (size_t)n, last);
            if (write(fd, "\n", 1) != 1)
                td_log(TD_LOG_ERR, "audit file %s: cannot end a cut record", file_path);
        }
    }
    free(line);
}
