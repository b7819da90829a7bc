/*
 * template_int.h - the parts of warm start's daemon side (template.h) and
 * the state they share: per warm tool (struct warm) a template process
 * (struct inst), and the calls it forks (struct td_warm_call). Each part
 * calls only those below it:
 *
 *   template_tools.c  the tools' templates (started, retired or replaced at
 *                     a reload), a warm call's fork request and end, stats
 *   template.c        a template process's life: spawned, its control
 *                     frames, its timers, stopped, retired, reaped
 *   template_deny.c   whose a denial on a template's listener is
 */
#ifndef TD_TEMPLATE_INT_H
#define TD_TEMPLATE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <jansson.h>
#include <uv.h>

#include "toolexec.h"

struct td_cgroup;
struct td_denials;
struct td_sysnotify;
struct td_tool;
struct td_warm_ops;

#define CTL_MAX 65536 /* largest control frame */
#define LENT_RING 8   /* uids lent to P1s not yet "forked" (struct inst) */

enum inst_state { I_STARTING, I_READY, I_RETIRING, I_DEAD };

struct td_warm_call {
    TAILQ_ENTRY(td_warm_call) link;
    struct inst *inst;
    unsigned id;
    char *dir; /* name in the template's directory */
    const struct td_warm_ops *ops;
    void *data; /* NULL once its worker is gone */
    bool forked, exited;
    bool proxy; /* its tool's egress allow-list: "forked" brings the listener */
    int pidfd;
    uint64_t asked_ns;
    /* wd: its denied system calls go there (NULL: nowhere, its result is
     * out); ns: its PID namespace (inode), 0 until asked */
    struct td_denials *denied;
    uint64_t ns;
};
TAILQ_HEAD(call_list, td_warm_call);

/* One template process. Lives until its process is reaped and every call
 * it served has ended (refs). */
struct inst {
    LIST_ENTRY(inst) ilink; /* every instance not yet freed */
    struct warm *owner;     /* NULL once retired */
    struct td_tool *tool;
    enum inst_state state;
    int refs;
    pid_t pid;  /* as spawned (toolexecd-init in a PID namespace) */
    pid_t tpid; /* the template itself, from its pidfd */
    int ctl, out, err, report;
    uv_poll_t poll, *outp, *errp; /* its stdout and stderr: logged */
    uv_timer_t timer;
    int handles;
    te_frame_decoder dec;
    int fdq[16]; /* descriptors received, in order, for ready/forked */
    int nfdq;
    char *dir; /* its directory (WORK/...) */
    int dirfd;
    uid_t uid; /* from the identity pool, (uid_t)-1 none */
    gid_t gid;
    struct td_cgroup *cg;
    uint64_t started_ns;
    unsigned served, next_id;
    struct call_list calls;
    /* wd: the listener of its filter, for it and its calls (sysnotify.c);
     * its PID namespace (inode), 0 unknown */
    struct td_sysnotify *sysn;
    uint64_t ns;
    /* the last process that had a denial routed: its pid, a pidfd of it
     * (-1: none) and its PID namespace */
    pid_t last_pid;
    int last_pidfd;
    uint64_t last_ns;
    /* its tool's file-system view, sent with each fork request: NULL
     * where it sees the host's */
    json_t *view;
    /* the uids lent to its P1s (warmid.c) whose "forked" has not come
     * yet, by P1 (the pidfd's inode, its pid where pidfds have no inodes
     * of their own): a P1 can run its call to the end, and be gone, before
     * the template's "forked" is read, and then no lent uid names it any
     * more. A ring: the oldest are P1s the template dropped unused. */
    struct {
        uint64_t ino;
        pid_t pid;
        uid_t uid;
    } lent[LENT_RING];
    unsigned nlent;
};

/* Per warm tool, or per warm MCP server (one template for all its tools). */
struct warm {
    SLIST_ENTRY(warm) link;
    char *name;           /* the tool's, or the server's */
    struct td_tool *tool; /* the one (of the server's) its templates start from */
    struct inst *cur;
    unsigned restarts, failures;
    /* what the last templates said (a hash of the line) and why they were
     * stopped: a template that fails the same way at each restart is told
     * of once until one is ready, not every few seconds */
    uint32_t said_out, said_stop;
    uv_timer_t backoff;
    bool backoff_running;
};

/* template.c */
/* The template t's calls are forks of, by its key: its server's name for a
 * tool of a warm MCP server (all the server's tools share it), else its
 * own. */
const char *td_warm_key(const struct td_tool *t);
/* What the log calls the template of t, named by its key: "MCP server" or
 * "tool". */
const char *td_warm_kind(const struct td_tool *t);
/* A fresh template for w (none while one runs, or at shutdown); on a
 * failure, w backs off. */
void td_warm_start(struct warm *w);
/* Kill it (why: a failure to log and back off from; NULL: retired or
 * replaced, no back-off). Its calls end with it. */
void td_inst_stop(struct inst *in, const char *why);
/* No new calls; it exits once those in flight have ended. */
void td_inst_retire(struct inst *in);
void td_inst_unref(struct inst *in);
/* The oldest unanswered fork request bounds the next answer. */
void td_inst_arm_fork_timer(struct inst *in);
/* A control frame (msg stolen) with fds to the template: 0 or -errno. */
int td_inst_send_ctl(struct inst *in, json_t *msg, const int *fds, int nfds);
/* At shutdown, after the tools' templates were told to finish: every
 * template process killed and forgotten. */
void td_inst_kill_all(void);

/* template_deny.c */
/* The PID namespace of pid, as its inode; 0 when it cannot be read (gone). */
uint64_t td_pidns_of(pid_t pid);
/* sysnotify.c's router for a template's listener (ctx: its inst). */
int td_inst_route_denial(void *ctx, pid_t pid, struct td_denials **d);

#endif
