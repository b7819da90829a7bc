/*
 * spawnmsg.h - a spawn description (sandbox.h's td_spawn) as one flat
 * message, for the spawner process (spawner.c): the daemon packs each call's
 * description, the spawner unpacks it into pointers into the message itself.
 * No I/O; the descriptors (cgroup) travel beside it (SCM_RIGHTS).
 */
#ifndef TD_SPAWNMSG_H
#define TD_SPAWNMSG_H

#include <stddef.h>
#include <stdint.h>

#include "sandbox.h"

/* A request larger than this is refused (E2BIG): the spawner's socket
 * carries each request as one datagram. */
#define TD_SPAWNMSG_MAX (192 * 1024)

/* The spawner's wire (spawner.c, spawnproc.c): one datagram each way per
 * event, on a SOCK_SEQPACKET pair. A request: this header, then the packed
 * description; descriptors: the child's four ends, then the cgroup's
 * directory and cgroup.procs where flags say so. */
enum { TD_SPAWN_CGROUP_DIR = 1, TD_SPAWN_CGROUP_PROCS = 2 };
/* PREPARE: the spare execs its init ahead (td_sandbox_prepare's init_waits) */
enum { TD_SPAWN_INIT_WAITS = 4 };
/* START: a call (with a spare to take, when spare_id is not NONE; the
 * spawner starts it afresh if that spare is gone); PREPARE: a spare for
 * the description, under id; DROP: the spare id (no body, no descriptors). */
enum { TD_SPAWN_REQ_START = 1, TD_SPAWN_REQ_PREPARE = 2, TD_SPAWN_REQ_DROP = 3 };
#define TD_SPAWN_NO_SPARE 0xffffffffu
struct td_spawn_req {
    uint32_t type;
    uint32_t id, gen; /* the daemon's slot for the call or the spare */
    uint32_t flags;
    uint32_t spare_id, spare_gen;
};
/* Replies: STARTED (descriptors: its pidfd, then those it handed up, in
 * the order of their bits in handed) or EXITED, for a call; PREPARED (err
 * set when it could not be made) or SPARE_GONE (it died unused; status),
 * for a spare. */
enum { TD_SPAWN_STARTED = 1, TD_SPAWN_EXITED = 2, TD_SPAWN_PREPARED = 3, TD_SPAWN_SPARE_GONE = 4 };
struct td_spawn_reply {
    uint32_t type, id, gen;
    int32_t pid, err, status;
    uint32_t handed; /* bit k: TD_HAND k follows */
    uint32_t pad;
    int64_t user_us, sys_us, maxrss_kb;
    char what[32]; /* the step that failed (err != 0) */
};

/* The descriptors a request of q's header comes with (the spawner's
 * check): the child's four ends for a START, then the cgroup's where flags
 * say so; none for a DROP. */
size_t td_spawnmsg_req_fds(const struct td_spawn_req *q);

/* A reply as the loop reads it (spawner.c): n bytes that came with nfds
 * descriptors. False when it is not one (its descriptors are all to
 * close). Else *r, and in *g which of the descriptors are what (indexes,
 * -1 for none): the first g->used are taken, the rest to close; the step
 * (what) NUL-terminated, and the resource use of an EXITED. */
struct td_spawn_got {
    int pidfd, handed[TD_HAND_COUNT];
    size_t used;
    char what[sizeof(((struct td_spawn_reply *)0)->what) + 1];
    struct rusage ru;
};
bool td_spawnmsg_reply(const void *buf, size_t n, size_t nfds, struct td_spawn_reply *r,
                       struct td_spawn_got *g);

/* s packed into a malloc'd buffer (*buf, *len); the descriptor fields
 * (cgroup_dir, cgroup_procs) are not packed. 0 or -errno. */
int td_spawnmsg_pack(const struct td_spawn *s, uint8_t **buf, size_t *len);

/* What an unpacked message points to besides itself: its arrays of
 * pointers, freed with td_spawnmsg_free(). */
struct td_spawnmsg {
    struct td_spawn s;
    char **argv, **envp;
    const char **hide, **ll_write;
    struct td_rlimit *rlimits;
    struct sock_fprog filter;
    struct td_fs_op *ops;
    struct td_fsplan fs;
};

/* buf (len bytes, aligned to 8, kept alive and unchanged while m is used)
 * into m->s, every pointer into buf or m; the descriptors -1. 0, or -EINVAL
 * for a message that is not whole or not well formed (checked to its end). */
int td_spawnmsg_unpack(const uint8_t *buf, size_t len, struct td_spawnmsg *m);
void td_spawnmsg_free(struct td_spawnmsg *m);

#endif
