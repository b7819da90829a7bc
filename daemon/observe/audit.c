/*
 * audit.c - one record per finished call, through the log (log.c): in
 * JSON lines (--log-format json) its fields are members of the line, in
 * the journal TOOLEXECD_* fields, in text key=value pairs. The format is
 * stable and documented in toolexecd(8), AUDIT TRAIL.
 *
 * Structured (JSON, journal), every call's record is written at info: it is
 * the audit trail. In text, a call that failed is logged at info and one
 * that succeeded at debug, so a terminal is not flooded.
 *
 * The arguments are identified by a SHA-256 digest of their compact JSON
 * text with sorted keys (what a client can recompute), never written
 * themselves unless --audit-arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256hex.h"
#include "audit.h"
#include "auditchain.h"
#include "bus.h"
#include "log.h"
#include "outcome.h"
#include "toolexec.h"

static bool audit_arguments;

static void on_bus(void *data, const struct td_bus_msg *m);

void td_audit_init(bool with_arguments)
{
    audit_arguments = with_arguments;
    td_bus_subscribe(on_bus, NULL);
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* v with every object's keys in sorted order (jansson keeps insertion
 * order), for a digest a client can recompute. */
static json_t *sorted_copy(const json_t *v)
{
    size_t i, n;
    json_t *out;
    if (json_is_array(v)) {
        out = json_array();
        for (i = 0; out && i < json_array_size(v); i++)
            json_array_append_new(out, sorted_copy(json_array_get(v, i)));
        return out;
    }
    if (!json_is_object(v))
        return json_copy((json_t *)v);
    n = json_object_size(v);
    const char **keys = malloc((n ? n : 1) * sizeof(*keys));
    out = keys ? json_object() : NULL;
    const char *k;
    json_t *x;
    i = 0;
    json_object_foreach((json_t *)v, k, x) if (keys) keys[i++] = k;
    if (out) {
        qsort(keys, n, sizeof(*keys), cmp_keys);
        for (i = 0; i < n; i++)
            json_object_set_new(out, keys[i], sorted_copy(json_object_get(v, keys[i])));
    }
    free(keys);
    return out;
}

/* hex: 65 bytes. The arguments as te_json_dumps() writes them (numbers as
 * the client sent them), keys sorted. */
static void digest(const json_t *args, char *hex)
{
    json_t *sorted = sorted_copy(args ? args : json_null());
    char *text = sorted ? te_json_dumps(sorted, JSON_ENCODE_ANY, NULL) : NULL;
    json_decref(sorted);
    te_sha256_hex(text ? text : "", text ? strlen(text) : 0, hex);
    free(text);
}

/* The completed event's members the record carries as they are. */
static const char *const copied[] = {
    "duration_ms", "queued_ms", "cpu_user_ms", "cpu_sys_ms",
    "max_rss_kb",  "denied",    "enforced"}; /* "enforced": what the call ran under */

static void record(const struct td_bus_msg *m)
{
    const char *reason, *outcome = td_outcome_of(m->json, &reason);
    bool failed = reason || strcmp(outcome, "error") == 0;
    int level = td_log_structured() || failed ? TD_LOG_INFO : TD_LOG_DEBUG;
    if (!td_log_enabled(level) && !td_auditchain_on())
        return; /* no digest of arguments nobody will read */
    char hex[TE_SHA256_HEX_LEN + 1];
    digest(m->arguments, hex);
    json_t *f = json_pack("{s:s,s:s,s:s}", "record", "call", "tool", m->tool, "outcome", outcome);
    if (!f)
        return;
    if (reason)
        json_object_set_new(f, "reason", json_string(reason));
    if (m->cred) {
        json_object_set_new(f, "client_pid", json_integer(m->cred->pid));
        json_object_set_new(f, "client_uid", json_integer(m->cred->uid));
        json_object_set_new(f, "client_gid", json_integer(m->cred->gid));
    }
    if (m->subject) /* whom the trusted front ran it for (--subject-from) */
        json_object_set_new(f, "subject", json_string(m->subject));
    json_object_set_new(f, "arguments_sha256", json_string(hex));
    for (size_t i = 0; i < sizeof(copied) / sizeof(copied[0]); i++) {
        json_t *v = json_object_get(m->completed, copied[i]);
        if (v)
            json_object_set(f, copied[i], v);
    }
    if (audit_arguments && m->arguments)
        json_object_set(f, "arguments", (json_t *)m->arguments);
    td_auditchain_append(m->batch_id, m->call_id, f); /* --audit-file */
    td_log_record(level, m->batch_id, m->call_id, f, "call finished");
    json_decref(f);
}

static void on_bus(void *data, const struct td_bus_msg *m)
{
    (void)data;
    if (m->kind == TD_BUS_CALL_DONE && m->tool)
        record(m);
}
