/*
 * bigtool - a tool with a big result, for bench/bigresult.py and the
 * big-result tests.
 *
 *   bigtool           framed: ok is a string of arguments.bytes bytes
 *   bigtool plain     plain: prints those bytes (its stdin line is the
 *                     arguments)
 *
 * arguments.kind "x" (default): all 'x', nothing to escape; "text": lines
 * of text with quotes, a tab, a backslash and an "é", so the JSON has
 * escapes and multi-byte characters. Byte i of the text is a function of i
 * only, so a reader can check what it got (tests/integration).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <toolexec.h>

static const char LINE[] = "line of \"text\"\twith a \\ and \xc3\xa9 to escape; 0123456789\n";

static char *payload(const json_t *args, size_t *n)
{
    json_int_t bytes = json_integer_value(json_object_get(args, "bytes"));
    const char *kind = json_string_value(json_object_get(args, "kind"));
    *n = bytes > 0 ? (size_t)bytes : 0;
    char *buf = malloc(*n + 1);
    if (!buf)
        exit(125);
    if (kind && strcmp(kind, "text") == 0) {
        size_t k = sizeof(LINE) - 1;
        for (size_t i = 0; i < *n; i += k)
            memcpy(buf + i, LINE, *n - i < k ? *n - i : k);
        /* do not end inside the two bytes of the é */
        if (*n && ((unsigned char)buf[*n - 1] & 0xc0) == 0xc0)
            buf[*n - 1] = '.';
    } else {
        memset(buf, 'x', *n);
    }
    buf[*n] = '\0';
    return buf;
}

static json_t *handler(const te_call *call, void *userdata)
{
    (void)userdata;
    size_t n;
    char *buf = payload(call->arguments, &n);
    json_t *s = json_stringn(buf, n);
    free(buf);
    return s ? te_ok(s) : te_error(json_string("not text"));
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "plain") != 0)
        return te_worker_main(handler, NULL);
    char line[4096];
    size_t got = fread(line, 1, sizeof(line) - 1, stdin);
    line[got] = '\0';
    json_t *args = json_loads(line, JSON_DECODE_ANY, NULL);
    size_t n;
    char *buf = payload(args, &n);
    for (size_t off = 0; off < n;) {
        ssize_t w = write(1, buf + off, n - off);
        if (w <= 0)
            return 1;
        off += (size_t)w;
    }
    /* not exit(): in a sanitized build LeakSanitizer's exit check fails
     * where the filter refuses it ptrace(), and a plain tool's status counts */
    _exit(0);
}
