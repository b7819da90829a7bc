/*
 * toolexecd.h - the daemon's internal interfaces. Data flows one way:
 *
 *   server (socket, JSON lines) -> batch (runner: queue, policy, events)
 *     -> worker (one call's process: pipes, frames, timer) -> sandbox (fork)
 *   reaper (SIGCHLD) -> worker -> batch -> server
 *
 * registry holds the tool definitions; log writes to stderr.
 */
#ifndef TOOLEXECD_H
#define TOOLEXECD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <jansson.h>
#include <uv.h>

#include "toolexec.h"
#include "scheduler.h"

/* Last bytes of a worker's stderr kept for the error cause. */
#define TD_STDERR_TAIL 4096
/* stderr lines logged per call; the rest only reach the tail, so a flooding
 * worker cannot flood the journal. */
#define TD_STDERR_LOG_LINES 64
/* The part of an offending response quoted in an invalid_return cause. */
#define TD_QUOTE_MAX 1024
/* Content handed back to the model is cut beyond this (head and tail kept):
 * about 25k tokens, what a model can take without crowding out the rest. */
#define TD_CONTENT_BYTES_DEFAULT 100000
/* The only PATH a worker sees (plus what its definition's env says). */
#define TD_WORKER_PATH "/usr/local/bin:/usr/bin:/bin"

/* Per-tool limits; 0 means not set (the daemon default applies). */
struct td_limits {
    uint64_t cpu_ms, memory_mb, processes, open_files, file_size_mb, output_mb;
};

struct td_config {
    const char *socket_path;
    const char *tools_dir;
    char *work_dir;      /* root of the per-call private directories */
    bool work_dir_owned; /* created by us: removed at exit */
    uint32_t max_frame;  /* response frame / plain stdout cap */
    size_t max_content;  /* encoded content cap (encoding_failed) */
    size_t max_request;  /* request line cap */
    int log_level;
    struct td_limits limits;        /* daemon-wide defaults */
    const char *user, *group;       /* default worker user/group (root daemon) */
    int network;                    /* default for "network": 1 yes, 0 no */
    unsigned max_clients;           /* connections beyond it are refused */
    unsigned max_workers;           /* worker processes at once, all batches */
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
    struct rlimit worker_nofile;    /* RLIMIT_NOFILE as we started: what workers get */
};
extern struct td_config td_cfg;
extern uv_loop_t *td_loop;

/* main.c: called whenever something that keeps the daemon alive ends. */
void td_maybe_exit(void);
extern bool td_shutting_down;

/* log.c */
enum { TD_LOG_ERR, TD_LOG_WARN, TD_LOG_INFO, TD_LOG_DEBUG };
void td_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line about a batch (call NULL) or one of its calls. */
void td_logc(int level, const char *batch, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* --log-format text|json; also detects the journal. -1 on a bad format. */
int td_log_setup(const char *format);
int td_log_level_parse(const char *s);

/* spill.c: the full content of cut results, in WORK/results. */
/* Write a new file NAME there for uid (threadpool-safe); 0 or -errno. */
int td_spill_write(const char *name, const char *text, size_t len, uid_t uid);
/* Remove PATH --spill-max-age seconds from now. */
void td_spill_track(const char *path);
/* Write text (len bytes, taken) to a new spill file of batch_id's for uid,
 * in the threadpool; then done(data, path), path NULL when it could not be
 * written. -1 when nothing was queued: done will not run. */
int td_spill_start(const char *batch_id, const char *call_id, char *text, size_t len, uid_t uid,
                   void (*done)(void *data, const char *path), void *data);
void td_spill_stop(void);

/* util.c */
/* A JSON string from arbitrary bytes: invalid UTF-8 becomes U+FFFD. */
json_t *td_json_text(const char *p, size_t n);
/* "cpu_ms=100,memory_mb=64" into limits; -EINVAL naming the bad key. */
int td_limits_parse(const char *spec, struct td_limits *l, char *err, size_t errlen);
/* Parse one limits key from a JSON value. */
int td_limits_set(struct td_limits *l, const char *key, uint64_t v);
/* {"encoding": "base64", "data", "size_bytes"} for bytes that are not text. */
json_t *td_base64_value(const char *p, size_t n);
/* Remove a directory tree without blocking the loop (threadpool). */
void td_remove_tree_async(char *path /* taken */);
int td_remove_tree(const char *path);

/* registry.c */
enum td_protocol { TD_PROTO_FRAMED, TD_PROTO_PLAIN };
struct td_tool {
    int refs;
    char *name, *description, *file;
    json_t *schema;
    char **argv; /* NULL: manual-mode tool */
    char **env;  /* "K=V", NULL-terminated */
    size_t nenv;
    enum td_protocol protocol;
    bool context;
    uint64_t timeout_ms; /* 0: no ceiling of its own */
    struct td_limits limits;
    int network;                     /* -1: daemon default, 0 no network, 1 network */
    char *user, *group;              /* NULL: daemon default */
    json_t *allow_uids, *allow_gids; /* integer arrays; NULL: any client */
    uint64_t max_content_bytes;      /* 0: the batch's or the default */
    te_schema *validator;            /* the compiled schema */
    bool coerce;                     /* "42" -> 42 where the schema wants a number */
    bool spill;                      /* cut content also written to a file */
    bool switch_user;                /* root daemon: run workers as uid/gid */
    uid_t uid;
    gid_t gid;
};
struct td_registry {
    struct td_tool **tools; /* sorted by name */
    size_t n;
};
int td_registry_load(const char *dir, struct td_registry **out, char *err, size_t errlen);
struct td_tool *td_registry_find(const struct td_registry *r, const char *name);
json_t *td_registry_list(const struct td_registry *r);
/* The tools as "openai", "openai_responses", "anthropic" or "mcp" declare
 * them; NULL for another format. */
json_t *td_registry_list_as(const struct td_registry *r, const char *format);
void td_registry_free(struct td_registry *r);
struct td_tool *td_tool_ref(struct td_tool *t);
void td_tool_unref(struct td_tool *t);
extern struct td_registry *td_tools;

/* reaper.c: SIGCHLD as a loop event; statuses handed to their owners.
 * reaped (may be NULL) runs the moment pid is reaped, before anything can
 * fork again (the last chance to kill(-pid) safely; keep it cheap); cb runs
 * later from the loop, a few exits per iteration. */
typedef void (*td_reaped_cb)(void *data);
typedef void (*td_exit_cb)(void *data, int status, const struct rusage *ru);
int td_reaper_start(void);
void td_reaper_stop(void);
void td_reaper_watch(pid_t pid, td_reaped_cb reaped, td_exit_cb cb, void *data);

/* sandbox.c: the one place that forks. */
struct td_rlimit {
    int resource;
    struct rlimit lim;
};
struct td_spawn {
    char *const *argv; /* what is exec'd: the tool, or the init then the tool */
    bool init;         /* argv[0] is toolexecd-init: keep the report pipe open */
    char *const *envp;
    const char *cwd;
    int ns_flags; /* CLONE_NEWPID, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER */
    /* With CLONE_NEWNS: hidden under a tmpfs, cwd (inside it) bound back */
    const char *work_dir;
    const char *const *hide;       /* NULL-terminated: covered by /dev/null */
    const char *uid_map, *gid_map; /* written by the child with CLONE_NEWUSER */
    uid_t uid;                     /* (uid_t)-1: keep the daemon's */
    gid_t gid;
    const struct td_rlimit *rlimits;
    size_t nrlimits;
    int cgroup_dir;   /* the call's cgroup, born into; -1: none */
    int cgroup_procs; /* its cgroup.procs, where it cannot be born there */
};
struct td_child {
    pid_t pid;
    int in, out, err; /* parent ends: worker's stdin, stdout, stderr */
    int report;       /* read end of the report pipe (report.h) */
};
/* 0 or -errno (the step that failed in *what). */
int td_sandbox_spawn(const struct td_spawn *s, struct td_child *c, const char **what);
/* What the child and its init reported, read without blocking at exit. */
struct td_report {
    bool failed;      /* set-up or exec failed: */
    const char *step; /*   at this step */
    int err;          /*   with this errno */
    bool have_status; /* the init reported the tool's wait status */
    int status;
};
void td_sandbox_report(int fd, struct td_report *r);

/* cgroup.c: a cgroup v2 directory per call where the daemon has one to
 * manage (delegated by systemd, or --cgroup DIR). */
struct td_cgroup_info {
    char mount[256];   /* the cgroup2 mount point, "" if none */
    char own[1024];    /* our own cgroup path */
    char dir[1300];    /* the base the calls' cgroups would go under */
    bool delegated;    /* Delegate=yes (trusted/user.delegate) or --cgroup */
    bool writable;     /* we could make, join and kill a child there */
    bool kill;         /* cgroup.kill exists (Linux 5.14) */
    bool memory, pids; /* controllers available in dir */
    bool usable;       /* all of the above that the calls need */
    char why[80];      /* why not usable */
};
void td_cgroup_probe(const char *dir /* NULL: our own */, struct td_cgroup_info *info);
/* At start: pick the base, move out of it, enable memory and pids for the
 * calls, clean up after a killed predecessor. -1 only when --cgroup DIR was
 * given and cannot be used. */
int td_cgroup_setup(const char *dir);
bool td_cgroup_active(void);
bool td_cgroup_delegated(void); /* by systemd (Delegate=yes), not --cgroup */
bool td_cgroup_memory(void);    /* memory_mb is memory.max */
bool td_cgroup_pids(void);      /* processes is pids.max */
const char *td_cgroup_base(void);
struct td_cgroup;
/* A call's cgroup with its limits (0: none); NULL with *err an errno. */
struct td_cgroup *td_cgroup_new(uint64_t memory_mb, uint64_t pids_max, int *err);
/* The directory (for CLONE_INTO_CGROUP) and cgroup.procs (for a child to
 * join with write("0")); -1 for no cgroup. */
int td_cgroup_dir_fd(const struct td_cgroup *c);
int td_cgroup_procs_fd(const struct td_cgroup *c);
void td_cgroup_kill(struct td_cgroup *c);
/* How many times the kernel's OOM killer acted in it (memory.events). */
long long td_cgroup_oom_kills(const struct td_cgroup *c);
/* Kill what is left, and remove it once empty (without blocking). */
void td_cgroup_release(struct td_cgroup *c);
void td_cgroup_close(void);

/* containment.c: how a call's processes are kept from outliving it. */
enum td_containment {
    TD_CONTAIN_PGROUP, /* process group + subreaper: setsid() escapes it */
    TD_CONTAIN_PIDNS,  /* a PID namespace per call, toolexecd-init as PID 1 */
    TD_CONTAIN_CGROUP, /* a cgroup per call, ended with cgroup.kill */
};
extern enum td_containment td_containment;
extern int td_userns_flag; /* CLONE_NEWUSER when unprivileged, else 0 */
/* CLONE_NEWPID | CLONE_NEWNS where the kernel gives every call a PID and a
 * mount namespace of its own (with toolexecd-init and a private /proc),
 * whatever the containment mode; else 0. */
extern int td_call_ns;
extern char *td_init_path; /* toolexecd-init */
int td_containment_setup(const char *want /* "auto", "pidns", "cgroup", "pgroup" */);
const char *td_containment_name(enum td_containment c);
/* toolexecd --check [--cgroup DIR] */
int td_containment_check(const char *cgroup_dir);

/* worker.c: one call's process. */
struct td_worker;
/* ru: the worker's resource use (wait4), NULL when it is not known. */
typedef void (*td_result_cb)(void *data, json_t *result /* stolen */, const struct rusage *ru);
struct td_worker_spec {
    struct td_tool *tool;
    const char *batch_id, *call_id;
    json_t *request; /* the request frame's object */
    uint64_t timeout_ms;
};
/* Start a worker. The result callback runs exactly once, never from inside
 * this call; on failure to spawn returns NULL and *result is the call's
 * handler_exit tool error. */
struct td_worker *td_worker_start(const struct td_worker_spec *s, td_result_cb cb, void *data,
                                  json_t **result);
/* Forget the callback (its owner is going away); the worker is killed. */
void td_worker_abandon(struct td_worker *w);
void td_worker_kill_all(void);
/* Kill it now; its result is a handler_exit with cause.cancelled. */
void td_worker_cancel(struct td_worker *w);
void td_worker_setup(void);
/* Stop / resume reading a worker's stdout (its client is not reading). */
void td_worker_throttle(struct td_worker *w, bool pause);
unsigned td_workers_alive(void);

/* batch.c */
struct td_conn;
struct td_batch;
/* Handle a {"op": "run"} request from conn. */
void td_batch_run(struct td_conn *conn, json_t *req);
void td_batch_free(struct td_batch *b);
/* Calls waiting for a worker slot. */
unsigned td_batch_queued(void);
/* {"op": "decide"}: the client's decision on a call's error (on_tool_error
 * "ask"). -ENOENT with err set when no decision is pending for that call. */
int td_batch_decide(struct td_batch *b, const char *call_id, json_t *decision, char *err,
                    size_t errlen);
/* Calls running in a worker (holding a --max-workers slot). */
unsigned td_batch_running(void);
/* Whether the batch calls any tool named in the set (an object keyed by
 * tool name). */
bool td_batch_calls_any(const struct td_batch *b, const json_t *tools);
/* The uid of the client that runs the batch. */
uid_t td_batch_uid(const struct td_batch *b);
/* Pause or resume reading the output of the batch's workers; workers started
 * while paused start paused. */
void td_batch_throttle(struct td_batch *b, bool pause);
/* Kill its running workers, start none of its queued calls, complete it
 * with halt {"halted_reason": "cancelled"}. */
void td_batch_cancel(struct td_batch *b);
/* Hold (true) or release (false) handing out worker slots freed meanwhile:
 * around cancelling many batches at once. */
void td_batch_hold(bool hold);

/* notify.c: sd_notify (no-ops without libsystemd or outside systemd). */
void td_notify_ready(void);
void td_notify_reloading(void);
void td_notify_stopping(void);
void td_notify_close(void);
bool td_notify_built(void);

/* stats.c: counters for {"op": "stats"}. */
void td_stats_call(const char *tool, const json_t *result, uint64_t duration_us);
void td_stats_spawn(const char *tool, uint64_t spawn_us);
void td_stats_batch_done(void);
void td_stats_init(void);
uint64_t td_stats_batches_served(void);
json_t *td_stats_event(void);
void td_stats_free(void);

/* tail.c: event subscribers. */
struct td_tail;
/* Resolve --tail-group (at start: may block on NSS); -1 if unknown. */
int td_tail_setup(const char *group);
/* A subscriber on c with no filters; what it may see is decided now, from
 * its credentials and the groups of the peer on fd (SO_PEERGROUPS). */
struct td_tail *td_tail_new(struct td_conn *c, const struct ucred *cred, int fd);
/* The tools and batches filters of a tail request (arrays of strings or
 * NULL) as sets; -1 with err naming the field and the limit it breaks. */
int td_tail_filters(const json_t *tools, const json_t *batches, json_t **tools_set,
                    json_t **batches_set, char *err, size_t errlen);
/* Replace the filters in place (sets taken, NULL for none); lines queued
 * under the old ones are dropped. */
void td_tail_set_filters(struct td_tail *t, json_t *tools, json_t *batches);
/* Unsubscribe; the memory goes once no write of it is in flight. */
void td_tail_free(struct td_tail *t);
/* Offer one event of batch b (tool: the call's tool, NULL for the batch's
 * own events) to every subscriber that wants it and may see it; ev is not
 * stolen. */
void td_tail_publish(const json_t *ev, const struct td_batch *b, const char *batch_id,
                     const char *tool);
unsigned td_tail_count(void);

/* listener.c */
int td_listeners_start(void);
void td_listeners_stop(void);
/* "PATH and PATH (events)", for the start-up log line. */
const char *td_listeners_describe(char *buf, size_t len);

/* server.c */
/* Close idle connections (shutting down). */
void td_server_stop(void);
/* No batch running and no worker left: subscribers may go. */
bool td_server_finished(void);
/* Cancel every batch of every client. */
void td_server_cancel_all(void);
/* Close connections whose batches are done but whose client has not read
 * the events it is owed (shutting down, after a grace). */
void td_server_drop_unread(void);
unsigned td_server_batches(void);
/* A connection accepted on a listening socket. */
void td_conn_accept(int fd, bool events);
/* Write data (taken) to the client; cb (may be NULL) runs when it is written
 * or failed. -1 when the connection is gone (data freed). */
typedef void (*td_written_cb)(struct td_conn *c, void *arg, int status);
int td_conn_write(struct td_conn *c, char *data, size_t len, td_written_cb cb, void *arg);
unsigned td_server_conns(void);
void td_conn_send(struct td_conn *c, json_t *event /* stolen */);
void td_conn_error(struct td_conn *c, const char *batch, const char *type, const char *reason,
                   const char *message, json_t *metadata);
/* Batch bookkeeping on a connection. */
bool td_conn_batch_add(struct td_conn *c, struct td_batch *b, const char *id);
void td_conn_batch_remove(struct td_conn *c, struct td_batch *b);
unsigned td_conn_next_batch_seq(struct td_conn *c);
/* The client's credentials (SO_PEERCRED). */
const struct ucred *td_conn_cred(const struct td_conn *c);
/* Room for one more batch of ncalls on c (--max-client-batches, and
 * --max-queued-calls for its uid): 0 and the calls are counted until
 * td_conn_release(); -1 with err saying which limit. */
int td_conn_admit(struct td_conn *c, size_t ncalls, char *err, size_t errlen);
void td_conn_release(struct td_conn *c, size_t ncalls);
/* The scheduler's state for a client: struct td_conn_sched (scheduler.h). */
struct td_conn_sched *td_conn_sched(struct td_conn *c);
void td_batches_throttle(struct td_conn *c, bool pause);

#endif
