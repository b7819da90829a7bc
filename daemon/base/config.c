/*
 * config.c - the daemon's configuration: its defaults, and the helpers that
 * parse and complete what the options say.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "toolexec.h"

struct td_config td_cfg = {
    .tools_dir = TD_DEFAULT_TOOLS_DIR,
    .max_frame = TE_FRAME_MAX_DEFAULT,
    .max_content = TE_FRAME_MAX_DEFAULT,
    .max_request = TE_FRAME_MAX_DEFAULT,
    .network = 1,
    /* Far above any sane agent fleet; a bound so a connection flood cannot
     * exhaust descriptors. */
    .max_clients = 512,
    /* An LLM turn asks for a handful of calls; thousands is a bug. */
    .max_batch_calls = 1024,
    .socket_mode = 0660,
    /* In-flight calls get this long to finish on SIGTERM; systemd's default
     * TimeoutStopSec (90 s) leaves room for it. */
    .shutdown_timeout_s = 10,
    /* Long enough for a client to read its file after the call; short
     * enough that a busy daemon's disk does not fill. */
    .spill_max_age_s = 3600,
    /* A fork bomb ends at this many processes (threads count) per call:
     * with a uid or a user namespace per call, RLIMIT_NPROC counts only the
     * call's own (pids.max where cgroups carry it). */
    .limits = {.processes = 1024},
    /* An agent runs one batch per model turn, an MCP client one per tool
     * call in flight: 64 at once on one connection is far beyond either,
     * and bounds what one connection makes the scheduler walk. */
    .max_client_batches = 64,
    /* Generous for a person's pause between turns, short enough that
     * forgotten connections give their slots back. */
    .idle_timeout_s = 600,
    .tool_timeout_ms = TE_TOOL_TIMEOUT_DEFAULT_MS,
};
uv_loop_t *td_loop;
bool td_shutting_down;

bool td_config_parse_size(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0 || v > max || s[0] == '-')
        return false;
    *out = v;
    return true;
}

const char *const td_limit_names[TD_LIMIT_COUNT] = {
    [TD_LIMIT_CPU_MS] = "cpu_ms",
    [TD_LIMIT_MEMORY_MB] = "memory_mb",
    [TD_LIMIT_PROCESSES] = "processes",
    [TD_LIMIT_OPEN_FILES] = "open_files",
    [TD_LIMIT_FILE_SIZE_MB] = "file_size_mb",
    [TD_LIMIT_OUTPUT_MB] = "output_mb",
};

uint64_t *td_limit_at(struct td_limits *l, size_t i)
{
    uint64_t *fields[TD_LIMIT_COUNT] = {
        [TD_LIMIT_CPU_MS] = &l->cpu_ms,
        [TD_LIMIT_MEMORY_MB] = &l->memory_mb,
        [TD_LIMIT_PROCESSES] = &l->processes,
        [TD_LIMIT_OPEN_FILES] = &l->open_files,
        [TD_LIMIT_FILE_SIZE_MB] = &l->file_size_mb,
        [TD_LIMIT_OUTPUT_MB] = &l->output_mb,
    };
    return i < TD_LIMIT_COUNT ? fields[i] : NULL;
}

uint64_t *td_limit_field(struct td_limits *l, const char *key)
{
    for (size_t i = 0; i < TD_LIMIT_COUNT; i++)
        if (strcmp(key, td_limit_names[i]) == 0)
            return td_limit_at(l, i);
    return NULL;
}

int td_limits_set(struct td_limits *l, const char *key, uint64_t v)
{
    uint64_t *f = td_limit_field(l, key);
    if (!f)
        return -EINVAL;
    *f = v;
    return 0;
}

int td_limits_parse(const char *spec, struct td_limits *l, char *err, size_t errlen)
{
    char *copy = strdup(spec), *save = NULL;
    int rc = copy ? 0 : -ENOMEM;
    for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item && rc == 0;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '='), *end;
        unsigned long long v = 0;
        if (eq) {
            *eq = '\0';
            errno = 0;
            v = strtoull(eq + 1, &end, 10);
        }
        if (!eq || errno || end == eq + 1 || *end || v == 0 || eq[1] == '-') {
            snprintf(err, errlen, "\"%s\": expected KEY=N with N a positive integer", item);
            rc = -EINVAL;
        } else if (td_limits_set(l, item, v) < 0) {
            snprintf(err, errlen, "\"%s\": unknown limit (" TD_LIMIT_NAMES_TEXT ")", item);
            rc = -EINVAL;
        }
    }
    free(copy);
    return rc;
}

/* Defaults that follow other options; a limit that would refuse every
 * full batch or every longest line is an error. */
int td_config_resolve(void)
{
    if (!td_cfg.max_clients_per_uid) {
        /* a quarter, so one uid cannot lock the others out; at least 16
         * (or all of them) so a small --max-clients still serves one user */
        unsigned floor = td_cfg.max_clients < 16 ? td_cfg.max_clients : 16;
        td_cfg.max_clients_per_uid =
            td_cfg.max_clients / 4 > floor ? td_cfg.max_clients / 4 : floor;
    }
    if (!td_cfg.max_queued_calls) {
        /* four full batches; a queued call costs ~1.1 KB (1,500 x 1,024
         * calls were 1.7 GB), so ~5 MB a uid by default */
        td_cfg.max_queued_calls =
            td_cfg.max_batch_calls * 4 > 4096 ? td_cfg.max_batch_calls * 4 : 4096;
    } else if (td_cfg.max_queued_calls < td_cfg.max_batch_calls) {
        fprintf(stderr, "toolexecd: --max-queued-calls (%zu) is below --max-batch-calls (%zu)\n",
                td_cfg.max_queued_calls, td_cfg.max_batch_calls);
        return -1;
    }
    if (!td_cfg.max_request_buffer) {
        /* four longest lines at once (24 unfinished lines were 388 MB) */
        td_cfg.max_request_buffer =
            td_cfg.max_request * 4 > (64u << 20) ? td_cfg.max_request * 4 : (64u << 20);
    } else if (td_cfg.max_request_buffer < td_cfg.max_request) {
        fprintf(stderr,
                "toolexecd: --max-request-buffer (%zu) is below --max-request-bytes (%zu)\n",
                td_cfg.max_request_buffer, td_cfg.max_request);
        return -1;
    }
    return 0;
}
