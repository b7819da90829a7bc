/*
 * testworker.h - testworker's parts (private to the test worker): what one
 * file of it gives another. testworker.c has main(), the dispatch of the
 * modes (run_mode) and the modes of the protocol itself; the others hold
 * the modes of one kind each.
 */
#ifndef TE_TESTWORKER_H
#define TE_TESTWORKER_H

#include <stdbool.h>
#include <stddef.h>

#include <toolexec.h>

/* testworker.c: argc and argv of main() (argv[1] is the mode when given) */
extern int g_argc;
extern char **g_argv;

/* tw_common.c: the helpers every mode uses */
void write_all(int fd, const void *buf, size_t len);
void say(const char *text);
void sleep_ms(long ms);
void __attribute__((noreturn)) sleep_forever(void);
const char *arg_str(const json_t *args, const char *key, const char *dflt);
long long arg_int(const json_t *args, const char *key, long long dflt);
const char *param(const json_t *args, const char *key, const char *dflt);
void write_frame_raw(const char *body, size_t len);
void write_frame_json(const json_t *v);
void append_line(const char *path, const char *what);
json_t *errno_json(int e);

/* tw_reports.c: what a call's process sees of itself */
json_t *list_fds(void);
json_t *env_report(void);
json_t *isolation_report(void);
json_t *identity_report(void);

/* tw_procs.c: grandchildren and many children */
json_t *grandchild(const te_call *call);
int linger_mode(int argc, char **argv);
json_t *setsid_grandchild(const te_call *call);
json_t *fork_many(const json_t *args);

/* tw_limits.c: limits met, pipes filled */
json_t *fill_pipe(const json_t *args);
json_t *open_files_mode(void);
json_t *write_file_mode(const json_t *args);
void __attribute__((noreturn)) spin_forever(void);
json_t *stderr_flood_ok(const json_t *args);
json_t *big_exit(const json_t *args);

/* tw_net.c: a TCP connect, the egress proxy */
json_t *connect_mode(const json_t *args);
json_t *loopback_mode(const json_t *args);
json_t *proxy_tunnel_mode(const json_t *args);

/* tw_hostile.c: victim and hostile (test_hard_identity.py) */
json_t *victim_mode(const json_t *args);
json_t *attempt_read(const char *path);
json_t *attempt_list(const char *path);
json_t *hostile_mode(const json_t *args);

/* tw_calldir.c: call directories (test_hard_calldir) */
json_t *make_tree(const json_t *args);
json_t *swap_race(const json_t *args);
json_t *probe_dir(const json_t *args);

/* tw_sysprobe.c: sysprobe and the warm denials */
json_t *sysprobe_mode(const json_t *args);
json_t *sysprobe_meet(const json_t *args);
void deny_at_start(void);

/* tw_nsjoin.c: a warm template trying its calls' namespaces (argv[1] "nsjoin") */
int nsjoin_main(void);

/* tw_fsview.c: file-system views (test_confine_fs) */
json_t *fs_probe(const json_t *args);

#endif
