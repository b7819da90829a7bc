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
 * or a head cut off; records cut off the tail show only where the daemon
 * noticed it on reopening the file (its "chain_break" record), or against
 * a head the daemon logged (--head HASH: some line must hash to it). The
 * check of each line is auditverify.c's.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auditverify.h"
#include "cli.h"

/* 0, or -1 when the file cannot be read. */
static int check_file(struct auditverify *v, const char *path)
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
        auditverify_line(v, path, lineno, line, (size_t)n - ended, ended);
    }
    int rc = ferror(f) ? -1 : 0;
    if (rc < 0)
        cli_err("%s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    return rc;
}

static bool is_hash(const char *s)
{
    return strlen(s) == TE_SHA256_HEX_LEN && strspn(s, "0123456789abcdef") == TE_SHA256_HEX_LEN;
}

int cli_cmd_audit(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS, {"head", required_argument, NULL, 'H'}, {0}};
    const char *head = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, ":s:jh", opts, NULL)) != -1) {
        if (cli_common_option(cli, opt, optarg))
            continue;
        if (opt == 'h')
            return cli_help("audit");
        if (opt != 'H')
            return cli_bad_option("audit", opt, argv);
        if (!is_hash(optarg))
            return cli_usage_error("audit", "--head: expected a SHA-256 in hex (64 of 0-9a-f)");
        head = optarg;
    }
    if (optind >= argc || strcmp(argv[optind], "verify") != 0)
        return cli_usage_error("audit", "expected: audit verify [--head HASH] FILE...");
    if (optind + 1 >= argc)
        return cli_usage_error("audit", "verify: no FILE given");
    struct auditverify v;
    auditverify_init(&v, stdout);
    if (head)
        auditverify_head(&v, head);
    for (int i = optind + 1; i < argc; i++)
        if (check_file(&v, argv[i]) < 0)
            return CLI_EXIT_ERROR;
    if (head && !v.head_seen) {
        printf("%s: no line hashes to the head given (--head %s): the records from it on "
               "were cut off the tail, or it is not this log's head\n",
               argv[argc - 1], head);
        v.breaks++;
    }
    if (v.breaks) {
        printf("%lu problem%s in %lu records\n", v.breaks, v.breaks == 1 ? "" : "s", v.records);
        return CLI_EXIT_FAILED;
    }
    printf("chain intact: %lu records\n", v.records);
    return CLI_EXIT_OK;
}
