/*
 * config.h - the daemon's configuration (struct td_config td_cfg, its
 * defaults, option parsing helpers) and the two pieces of process state
 * every layer reads (td_loop, td_shutting_down). A leaf: it calls nothing
 * of the daemon's.
 */
#ifndef TD_CONFIG_H
#define TD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include <uv.h>

#define TD_DEFAULT_TOOLS_DIR "/etc/toolexecd/tools.d"

/* Per-tool limits; 0 means not set (the daemon default applies). */
struct td_limits {
    uint64_t cpu_ms, memory_mb, processes, open_files, file_size_mb, output_mb;
};

/* The limits by name, in struct td_limits' order: the keys of a
 * definition's "limits", of --default-limits, of a policy's and of the
 * enforced view, spelled here only. Each name ends in its unit (ms, MiB)
 * or is a count. */
enum {
    TD_LIMIT_CPU_MS,
    TD_LIMIT_MEMORY_MB,
    TD_LIMIT_PROCESSES,
    TD_LIMIT_OPEN_FILES,
    TD_LIMIT_FILE_SIZE_MB,
    TD_LIMIT_OUTPUT_MB,
    TD_LIMIT_COUNT
};
extern const char *const td_limit_names[TD_LIMIT_COUNT];
/* The names as an error message lists them. */
#define TD_LIMIT_NAMES_TEXT "cpu_ms, memory_mb, processes, open_files, file_size_mb, output_mb"
/* l's field number i (TD_LIMIT_*). */
uint64_t *td_limit_at(struct td_limits *l, size_t i);
/* l's field named key; NULL when key names no limit. */
uint64_t *td_limit_field(struct td_limits *l, const char *key);

/* Confinement layers a definition may ask for and list in "best_effort"
 * (defs/besteffort.c); --disable-layer turns the last two off. */
enum {
    TD_LAYER_VIEW = 1,     /* a mount namespace of its own for its view */
    TD_LAYER_LANDLOCK = 2, /* Landlock on its writes */
    TD_LAYER_SECCOMP = 4,  /* its system-call filter */
};

struct td_config {
    const char *socket_path;
    bool one_shot; /* toolexec sandbox: one call, no daemon around it to describe */
    const char *tools_dir;
    char *work_dir;                 /* root of the per-call private directories */
    bool work_dir_owned;            /* created by us: removed at exit */
    uint32_t max_frame;             /* response frame / plain stdout cap */
    size_t max_content;             /* encoded content cap (encoding_failed) */
    size_t max_request;             /* request line cap */
    struct td_limits limits;        /* daemon-wide defaults */
    const char *user, *group;       /* default worker user/group (root daemon) */
    int network;                    /* default for "network": 1 yes, 0 no */
    unsigned layers_off;            /* --disable-layer: TD_LAYER_* bits */
    unsigned max_clients;           /* connections beyond it are refused */
    unsigned max_workers;           /* worker processes at once, all batches */
    unsigned online_cpus;           /* sysconf(_SC_NPROCESSORS_ONLN) at start and each reload:
                                       glibc reads /sys for it on every ask, once per request */
    size_t max_batch_calls;         /* calls in one run request */
    unsigned socket_mode;           /* permission bits of the socket file */
    const char *socket_group;       /* group of the socket file, NULL: ours */
    const char *events_socket_path; /* NULL: no events socket */
    const char *tail_group;         /* sees every client's events, NULL: none */
    unsigned shutdown_timeout_s;    /* grace for in-flight calls on SIGTERM */
    unsigned spill_max_age_s;       /* spill files are removed this long after; 0: at exit */
    size_t max_queued_calls;        /* calls in one uid's unfinished batches */
    unsigned max_client_batches;    /* unfinished batches on one connection */
    unsigned max_clients_per_uid;   /* connections of one uid; 0: a quarter of max_clients */
    size_t max_request_buffer;      /* unfinished request bytes, all clients together */
    unsigned idle_timeout_s;        /* close a connection idle this long; 0: never */
    uint64_t tool_timeout_ms;       /* a call's timeout when neither batch nor tool sets one */
    struct rlimit worker_nofile;    /* RLIMIT_NOFILE as we started: what workers get */
};
extern struct td_config td_cfg;
/* The loop everything runs on, and whether SIGTERM has begun the
 * shutdown; set by main, read everywhere. */
extern uv_loop_t *td_loop;

extern bool td_shutting_down;

/* "cpu_ms=100,memory_mb=64" into limits; -EINVAL naming the bad key. */
int td_limits_parse(const char *spec, struct td_limits *l, char *err, size_t errlen);
/* Parse one limits key from a JSON value. */
int td_limits_set(struct td_limits *l, const char *key, uint64_t v);
/* A positive decimal no greater than max (what a size or count option takes). */
bool td_config_parse_size(const char *s, uint64_t max, uint64_t *out);
/* Defaults that follow other options; -1 (with a message on stderr) when a
 * limit would refuse every full batch or every longest line. */
int td_config_resolve(void);

#endif
