/* Unit tests of the worker-slot scheduler (scheduler.c): the order in which
 * waiting batches of several clients, and of several uids, get the daemon's
 * slots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "scheduler.h"

/* A batch as the runner keeps it: its entry, its client, calls to start. */
struct batch {
    struct td_sched_entry e;
    char client;
    int left;
};

static struct batch *batch_of(struct td_sched_entry *e)
{
    return (struct batch *)((char *)e - offsetof(struct batch, e));
}

static void batch_init(struct batch *b, struct td_conn_sched *client, char name, int calls)
{
    memset(b, 0, sizeof(*b));
    b->e.client = client;
    b->client = name;
    b->left = calls;
}

static int queue_len(const struct td_sched *s)
{
    int n = 0;
    for (struct td_sched_entry *e = TAILQ_FIRST(&s->waiting); e; e = TAILQ_NEXT(e, wlink))
        n++;
    return n;
}

static void test_may_start(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct td_uid_sched ua = {0};
    struct td_conn_sched a = {.user = &ua};
    struct batch b;
    batch_init(&b, &a, 'A', 1);
    assert_true(td_sched_may_start(&s, 1, false));
    td_sched_take(&s, &b.e);
    assert_int_equal(s.used, 1);
    assert_int_equal(b.e.slots, 1);
    assert_int_equal(a.slots, 1);
    assert_int_equal(ua.slots, 1);
    assert_false(td_sched_may_start(&s, 1, false)); /* full */
    assert_false(td_sched_may_start(&s, 1, true));
    assert_true(td_sched_may_start(&s, 2, false));
    /* a batch waits: a newcomer may not overtake it, the one whose turn it is may */
    td_sched_enqueue(&s, &b.e);
    assert_false(td_sched_may_start(&s, 2, false));
    assert_true(td_sched_may_start(&s, 2, true));
    td_sched_release(&s, &b.e);
    assert_int_equal(s.used, 0);
    assert_int_equal(b.e.slots, 0);
    assert_int_equal(a.slots, 0);
    assert_int_equal(ua.slots, 0);
}

static void test_queue_ops(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct td_uid_sched ua = {0};
    struct td_conn_sched a = {.user = &ua};
    struct batch b[3];
    for (int i = 0; i < 3; i++) {
        batch_init(&b[i], &a, 'A', 1);
        td_sched_enqueue(&s, &b[i].e);
    }
    td_sched_enqueue(&s, &b[1].e); /* already waiting: stays where it is */
    assert_int_equal(queue_len(&s), 3);
    td_sched_remove(&s, &b[1].e); /* the middle */
    assert_int_equal(queue_len(&s), 2);
    assert_ptr_equal(TAILQ_FIRST(&s.waiting), &b[0].e);
    assert_ptr_equal(TAILQ_NEXT(TAILQ_FIRST(&s.waiting), wlink), &b[2].e);
    td_sched_remove(&s, &b[1].e); /* not waiting: nothing */
    td_sched_remove(&s, &b[2].e); /* the tail */
    assert_ptr_equal(TAILQ_LAST(&s.waiting, td_sched_queue), &b[0].e);
    td_sched_enqueue(&s, &b[2].e);
    assert_ptr_equal(TAILQ_NEXT(TAILQ_FIRST(&s.waiting), wlink), &b[2].e);
    assert_ptr_equal(TAILQ_LAST(&s.waiting, td_sched_queue), &b[2].e);
    td_sched_remove(&s, &b[0].e);
    td_sched_remove(&s, &b[2].e);
    assert_true(TAILQ_EMPTY(&s.waiting));
    assert_null(TAILQ_LAST(&s.waiting, td_sched_queue));
    assert_null(td_sched_next(&s, 8)); /* nobody waits */
}

/* The client holding the fewest slots goes first, wherever it waits. */
static void test_fewest_slots_first(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct td_uid_sched uA = {0}, uB = {0}, uC = {0};
    struct td_conn_sched A = {.user = &uA}, B = {.user = &uB}, C = {.user = &uC};
    struct batch a, b, c;
    batch_init(&a, &A, 'A', 10);
    batch_init(&b, &B, 'B', 10);
    batch_init(&c, &C, 'C', 10);
    for (int i = 0; i < 3; i++)
        td_sched_take(&s, &a.e);
    td_sched_take(&s, &c.e);
    td_sched_enqueue(&s, &a.e);
    td_sched_enqueue(&s, &c.e);
    td_sched_enqueue(&s, &b.e);
    assert_null(td_sched_next(&s, 4)); /* no slot free */
    td_sched_release(&s, &a.e);
    struct td_sched_entry *e = td_sched_next(&s, 4);
    assert_ptr_equal(e, &b.e); /* B holds none */
    assert_false(b.e.waiting);
    assert_int_equal(queue_len(&s), 2);
    td_sched_take(&s, e);
    /* one more slot: A holds two, C one */
    assert_ptr_equal(td_sched_next(&s, 5), &c.e);
}

/* Two clients of two uids: A with batches a1 and a2, B with b1, one call
 * each. */
struct two {
    struct td_uid_sched uA, uB;
    struct td_conn_sched A, B;
    struct batch a1, a2, b1;
};

static void two_init(struct two *t)
{
    memset(t, 0, sizeof(*t));
    t->A.user = &t->uA;
    t->B.user = &t->uB;
    batch_init(&t->a1, &t->A, 'A', 1);
    batch_init(&t->a2, &t->A, 'A', 1);
    batch_init(&t->b1, &t->B, 'B', 1);
}

/* Equal slots: the client served least recently, even behind another. */
static void test_least_recently_served(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct two t;
    two_init(&t);
    td_sched_enqueue(&s, &t.a1.e);
    td_sched_enqueue(&s, &t.a2.e);
    td_sched_enqueue(&s, &t.b1.e);
    assert_ptr_equal(td_sched_next(&s, 1), &t.a1.e); /* all equal: the longest waiting */
    assert_int_equal(t.A.served, 1);
    assert_int_equal(t.a1.e.served_seq, 1);
    /* its call ran and ended: the slot is free again, A no more in use than B */
    assert_ptr_equal(td_sched_next(&s, 1), &t.b1.e);
    assert_int_equal(t.B.served, 2);
    assert_ptr_equal(td_sched_next(&s, 1), &t.a2.e);
    assert_int_equal(t.A.served, 3);
    assert_null(td_sched_next(&s, 1));
}

/* The same client's batches: in the order they came. */
static void test_longest_waiting(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct td_uid_sched uA = {0};
    struct td_conn_sched A = {.user = &uA};
    struct batch a[4];
    for (int i = 0; i < 4; i++) {
        batch_init(&a[i], &A, 'A', 1);
        td_sched_enqueue(&s, &a[i].e);
    }
    for (int i = 0; i < 4; i++)
        assert_ptr_equal(td_sched_next(&s, 1), &a[i].e);
}

/* A whole run: clients A (three batches of 4 calls, come first), B (one of
 * 4) and C (one of 2), two slots. Each handout starts one call; a batch with
 * calls left goes to the back of the queue (as pump_n does); the oldest
 * running call ends before the next handout. At every handout no waiting
 * client holds fewer slots, or as many and was served longer ago. */
static void test_fair_run(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct td_uid_sched uA = {0}, uB = {0}, uC = {0};
    struct td_conn_sched A = {.user = &uA}, B = {.user = &uB}, C = {.user = &uC};
    struct batch bs[5];
    batch_init(&bs[0], &A, 'A', 4);
    batch_init(&bs[1], &A, 'A', 4);
    batch_init(&bs[2], &A, 'A', 4);
    batch_init(&bs[3], &B, 'B', 4);
    batch_init(&bs[4], &C, 'C', 2);
    for (int i = 0; i < 5; i++)
        td_sched_enqueue(&s, &bs[i].e);
    struct batch *running[32];
    int nrun = 0, first = 0;
    char order[32] = "";
    size_t n = 0;
    for (;;) {
        uint64_t before[3] = {A.served, B.served, C.served};
        struct td_sched_entry *pick = td_sched_next(&s, 2);
        if (!pick) {
            if (first == nrun)
                break;
            td_sched_release(&s, &running[first++]->e); /* the oldest ends */
            continue;
        }
        struct batch *b = batch_of(pick);
        for (struct td_sched_entry *x = TAILQ_FIRST(&s.waiting); x; x = TAILQ_NEXT(x, wlink)) {
            assert_true(pick->client->slots <= x->client->slots);
            if (pick->client->slots == x->client->slots)
                assert_true(before[b->client - 'A'] <= x->client->served);
        }
        td_sched_take(&s, pick);
        running[nrun++] = b;
        order[n++] = b->client;
        if (--b->left > 0)
            td_sched_enqueue(&s, pick);
    }
    assert_int_equal(s.used, 0);
    assert_int_equal(n, 18);
    /* B and C are not starved behind A's three batches: while they wait, A
     * gets a turn only as often as each of them */
    assert_string_equal(order, "ABCABCABABAAAAAAAA");
}

/* One uid with many connections (bench/uid_flood.py's flood) against
 * another uid's one call: the other uid goes first when a slot frees, though
 * each of the flood's connections holds no more slots than it does and all
 * came first. */
static void test_uid_before_its_connections(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct td_uid_sched flood = {0}, other = {0};
    struct td_conn_sched A[6], B = {.user = &other};
    struct batch a[6], b;
    for (int i = 0; i < 6; i++) {
        A[i] = (struct td_conn_sched){.user = &flood};
        batch_init(&a[i], &A[i], 'A', 1);
    }
    batch_init(&b, &B, 'B', 1);
    /* two slots: A0 and A1 run, A2..A5 wait, then B comes */
    for (int i = 0; i < 6; i++)
        td_sched_enqueue(&s, &a[i].e);
    for (int i = 0; i < 2; i++) {
        struct td_sched_entry *e = td_sched_next(&s, 2);
        assert_ptr_equal(e, &a[i].e);
        td_sched_take(&s, e);
    }
    assert_int_equal(flood.slots, 2);
    assert_int_equal(A[0].slots, 1);
    td_sched_enqueue(&s, &b.e);
    assert_null(td_sched_next(&s, 2));
    td_sched_release(&s, &a[0].e); /* A0's call ends */
    assert_int_equal(flood.slots, 1);
    struct td_sched_entry *e = td_sched_next(&s, 2);
    assert_ptr_equal(e, &b.e); /* B's uid holds none, the flood's one */
    assert_int_equal(other.served, B.served);
    td_sched_take(&s, e);
    td_sched_release(&s, &a[1].e);
    assert_ptr_equal(td_sched_next(&s, 2), &a[2].e); /* then the flood, in order */
}

/* Equal slots across uids: the uid served least recently goes first, even
 * when the connection that waits was never served itself. */
static void test_uid_least_recently_served(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct td_uid_sched U = {0}, V = {0};
    struct td_conn_sched u1 = {.user = &U}, u2 = {.user = &U}, v1 = {.user = &V};
    struct batch a, b, c;
    batch_init(&a, &u1, 'A', 1);
    batch_init(&b, &u2, 'A', 1);
    batch_init(&c, &v1, 'B', 1);
    td_sched_enqueue(&s, &a.e);
    td_sched_enqueue(&s, &b.e);
    td_sched_enqueue(&s, &c.e);
    assert_ptr_equal(td_sched_next(&s, 1), &a.e);
    assert_int_equal(U.served, 1);
    /* u2 was never served, but its uid was, after V's never */
    assert_ptr_equal(td_sched_next(&s, 1), &c.e);
    assert_ptr_equal(td_sched_next(&s, 1), &b.e);
}

/* A whole run with two uids: U with four connections of 3 calls each, V
 * with one connection of 6 calls, three slots, the oldest call ending before
 * each handout once all slots are taken. While both wait, neither uid holds
 * more than one slot beyond the other's. */
static void test_fair_run_uids(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct td_uid_sched U = {0}, V = {0};
    struct td_conn_sched cu[4], cv = {.user = &V};
    struct batch bs[5];
    for (int i = 0; i < 4; i++) {
        cu[i] = (struct td_conn_sched){.user = &U};
        batch_init(&bs[i], &cu[i], 'U', 3);
    }
    batch_init(&bs[4], &cv, 'V', 6);
    for (int i = 0; i < 5; i++)
        td_sched_enqueue(&s, &bs[i].e);
    struct batch *running[32];
    int nrun = 0, first = 0;
    char order[32] = "";
    size_t n = 0;
    for (;;) {
        struct td_sched_entry *pick = td_sched_next(&s, 3);
        if (!pick) {
            if (first == nrun)
                break;
            td_sched_release(&s, &running[first++]->e);
            continue;
        }
        struct batch *b = batch_of(pick);
        td_sched_take(&s, pick);
        running[nrun++] = b;
        order[n++] = b->client;
        if (--b->left > 0)
            td_sched_enqueue(&s, pick);
    }
    assert_int_equal(n, 18);
    assert_int_equal(U.slots + V.slots, 0);
    /* V's six are not kept behind U's twelve */
    assert_string_equal(order, "UVUVUVUVUVUVUUUUUU");
}

/* One slot. A's first call starts at once (no queue, so no handout), then
 * A's second batch and B's wait: when A's call ends, both hold no slot, and
 * B, never served, goes before A, just served. */
static void test_direct_start_is_a_turn(void **state)
{
    struct td_sched s = TD_SCHED_INITIALIZER(s);
    struct two t;
    two_init(&t);
    assert_true(td_sched_may_start(&s, 1, false));
    td_sched_take(&s, &t.a1.e);
    assert_int_not_equal(t.uA.served, 0);
    td_sched_enqueue(&s, &t.a2.e);
    td_sched_enqueue(&s, &t.b1.e);
    td_sched_release(&s, &t.a1.e);
    assert_ptr_equal(td_sched_next(&s, 1), &t.b1.e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_may_start),
        cmocka_unit_test(test_queue_ops),
        cmocka_unit_test(test_fewest_slots_first),
        cmocka_unit_test(test_least_recently_served),
        cmocka_unit_test(test_longest_waiting),
        cmocka_unit_test(test_fair_run),
        cmocka_unit_test(test_uid_before_its_connections),
        cmocka_unit_test(test_uid_least_recently_served),
        cmocka_unit_test(test_fair_run_uids),
        cmocka_unit_test(test_direct_start_is_a_turn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
