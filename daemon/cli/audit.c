/*
 * audit.c - toolexec audit verify FILE...: checks the hash chain of the
 * daemon's audit file (--audit-file). Each line's "prev_sha256" must be the
 * SHA-256 (hex) of the line before it, its exact bytes without the
 * newline; the first line of the first file must carry 64 zeros (a fresh
 * log). Files given in rotation order, oldest first, chain across: a
 * file's first line carries the hash of the previous file's last line.
 *
 * Every break is printed, "FILE:LINE: ...", with what was expected; the
 * exit status is 0 only when every chain is intact (1 when broken, 2 when a
 * file cannot be read). A chain shows a record changed, removed, reordered
 * or a head cut off; it cannot show the last records cut off the tail.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sha256hex.h"

#define GENESIS "0000000000000000000000000000000000000000000000000000000000000000"
#define HEXLEN TD_SHA256_HEX_LEN

/* Where the chain stands: the hash the next line must carry and whose
 * line that is (for the messages). */
struct chain {
    char expect[HEXLEN + 1];
    char where[512]; /* "FILE:LINE", empty before the first line */
    unsigned long breaks, records;
};

/* One line (no newline) at path:lineno. */
static void check_line(struct chain *ch, const char *path, unsigned long lineno, const char *line,
                       size_t len)
{
    json_error_t jerr;
    json_t *rec = te_json_loadb(line, len, 0, &jerr);
    const char *prev = json_string_value(json_object_get(rec, "prev_sha256"));
    if (!prev) {
        printf("%s:%lu: not an audit record (no \"prev_sha256\"%s)\n", path, lineno,
               rec ? "" : ", not JSON");
        ch->breaks++;
    } else if (strcmp(prev, ch->expect) != 0) {
        ch->breaks++;
        if (!ch->where[0])
            printf("%s:%lu: chain cut at its head: prev_sha256 is %s, a fresh log starts "
                   "from 64 zeros (records before this one are missing; give older files "
                   "first)\n",
                   path, lineno, prev);
        else if (strcmp(prev, GENESIS) == 0)
            printf("%s:%lu: chain restarts from 64 zeros, expected %s (the sha256 of %s): "
                   "the records before it were not what this log began from\n",
                   path, lineno, ch->expect, ch->where);
        else
            printf("%s:%lu: chain broken: prev_sha256 is %s, expected %s (the sha256 of %s): "
                   "a record between them was changed, removed or reordered\n",
                   path, lineno, prev, ch->expect, ch->where);
    }
    json_decref(rec);
    ch->records++;
    td_sha256_hex(line, len, ch->expect);
    snprintf(ch->where, sizeof(ch->where), "%s:%lu", path, lineno);
}

/* 0, or -1 when the file cannot be read. */
static int check_file(struct chain *ch, const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        cli_err("%s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned long lineno = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        bool ended = line[n - 1] == '\n';
        if (ended)
            n--;
        check_line(ch, path, lineno, line, (size_t)n);
        if (!ended) {
            printf("%s:%lu: cut: the last line has no newline (a write cut short, or the "
                   "file truncated)\n",
                   path, lineno);
            ch->breaks++;
        }
    }
    int rc = ferror(f) ? -1 : 0;
    if (rc < 0)
        cli_err("%s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    return rc;
}

int cli_cmd_audit(struct cli *cli, int argc, char **argv)
{
    int done = cli_only_common_options(cli, "audit", argc, argv);
    if (done >= 0)
        return done;
    if (optind >= argc || strcmp(argv[optind], "verify") != 0)
        return cli_usage_error("audit", "expected: audit verify FILE...");
    if (optind + 1 >= argc)
        return cli_usage_error("audit", "verify: no FILE given");
    struct chain ch = {.expect = GENESIS};
    for (int i = optind + 1; i < argc; i++)
        if (check_file(&ch, argv[i]) < 0)
            return CLI_EXIT_ERROR;
    if (ch.breaks) {
        printf("%lu problem%s in %lu records\n", ch.breaks, ch.breaks == 1 ? "" : "s", ch.records);
        return CLI_EXIT_FAILED;
    }
    printf("chain intact: %lu records\n", ch.records);
    return CLI_EXIT_OK;
}
