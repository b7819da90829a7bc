/*
 * fswatch.bpf.c - the kernel half of fswatch.c: at the end of each system
 * call that names a path, when it failed as a refusal (EACCES, EPERM,
 * EROFS) or found nothing (ENOENT) and its caller's uid is a watched
 * call's, one record to the daemon: the uid, the call, its error, its
 * flags and the path as the call named it. A refusal the view makes
 * (a read-only mount, an empty cover over a hidden tree, a noexec mount)
 * happens before any security module, so neither Landlock's audit log nor
 * fanotify sees it; the system call's end is the one place all of them
 * pass. Records are bounded per call (a budget each for refusals and for
 * ENOENT, which is mostly a search path's noise), a repeat of one of the
 * last sent is not sent again (a flood of one path costs no budget), and
 * every refusal is counted.
 * x86-64 only (its pt_regs and system-call numbers); fswatch.c loads it
 * nowhere else.
 *
 * Its load is most of what a root toolexec sandbox run costs beyond an
 * unprivileged one, and the verifier most of the load: what it walks is
 * kept small (368 instructions with bpf_loop, 0.7 ms here; 2,259 without;
 * its own stats: a load with log_level 4). Each branch is a path it walks
 * to its end, and each state it has not seen at a loop's call another
 * walk of the callback: so the callbacks have none or few, and what is
 * known only at run time (ENOENT or not, the ancestor found) is kept as
 * numbers, not branches or flags. A table of the system calls' arguments
 * in place of the switch walked 36 fewer but cost more in its own map.
 */
#include <linux/bpf.h>
#include <linux/errno.h>

#include <bpf/bpf_helpers.h>

#include "fswatch_rec.h"

char LICENSE[] SEC("license") = "GPL";

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, TD_FSW_CALLS_MAX);
    __type(key, __u32); /* the call's uid */
    __type(value, struct td_fsw_call);
} calls SEC(".maps");

/* the daemon's pid (its tgid): a watched uid's process counts only if it
 * descends from it, so that a daemon whose --call-uids another shares
 * (tests running side by side) never takes the other's calls for its own,
 * nor toolexec sandbox its --user's other processes; with where struct
 * task_struct keeps a process's tgid and parent (kbtf.c, not CO-RE: its
 * start costs 17 ms) */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct td_fsw_self);
} self SEC(".maps");

/* how far up a process's ancestors are looked at: daemon, spawner, init,
 * the tool and the tool's own descendants; one deeper is not reported */
#define ANCESTRY 32

/* 1 where x is 0, else 0, and no branch: each branch is one more path the
 * verifier walks (and a comparison, to the compiler, is one) */
static __always_inline __u64 is_zero(__u64 x)
{
    __u64 neg = -x;
    barrier_var(neg); /* or the compiler sees the comparison and branches */
    return ((x | neg) >> 63) ^ 1;
}

struct walk {
    const char *t; /* the task looked at: the current one, then its parent... */
    const struct td_fsw_self *me;
    __u32 tgid; /* the last one read: the daemon's once it is found */
};

/* One step up: 1 (stop) once the daemon is found or the walk cannot go on.
 * What it found is the tgid it read last, not a flag set when it finds it:
 * the flag, 0 before and 1 after, had the verifier check this twice (a
 * state it had not seen at the loop's call), where the tgid starts as a
 * number it knows nothing of and stays one. */
static long up(__u32 i, void *data)
{
    (void)i;
    struct walk *w = data;
    __u32 tgid = 0;
    const char *parent = 0;
    long err = bpf_probe_read_kernel(&tgid, sizeof(tgid), w->t + w->me->off_tgid);
    /* stored from a register, as it was set: the helper's write, not, would
     * look to the verifier like bytes it knows nothing of, another state */
    w->tgid = tgid;
    if (err < 0)
        return 1; /* and the tgid 0, no process's */
    if (tgid == w->me->tgid ||
        bpf_probe_read_kernel(&parent, sizeof(parent), w->t + w->me->off_parent) < 0 || !parent)
        return 1;
    w->t = parent;
    return 0;
}

static __always_inline int ours(void)
{
    __u32 zero = 0;
    const struct td_fsw_self *me = bpf_map_lookup_elem(&self, &zero);
    if (!me || !me->tgid)
        return 0;
    struct walk w = {.t = (const char *)bpf_get_current_task(), .me = me, .tgid = me->tgid ^ 1};
#if TD_FSW_BPF_LOOP
    /* bpf_loop (Linux 5.17): the verifier checks up() once, not 32
     * times (fswatch.c falls back to the other object where the kernel
     * has no bpf_loop) */
    bpf_loop(ANCESTRY, up, &w, 0);
#else
    for (int i = 0; i < ANCESTRY; i++)
        if (up(i, &w))
            break;
#endif
    return w.tgid == me->tgid;
}

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, TD_FSW_RING_BYTES);
} ring SEC(".maps");

/* x86-64's struct pt_regs, by word */
enum { R10 = 7, DX = 12, SI = 13, DI = 14, ORIG_AX = 15 };

/* word i of them, from the copy of R10 to ORIG_AX read at once: one helper
 * call where the cases made one to three each (and the verifier walked
 * them all) */
#define arg(regs, i) ((regs)[(i)-R10])

struct fnv {
    const __u64 *word;
    __u32 h;
};

/* One word of the path into the hash: 1 (stop) at the word that ends it,
 * the first with a 0 byte, whose bytes past that 0 count for nothing. No
 * branch: the verifier walks it once. */
static long fnv_word(__u32 i, void *data)
{
    struct fnv *f = data;
    __u64 v = f->word[i % (TD_FSW_PATH_MAX / 8)];
    /* the high bit of each 0 byte, and maybe of a 1 byte past one: the
     * lowest is the path's end, and every byte from there on is 0 */
    __u64 nul = (v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL;
    v &= ((nul & -nul) >> 7) - 1;
    f->h = (f->h ^ (__u32)v) * 16777619u;
    f->h = (f->h ^ (__u32)(v >> 32)) * 16777619u;
    return is_zero(nul) ^ 1;
}

/* The failed call's record sent, counted, or dropped (its budget spent, a
 * repeat). A global function: the verifier checks it once, knowing only
 * that its arguments are numbers, where inlined it walked it once for
 * each of the system calls' cases. Its call's counters looked up again (a
 * global function takes no map value). The record is made on the stack
 * and only what is sent goes into the ring: a repeat or a record past its
 * budget takes no room there, so a call's records never need more of it
 * than its budgets (fswatch_rec.h). Whether it is ENOENT is a number, not
 * a branch: a branch on it, tested again for the counter and the budget,
 * had the verifier walk the rest of this twice. */
__attribute__((noinline)) int record(long ret, long nr, unsigned long path, unsigned long flags,
                                     long dirfd)
{
    __u32 uid = (__u32)bpf_get_current_uid_gid();
    struct td_fsw_call *c = bpf_map_lookup_elem(&calls, &uid);
    if (!c)
        return 0;
    __u64 noent = is_zero(ret + ENOENT);
    __sync_fetch_and_add(&c->refused, noent ^ 1);
    struct td_fsw_rec r;
    /* a path that cannot be read is left empty (the helper zeroes it) */
    bpf_probe_read_user_str(r.path, sizeof(r.path), (const void *)path);
    /* FNV-1a of what the record says, the path 8 bytes at a time */
    struct fnv fnv = {.word = (const __u64 *)r.path,
                      .h = 2166136261u ^ (__u32)nr ^ ((__u32)-ret << 16) ^
                           ((__u32)flags & 01103)}; /* the access, O_CREAT, O_TRUNC */
#if TD_FSW_BPF_LOOP
    bpf_loop(TD_FSW_PATH_MAX / 8, fnv_word, &fnv, 0); /* verified once, not 32 times */
#else
#pragma unroll
    for (int i = 0; i < TD_FSW_PATH_MAX / 8; i++)
        if (fnv_word(i, &fnv))
            break;
#endif
    __u32 h = fnv.h;
    __u32 *seen = &c->recent[h % TD_FSW_RECENT];
    if (*seen == h ||
        __sync_fetch_and_add(&c->sent[noent], 1) >=
            TD_FSW_REFUSED_BUDGET + noent * (TD_FSW_NOENT_BUDGET - TD_FSW_REFUSED_BUDGET))
        return 0;
    *seen = h;
    r.uid = uid;
    r.err = (__s32)-ret;
    r.nr = (__u32)nr;
    r.flags = (__u32)flags;
    r.dirfd = (__s32)dirfd;
    r.pad = 0;
    if (bpf_ringbuf_output(&ring, &r, sizeof(r), 0) < 0)
        __sync_fetch_and_add(&c->lost, 1);
    return 0;
}

SEC("raw_tp/sys_exit")
int fsw_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
    long ret = (long)ctx->args[1];
    if (ret != -EACCES && ret != -EPERM && ret != -EROFS && ret != -ENOENT)
        return 0;
    __u32 uid = (__u32)bpf_get_current_uid_gid();
    struct td_fsw_call *c = bpf_map_lookup_elem(&calls, &uid);
    if (!c)
        return 0;
    /* before the system call is looked at, not after: there its cases make
     * a dozen states, each of which the verifier walked up 32 ancestors
     * for (26 ms a load, most of toolexec sandbox's start as root); here
     * once */
    if (!ours())
        return 0;
    unsigned long regs[ORIG_AX - R10 + 1] = {0};
    bpf_probe_read_kernel(regs, sizeof(regs), (const unsigned long *)ctx->args[0] + R10);
    long nr = (long)arg(regs, ORIG_AX);
    unsigned long path = 0, flags = 0;
    long dirfd = TD_FSW_AT_FDCWD; /* what a relative name is relative to */
    switch (nr) {
    case TD_FSW_NR_OPEN:
    case TD_FSW_NR_CREAT:
        path = arg(regs, DI), flags = nr == TD_FSW_NR_CREAT ? 01101 : arg(regs, SI);
        break;
    case TD_FSW_NR_OPENAT:
        dirfd = (int)arg(regs, DI), path = arg(regs, SI), flags = arg(regs, DX);
        break;
    case TD_FSW_NR_OPENAT2: /* struct open_how's first word: its flags */
        dirfd = (int)arg(regs, DI), path = arg(regs, SI);
        bpf_probe_read_user(&flags, sizeof(flags), (const void *)arg(regs, DX));
        break;
    case TD_FSW_NR_EXECVE:
    case TD_FSW_NR_MKDIR:
    case TD_FSW_NR_RMDIR:
    case TD_FSW_NR_UNLINK:
    case TD_FSW_NR_RENAME:
    case TD_FSW_NR_TRUNCATE:
    case TD_FSW_NR_MKNOD:
    case TD_FSW_NR_CHMOD:
    case TD_FSW_NR_CHOWN:
    case TD_FSW_NR_LCHOWN:
        path = arg(regs, DI);
        break;
    case TD_FSW_NR_LINK:    /* the new name */
    case TD_FSW_NR_SYMLINK: /* the link's name */
        path = arg(regs, SI);
        break;
    case TD_FSW_NR_EXECVEAT:
    case TD_FSW_NR_MKDIRAT:
    case TD_FSW_NR_UNLINKAT:
    case TD_FSW_NR_RENAMEAT:
    case TD_FSW_NR_RENAMEAT2:
    case TD_FSW_NR_MKNODAT:
    case TD_FSW_NR_FCHMODAT:
    case TD_FSW_NR_FCHOWNAT:
        dirfd = (int)arg(regs, DI), path = arg(regs, SI);
        flags = nr == TD_FSW_NR_UNLINKAT ? arg(regs, DX) : 0;
        break;
    case TD_FSW_NR_SYMLINKAT:
        dirfd = (int)arg(regs, SI), path = arg(regs, DX);
        break;
    case TD_FSW_NR_LINKAT:
        dirfd = (int)arg(regs, DX), path = arg(regs, R10);
        break;
    default:
        return 0;
    }
    return record(ret, nr, path, flags, dirfd);
}
