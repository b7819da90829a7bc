/*
 * auditverify.c - one line of the audit file (--audit-file) against the
 * chain so far (auditverify.h). Each line's "prev_sha256" must be the
 * SHA-256 (hex) of the line before it, its exact bytes without the
 * newline; the first line must carry 64 zeros (a fresh log). A
 * "chain_break" record is the daemon's own note that, reopening the file,
 * it found a last line that was not its last record (records cut off the
 * tail, or the file replaced): always a problem, reported with both hashes.
 */
#include <string.h>

#include "auditverify.h"
#include "toolexec.h"

#define GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

void auditverify_init(struct auditverify *v, FILE *out)
{
    memset(v, 0, sizeof(*v));
    v->out = out;
    memcpy(v->expect, GENESIS, sizeof(v->expect));
}

void auditverify_head(struct auditverify *v, const char *head)
{
    v->head = head;
    v->head_seen = strcmp(head, GENESIS) == 0;
}

/* A chain_break record: reported; true when it explains its own link (it
 * names the line before it as what the daemon found), so the link is not
 * reported again as a plain break. */
static bool chain_break(struct auditverify *v, const char *path, unsigned long lineno,
                        const json_t *rec, const char *prev)
{
    const char *want = json_string_value(json_object_get(rec, "expected_prev"));
    const char *found = json_string_value(json_object_get(rec, "found_prev"));
    v->breaks++;
    fprintf(v->out,
            "%s:%lu: chain_break: the daemon reopened the file and found its last line "
            "(sha256 %s) was not the last record it wrote (sha256 %s): records were cut off "
            "the tail, or the file replaced, before this line\n",
            path, lineno, found ? found : "?", want ? want : "?");
    return found && want && strcmp(found, v->expect) == 0 && strcmp(prev, want) == 0;
}

void auditverify_line(struct auditverify *v, const char *path, unsigned long lineno,
                      const char *line, size_t len, bool ended)
{
    json_error_t jerr;
    json_t *rec = te_json_loadb(line, len, 0, &jerr);
    const char *prev = json_string_value(json_object_get(rec, "prev_sha256"));
    const char *kind = json_string_value(json_object_get(rec, "record"));
    if (!prev) {
        fprintf(v->out, "%s:%lu: not an audit record (no \"prev_sha256\"%s)\n", path, lineno,
                rec ? "" : ", not JSON");
        v->breaks++;
    } else if (kind && strcmp(kind, "chain_break") == 0 &&
               chain_break(v, path, lineno, rec, prev)) {
        /* its link is the cut it reports */
    } else if (strcmp(prev, v->expect) != 0) {
        v->breaks++;
        if (!v->where[0])
            fprintf(v->out,
                    "%s:%lu: chain cut at its head: prev_sha256 is %s, a fresh log starts "
                    "from 64 zeros (records before this one are missing; give older files "
                    "first)\n",
                    path, lineno, prev);
        else if (strcmp(prev, GENESIS) == 0)
            fprintf(v->out,
                    "%s:%lu: chain restarts from 64 zeros, expected %s (the sha256 of %s): "
                    "the records before it were not what this log began from\n",
                    path, lineno, v->expect, v->where);
        else
            fprintf(v->out,
                    "%s:%lu: chain broken: prev_sha256 is %s, expected %s (the sha256 of %s): "
                    "a record between them was changed, removed or reordered\n",
                    path, lineno, prev, v->expect, v->where);
    }
    json_decref(rec);
    v->records++;
    te_sha256_hex(line, len, v->expect);
    v->head_seen |= v->head && strcmp(v->expect, v->head) == 0;
    snprintf(v->where, sizeof(v->where), "%s:%lu", path, lineno);
    if (!ended) {
        fprintf(v->out,
                "%s:%lu: cut: the last line has no newline (a write cut short, or the "
                "file truncated)\n",
                path, lineno);
        v->breaks++;
    }
}
