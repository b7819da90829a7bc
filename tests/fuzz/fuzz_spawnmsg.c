/*
 * fuzz_spawnmsg - the spawner's wire (daemon/run/spawnmsg.c), both ways.
 *
 * Input layout:
 *   [0]   bit 0 clear: a request, as the spawner reads it (spawnproc.c): the
 *         rest is a td_spawn_req header, then the flat description;
 *         bit 0 set: a reply, as the loop reads it (spawner.c): the rest is
 *         the datagram, and bits 1-7 (mod 1 + TD_HAND_COUNT + 2) the number
 *         of descriptors that came with it
 *   rest  the datagram
 *
 * Invariants, a request: the descriptors a header asks for are at most the
 * spawner's room (MAX_REQ_FDS); a description unpacks whole or not at all;
 * when whole, argv (with argv[0]), envp and cwd are there, every string and
 * list lies within the message, the view's operations are of known kinds
 * and slots, and packing it again gives a message of the same length that
 * unpacks to a description packing to the same bytes (one canonical form).
 * A reply: not one unless exactly a reply's size; of the descriptors, those
 * taken are the first, a pidfd only for a start that succeeded, each
 * handed-up one a distinct index after it; the step NUL-terminated; the
 * resource use a valid time.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "spawnmsg.h"

#define MAX_REQ_FDS (TD_SANDBOX_ENDS + 2) /* spawnproc.c's room */

static int within(const void *p, const uint8_t *buf, size_t len)
{
    const uint8_t *b = p;
    return b >= buf && b < buf + len && memchr(b, '\0', (size_t)(buf + len - b)) != NULL;
}

static void check_strv(const char *const *v, const uint8_t *buf, size_t len, const char *what)
{
    for (size_t i = 0; v && v[i]; i++)
        CHECK(within(v[i], buf, len), "%s[%zu] outside the message", what, i);
}

static void check_unpacked(const struct td_spawnmsg *m, const uint8_t *buf, size_t len)
{
    const struct td_spawn *s = &m->s;
    CHECK(s->argv && s->argv[0] && s->envp && s->cwd, "argv, envp or cwd missing");
    CHECK(within(s->cwd, buf, len), "cwd outside the message");
    CHECK(!s->work_dir || within(s->work_dir, buf, len), "work_dir outside the message");
    CHECK(!s->uid_map || within(s->uid_map, buf, len), "uid_map outside the message");
    CHECK(!s->gid_map || within(s->gid_map, buf, len), "gid_map outside the message");
    check_strv((const char *const *)s->argv, buf, len, "argv");
    check_strv((const char *const *)s->envp, buf, len, "envp");
    check_strv(s->hide, buf, len, "hide");
    check_strv(s->ll_write, buf, len, "ll_write");
    CHECK(s->nrlimits <= 16 && (!s->nrlimits || s->rlimits), "%zu limits", s->nrlimits);
    CHECK(!s->filter || (s->filter->len > 0 && s->filter->len <= BPF_MAXINSNS),
          "filter of %u instructions", s->filter ? s->filter->len : 0);
    CHECK(s->cgroup_dir == -1 && s->cgroup_procs == -1, "descriptors not -1");
    for (size_t i = 0; s->fs && i < s->fs->n; i++) {
        const struct td_fs_op *op = &s->fs->ops[i];
        CHECK(op->kind <= TD_FS_LAST && op->slot >= 0 && op->slot < TD_FS_SLOTS,
              "view op %zu: kind %d slot %d", i, op->kind, op->slot);
        CHECK(!op->path || within(op->path, buf, len), "view op path outside the message");
        CHECK(!op->arg || within(op->arg, buf, len), "view op arg outside the message");
        CHECK(!op->arg2 || within(op->arg2, buf, len), "view op arg2 outside the message");
    }
}

/* The unpacked description packed again: the same length, and from there
 * a fixed point (bools and the like come back as 0 or 1). */
static void check_repack(const struct td_spawnmsg *m, size_t len)
{
    uint8_t *p1 = NULL, *p2 = NULL;
    size_t l1 = 0, l2 = 0;
    int rc = td_spawnmsg_pack(&m->s, &p1, &l1);
    CHECK(rc == 0, "repack: %d", rc);
    CHECK(l1 == len, "repacked to %zu bytes from %zu", l1, len);
    struct td_spawnmsg m2;
    rc = td_spawnmsg_unpack(p1, l1, &m2);
    CHECK(rc == 0, "a packed description does not unpack: %d", rc);
    check_unpacked(&m2, p1, l1);
    rc = td_spawnmsg_pack(&m2.s, &p2, &l2);
    CHECK(rc == 0 && l2 == l1 && memcmp(p1, p2, l1) == 0, "packing is not canonical");
    td_spawnmsg_free(&m2);
    free(p1);
    free(p2);
}

static void request(const uint8_t *data, size_t size)
{
    struct td_spawn_req q;
    if (size < sizeof(q))
        return;
    memcpy(&q, data, sizeof(q));
    size_t need = td_spawnmsg_req_fds(&q);
    CHECK(need <= MAX_REQ_FDS, "a request of type %u asks for %zu descriptors", q.type, need);
    /* the spawner's buffer is aligned to 8 (spawnproc.c), and so this copy */
    size_t len = size - sizeof(q);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return;
    memcpy(buf, data + sizeof(q), len);
    struct td_spawnmsg m;
    int rc = td_spawnmsg_unpack(buf, len, &m);
    if (rc == 0) {
        check_unpacked(&m, buf, len);
        check_repack(&m, len);
        td_spawnmsg_free(&m);
    } else {
        CHECK(rc == -EINVAL, "unpack: %d", rc);
        CHECK(!m.argv && !m.envp && !m.rlimits && !m.ops && !m.filter.filter,
              "a refused message left something allocated");
    }
    free(buf);
}

static void reply(uint8_t sel, const uint8_t *data, size_t size)
{
    size_t nfds = (size_t)(sel >> 1) % (1 + TD_HAND_COUNT + 2);
    struct td_spawn_reply r;
    struct td_spawn_got g;
    bool ok = td_spawnmsg_reply(data, size, nfds, &r, &g);
    CHECK(ok == (size == sizeof(r)), "a reply of %zu bytes %s", size, ok ? "taken" : "refused");
    CHECK(g.used <= nfds, "%zu of %zu descriptors taken", g.used, nfds);
    if (!ok) {
        CHECK(g.used == 0 && g.pidfd == -1, "a refused reply took descriptors");
        return;
    }
    bool start = r.type == TD_SPAWN_STARTED && !r.err && nfds > 0;
    CHECK(start == (g.pidfd == 0), "pidfd at %d (type %u, err %d, %zu fds)", g.pidfd, r.type, r.err,
          nfds);
    size_t want = start ? 1 : 0;
    for (int k = 0; k < TD_HAND_COUNT; k++) {
        if (g.handed[k] < 0)
            continue;
        CHECK(start && (r.handed & (1u << k)), "handed %d without its bit", k);
        CHECK((size_t)g.handed[k] == want, "handed %d at %d, not %zu", k, g.handed[k], want);
        want++;
    }
    CHECK(g.used == want, "%zu taken, %zu named", g.used, want);
    CHECK(strlen(g.what) < sizeof(g.what), "what not terminated");
    CHECK(g.ru.ru_utime.tv_sec >= 0 && g.ru.ru_utime.tv_usec >= 0 &&
              g.ru.ru_utime.tv_usec < 1000000 && g.ru.ru_stime.tv_sec >= 0 &&
              g.ru.ru_stime.tv_usec >= 0 && g.ru.ru_stime.tv_usec < 1000000 && g.ru.ru_maxrss >= 0,
          "resource use out of range");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        reply(data[0], data + 1, size - 1);
    else
        request(data + 1, size - 1);
    return 0;
}
