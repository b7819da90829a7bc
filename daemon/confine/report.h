/*
 * report.h - records a call's pre-exec child and its init write to the
 * daemon on fd 3 (a close-on-exec pipe): why set-up or exec failed, and the
 * tool's wait status when an init stands between the daemon and the tool.
 */
#ifndef TD_REPORT_H
#define TD_REPORT_H

#include "initwait.h" /* the records' values, shared with warm calls' P1 */

enum {
    TD_REPORT_FAILED = TE_REC_FAILED,
    TD_REPORT_STATUS = TE_REC_STATUS,
    TD_REPORT_CPU = TE_REC_CPU,
    TD_REPORT_RSS = TE_REC_RSS
};
/* TD_REPORT_CPU (a: user ms, b: system ms) and TD_REPORT_RSS (a: peak RSS
 * in KiB) precede TD_REPORT_STATUS: the init's RUSAGE_CHILDREN once the tool
 * and every process left in its namespace are killed and reaped, i.e. the
 * tool's own use and its descendants'. What the daemon's wait4() gives for
 * the init is only the init's own. TD_REPORT_STATUS is the init's last
 * word: no process of the call is left when it is written. */

/* Set-up steps, in the order sandbox.c runs them; "exec" is also what the
 * init reports when the tool cannot be executed. */
enum {
    TD_STEP_CGROUP,
    TD_STEP_SETSID,
    TD_STEP_PDEATHSIG,
    TD_STEP_SIGNALS,
    TD_STEP_DUP,
    TD_STEP_CLOSE,
    TD_STEP_USERNS,
    TD_STEP_MOUNT,
    TD_STEP_CHDIR,
    TD_STEP_RLIMIT,
    TD_STEP_USER,
    TD_STEP_NNP,
    TD_STEP_SECCOMP,
    TD_STEP_EXEC,
    TD_STEP_SPAWN,
    TD_STEP_LANDLOCK, /* step 11a */
    TD_STEP_EGRESS,   /* step 7c, listed last to keep the others' numbers */
    TD_STEP_CAPS,     /* step 9b */
    TD_STEP_LOOPBACK, /* step 7d, without an allow-list */
    TD_STEP_COUNT
};

#define TD_STEP_NAMES                                                                              \
    {                                                                                              \
        "cgroup", "setsid", "prctl", "signals", "dup2", "close_range", "user namespace", "mount",  \
            "chdir", "setrlimit", "setuid", "no_new_privs", "seccomp", "exec", "spawn",            \
            "landlock", "egress", "capability bounding set", "loopback"                            \
    }

/* The fd the report pipe is on in the child and in the init. */
#define TD_REPORT_FD TE_REC_FD

/* Descriptors a child made before exec and hands to the daemon (a seccomp
 * notification listener, a listening socket inside the call's network
 * namespace), over a datagram socket on this fd, close-on-exec: see
 * td_sandbox_hand_over(). */
#define TD_HANDOVER_FD 4
/* A spare's call's environment, at most (sandbox.h: td_sandbox_prepare). */
#define TD_SPARE_ENV_MAX (128 * 1024)
/* What a spare waiting in its init takes (init.c): the tool's argv and the
 * call's environment, at most these bytes and strings in all (a call with
 * more starts afresh). Small: the init's memory counts against a call's
 * address-space limit. */
#define TD_SPARE_INIT_BYTES (32 * 1024)
#define TD_SPARE_INIT_STRINGS 1024
enum { TD_HAND_SECCOMP, TD_HAND_PROXY, TD_HAND_COUNT };

struct td_report_rec {
    int type;
    int a; /* FAILED: the step; STATUS: the wait status */
    int b; /* FAILED: errno */
};

#endif
