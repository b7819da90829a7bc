/*
 * spawnmsg.c - td_spawn as one flat message and back (spawnmsg.h).
 *
 * Layout: a magic, the integers, then the strings (a 32-bit length, the
 * bytes and their NUL, so that the unpacked pointers point into the message
 * itself), the string lists (a count, then strings), the limits, the filter
 * program and the view's operations. NONE as a length or count stands for a
 * NULL pointer. Integers are in the machine's order: both ends are the same
 * program on the same machine.
 *
 * Unpacking checks every length against what is left and that the message
 * ends exactly where the last field does: the spawner trusts nothing but its
 * socket's peer, and a bad message must fail whole, not half-built.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spawnmsg.h"

#define MAGIC 0x50535454u /* "TTSP" */
#define NONE 0xffffffffu

struct writer {
    uint8_t *buf;
    size_t len, cap;
    int err;
};

static void put(struct writer *w, const void *p, size_t n)
{
    if (w->err)
        return;
    if (w->len + n > TD_SPAWNMSG_MAX) {
        w->err = E2BIG;
        return;
    }
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *b = realloc(w->buf, cap);
        if (!b) {
            w->err = ENOMEM;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put_u32(struct writer *w, uint32_t v)
{
    put(w, &v, sizeof(v));
}

static void put_i32(struct writer *w, int32_t v)
{
    put(w, &v, sizeof(v));
}

static void put_str(struct writer *w, const char *s)
{
    if (!s) {
        put_u32(w, NONE);
        return;
    }
    size_t n = strlen(s);
    put_u32(w, (uint32_t)n);
    put(w, s, n + 1);
}

static void put_strv(struct writer *w, const char *const *v)
{
    if (!v) {
        put_u32(w, NONE);
        return;
    }
    uint32_t n = 0;
    while (v[n])
        n++;
    put_u32(w, n);
    for (uint32_t i = 0; i < n; i++)
        put_str(w, v[i]);
}

int td_spawnmsg_pack(const struct td_spawn *s, uint8_t **buf, size_t *len)
{
    struct writer w = {0};
    put_u32(&w, MAGIC);
    int32_t ints[] = {s->init,      s->ns_flags,      (int32_t)s->uid, (int32_t)s->gid,
                      s->hand_over, s->filter_notify, s->landlock_abi, s->proxy_port,
                      s->in_socket, s->dev_bound};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        put_i32(&w, ints[i]);
    put_str(&w, s->cwd);
    put_str(&w, s->work_dir);
    put_str(&w, s->uid_map);
    put_str(&w, s->gid_map);
    put_strv(&w, (const char *const *)s->argv);
    put_strv(&w, (const char *const *)s->envp);
    put_strv(&w, s->hide);
    put_strv(&w, s->ll_write);
    put_u32(&w, (uint32_t)s->nrlimits);
    for (size_t i = 0; i < s->nrlimits; i++) {
        put_i32(&w, s->rlimits[i].resource);
        uint64_t cur = s->rlimits[i].lim.rlim_cur, max = s->rlimits[i].lim.rlim_max;
        put(&w, &cur, sizeof(cur));
        put(&w, &max, sizeof(max));
    }
    put_u32(&w, s->filter ? s->filter->len : NONE);
    if (s->filter)
        put(&w, s->filter->filter, (size_t)s->filter->len * sizeof(struct sock_filter));
    put_u32(&w, s->fs ? (uint32_t)s->fs->n : NONE);
    for (size_t i = 0; s->fs && i < s->fs->n; i++) {
        const struct td_fs_op *op = &s->fs->ops[i];
        uint8_t b[2] = {op->kind, op->optional};
        put(&w, b, sizeof(b));
        int16_t slot = op->slot;
        put(&w, &slot, sizeof(slot));
        put_u32(&w, op->mode);
        put_str(&w, op->path);
        put_str(&w, op->arg);
        put_str(&w, op->arg2);
    }
    if (w.err) {
        free(w.buf);
        return -w.err;
    }
    *buf = w.buf;
    *len = w.len;
    return 0;
}

struct reader {
    const uint8_t *p;
    size_t left;
    bool bad;
};

static void get(struct reader *r, void *out, size_t n)
{
    if (r->bad || r->left < n) {
        r->bad = true;
        memset(out, 0, n);
        return;
    }
    memcpy(out, r->p, n);
    r->p += n;
    r->left -= n;
}

static uint32_t get_u32(struct reader *r)
{
    uint32_t v;
    get(r, &v, sizeof(v));
    return v;
}

static const char *get_str(struct reader *r)
{
    uint32_t n = get_u32(r);
    if (r->bad || n == NONE)
        return NULL;
    if (n >= r->left || r->p[n] != '\0' || memchr(r->p, '\0', n)) {
        r->bad = true;
        return NULL;
    }
    const char *s = (const char *)r->p;
    r->p += n + 1;
    r->left -= n + 1;
    return s;
}

/* A NULL-terminated list, or NULL for none; r->bad on a malformed one. */
static const char **get_strv(struct reader *r)
{
    uint32_t n = get_u32(r);
    if (r->bad || n == NONE)
        return NULL;
    if (n > r->left / 5) { /* each string takes 5 bytes at least */
        r->bad = true;
        return NULL;
    }
    const char **v = calloc((size_t)n + 1, sizeof(*v));
    if (!v) {
        r->bad = true;
        return NULL;
    }
    for (uint32_t i = 0; i < n && !r->bad; i++)
        if (!(v[i] = get_str(r)))
            r->bad = true;
    return v;
}

int td_spawnmsg_unpack(const uint8_t *buf, size_t len, struct td_spawnmsg *m)
{
    memset(m, 0, sizeof(*m));
    struct reader r = {buf, len, false};
    struct td_spawn *s = &m->s;
    if (get_u32(&r) != MAGIC)
        return -EINVAL;
    int32_t ints[10];
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        get(&r, &ints[i], sizeof(ints[i]));
    s->init = ints[0];
    s->ns_flags = ints[1];
    s->uid = (uid_t)ints[2];
    s->gid = (gid_t)ints[3];
    s->hand_over = ints[4];
    s->filter_notify = ints[5];
    s->landlock_abi = ints[6];
    s->proxy_port = ints[7];
    s->in_socket = ints[8];
    s->dev_bound = ints[9];
    s->cwd = get_str(&r);
    s->work_dir = get_str(&r);
    s->uid_map = get_str(&r);
    s->gid_map = get_str(&r);
    m->argv = (char **)get_strv(&r);
    m->envp = (char **)get_strv(&r);
    m->hide = get_strv(&r);
    m->ll_write = get_strv(&r);
    uint32_t n = get_u32(&r);
    if (!r.bad && n > 16) /* a handful of limits (spawndesc.c's build_rlimits) */
        r.bad = true;
    if (!r.bad && n) {
        m->rlimits = calloc(n, sizeof(*m->rlimits));
        r.bad = !m->rlimits;
        for (uint32_t i = 0; i < n && !r.bad; i++) {
            uint64_t cur, max;
            get(&r, &m->rlimits[i].resource, sizeof(m->rlimits[i].resource));
            get(&r, &cur, sizeof(cur));
            get(&r, &max, sizeof(max));
            m->rlimits[i].lim = (struct rlimit){(rlim_t)cur, (rlim_t)max};
        }
    }
    s->nrlimits = n;
    uint32_t flen = get_u32(&r);
    if (!r.bad && flen != NONE) {
        if (flen == 0 || flen > BPF_MAXINSNS || (size_t)flen * sizeof(struct sock_filter) > r.left)
            r.bad = true;
        else if (!(m->filter.filter = malloc((size_t)flen * sizeof(struct sock_filter))))
            r.bad = true;
        else {
            get(&r, m->filter.filter, (size_t)flen * sizeof(struct sock_filter));
            m->filter.len = (unsigned short)flen;
            s->filter = &m->filter;
        }
    }
    uint32_t nops = get_u32(&r);
    if (!r.bad && nops != NONE) {
        if (nops > r.left / 20) /* 8 bytes and three NONE strings at least */
            r.bad = true;
        else if (nops && !(m->ops = calloc(nops, sizeof(*m->ops))))
            r.bad = true;
        for (uint32_t i = 0; i < nops && !r.bad; i++) {
            struct td_fs_op *op = &m->ops[i];
            uint8_t b[2];
            int16_t slot;
            get(&r, b, sizeof(b));
            get(&r, &slot, sizeof(slot));
            op->kind = b[0];
            op->optional = b[1] != 0;
            op->slot = slot;
            op->mode = get_u32(&r);
            op->path = get_str(&r);
            op->arg = get_str(&r);
            op->arg2 = get_str(&r);
            if (op->kind > TD_FS_LAST || slot < 0 || slot >= TD_FS_SLOTS)
                r.bad = true;
        }
        m->fs = (struct td_fsplan){m->ops, nops};
        s->fs = &m->fs;
    }
    if (r.bad || r.left || !m->argv || !m->argv[0] || !m->envp || !s->cwd) {
        td_spawnmsg_free(m);
        return -EINVAL;
    }
    s->argv = m->argv;
    s->envp = m->envp;
    s->hide = m->hide;
    s->ll_write = m->ll_write;
    s->rlimits = m->rlimits;
    s->cgroup_dir = s->cgroup_procs = -1;
    return 0;
}

size_t td_spawnmsg_req_fds(const struct td_spawn_req *q)
{
    if (q->type == TD_SPAWN_REQ_DROP)
        return 0;
    return (q->type == TD_SPAWN_REQ_START ? TD_SANDBOX_ENDS : 0) +
           !!(q->flags & TD_SPAWN_CGROUP_DIR) + !!(q->flags & TD_SPAWN_CGROUP_PROCS);
}

/* Microseconds as a timeval; what is not a time (negative) as none. */
static struct timeval tv_of(int64_t us)
{
    if (us < 0)
        us = 0;
    return (struct timeval){us / 1000000, us % 1000000};
}

bool td_spawnmsg_reply(const void *buf, size_t n, size_t nfds, struct td_spawn_reply *r,
                       struct td_spawn_got *g)
{
    *g = (struct td_spawn_got){.pidfd = -1};
    for (int k = 0; k < TD_HAND_COUNT; k++)
        g->handed[k] = -1;
    if (n != sizeof(*r))
        return false;
    memcpy(r, buf, sizeof(*r));
    memcpy(g->what, r->what, sizeof(r->what));
    g->what[sizeof(r->what)] = '\0';
    /* a start's pidfd, then what it handed up in the order of their bits */
    if (r->type == TD_SPAWN_STARTED && !r->err && nfds > 0) {
        g->pidfd = (int)g->used++;
        for (int k = 0; k < TD_HAND_COUNT; k++)
            if ((r->handed & (1u << k)) && g->used < nfds)
                g->handed[k] = (int)g->used++;
    }
    if (r->type == TD_SPAWN_EXITED) {
        g->ru.ru_utime = tv_of(r->user_us);
        g->ru.ru_stime = tv_of(r->sys_us);
        g->ru.ru_maxrss = r->maxrss_kb < 0 ? 0 : r->maxrss_kb;
    }
    return true;
}

void td_spawnmsg_free(struct td_spawnmsg *m)
{
    free(m->argv);
    free(m->envp);
    free(m->hide);
    free(m->ll_write);
    free(m->rlimits);
    free(m->filter.filter);
    free(m->ops);
    memset(m, 0, sizeof(*m));
}
