/*
 * template.h - warm start: a template process per warm tool, each call a
 * fresh fork of it (proto/PROTOCOL.md, "Warm start").
 */
#ifndef TD_TEMPLATE_H
#define TD_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

struct td_tool;
struct td_cgroup;
struct td_child;

/* How the template is spawned (worker_start.c): spawndesc.c's
 * description of a cold worker of the tool, in the directory cwd, as
 * uid:gid, with stdin a socket. 0 or -errno (*what the step); *cg the cgroup it runs in (NULL:
 * none), held until it is reaped. Upward, so given at setup. */
typedef int (*td_template_spawn_fn)(struct td_tool *t, const char *cwd, uid_t uid, gid_t gid,
                                    struct td_child *c, struct td_cgroup **cg, const char **what);
void td_template_setup(td_template_spawn_fn spawn);
/* Starts the templates of the warm tools of td_tools; retires those whose
 * definition changed or went (after a reload). */
void td_template_sync(void);
/* At shutdown: every template is told to finish. */
void td_template_shutdown(void);

/* One warm call, seen by its worker (upward by these callbacks). */
struct td_warm_ops {
    void (*forked)(void *data, int pidfd); /* the call's PID 1, to kill it by */
    /* its end: the wait status (the init's; the tool's comes on the report
     * pipe), its resource use or NULL; why non-NULL when it never ran or
     * its template died (then status is a SIGKILL) */
    void (*exited)(void *data, int status, const struct rusage *ru, const char *why);
    /* a tool with an egress allow-list: the TCP listener on 127.0.0.1:3128
     * in the call's own network namespace, before forked() (taken) */
    void (*listener)(void *data, int fd);
    /* the uid of its own lent to its PID 1 (warmid.c), before forked() */
    void (*mapped)(void *data, uid_t uid);
};
struct td_warm_call;
/* A call for a warm tool: NULL when its template is not ready (the call
 * runs cold). Else the call's directory is made in the template's (owned
 * by the template's user) and the fork requested with fds (the call's
 * stdin, stdout, stderr, report pipe ends: taken in every case). */
struct td_warm_call *td_template_call(struct td_tool *t, const char *call_id, const char *batch_id,
                                      bool newnet, int fds[4], const struct td_warm_ops *ops,
                                      void *data, char **dir);
/* Where the call's denied system calls are noted (NULL: nowhere, once its
 * result is out); the template's listener serves all its calls. */
struct td_denials;
void td_template_call_denials(struct td_warm_call *c, struct td_denials *d);
/* The worker is gone: its directory is removed; no callback runs after. */
void td_template_call_end(struct td_warm_call *c);

/* A warm tool's template: "ready" (calls start warm), "starting" or
 * "down"; NULL for a tool that is not warm. */
const char *td_template_state(const char *tool);
/* For stats: {"tool": {"pid", "age_ms", "children", "restarts", "pss_kb"}}. */
json_t *td_template_stats(void);

#endif
