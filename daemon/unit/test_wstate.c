/* A worker's lifetime table (worker_state.c, drawn in worker_int.h): every
 * transition the picture documents lands where it says, every other one is
 * refused (built with NDEBUG, as where asserts are off: logged, false, the
 * state unchanged), what each state answers, and that no state is a dead
 * end: from each, some events lead to CLOSING, where the worker is freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "worker_int.h"

/* The picture, transition by transition, written out on its own. */
static const struct {
    enum td_wstate from;
    enum td_wevent ev;
    enum td_wstate to;
} legal[] = {
    {TD_W_STARTING, TD_WE_SPAWNED, TD_W_RUNNING},
    {TD_W_STARTING, TD_WE_REAPED, TD_W_REAPING},   /* the template died before its fork */
    {TD_W_STARTING, TD_WE_INIT_ENDED, TD_W_ENDED}, /* its report before the spawner's reply */
    {TD_W_STARTING, TD_WE_RESULT, TD_W_RESULT},
    {TD_W_RUNNING, TD_WE_REAPED, TD_W_REAPING},
    {TD_W_RUNNING, TD_WE_INIT_ENDED, TD_W_ENDED},
    {TD_W_RUNNING, TD_WE_RESULT, TD_W_RESULT},
    {TD_W_REAPING, TD_WE_INIT_ENDED, TD_W_ENDED_REAPING},
    {TD_W_REAPING, TD_WE_EXITED, TD_W_EXITED},
    {TD_W_REAPING, TD_WE_RESULT, TD_W_RESULT_REAPING},
    {TD_W_ENDED, TD_WE_SPAWNED, TD_W_ENDED},
    {TD_W_ENDED, TD_WE_REAPED, TD_W_ENDED_REAPING},
    {TD_W_ENDED, TD_WE_RESULT, TD_W_RESULT_ENDED},
    {TD_W_ENDED_REAPING, TD_WE_EXITED, TD_W_EXITED},
    {TD_W_ENDED_REAPING, TD_WE_RESULT, TD_W_RESULT_ENDED_REAPING},
    {TD_W_EXITED, TD_WE_RESULT, TD_W_DONE},
    {TD_W_RESULT, TD_WE_SPAWNED, TD_W_RESULT},
    {TD_W_RESULT, TD_WE_REAPED, TD_W_RESULT_REAPING},
    {TD_W_RESULT, TD_WE_INIT_ENDED, TD_W_RESULT_ENDED},
    {TD_W_RESULT_REAPING, TD_WE_INIT_ENDED, TD_W_RESULT_ENDED_REAPING},
    {TD_W_RESULT_REAPING, TD_WE_EXITED, TD_W_DONE},
    {TD_W_RESULT_ENDED, TD_WE_SPAWNED, TD_W_RESULT_ENDED},
    {TD_W_RESULT_ENDED, TD_WE_REAPED, TD_W_RESULT_ENDED_REAPING},
    {TD_W_RESULT_ENDED_REAPING, TD_WE_EXITED, TD_W_DONE},
    {TD_W_DONE, TD_WE_CLOSE, TD_W_CLOSING},
    /* a serving worker's response: a call ends, the worker stays */
    {TD_W_STARTING, TD_WE_ANSWERED, TD_W_STARTING},
    {TD_W_RUNNING, TD_WE_ANSWERED, TD_W_RUNNING},
    {TD_W_ENDED, TD_WE_ANSWERED, TD_W_ENDED},
};
#define NLEGAL (sizeof(legal) / sizeof(legal[0]))

static int documented(enum td_wstate s, enum td_wevent ev)
{
    for (size_t i = 0; i < NLEGAL; i++)
        if (legal[i].from == s && legal[i].ev == ev)
            return (int)legal[i].to;
    return -1;
}

static void test_legal_transitions(void **state)
{
    (void)state;
    for (size_t i = 0; i < NLEGAL; i++) {
        struct td_worker w;
        memset(&w, 0, sizeof(w));
        w.state = legal[i].from;
        assert_int_equal(td_worker_next(legal[i].from, legal[i].ev), legal[i].to);
        assert_true(td_worker_step(&w, legal[i].ev));
        assert_int_equal(w.state, legal[i].to);
    }
}

static void test_illegal_refused(void **state)
{
    (void)state;
    unsigned refused = 0;
    for (int s = 0; s < TD_W_NSTATES; s++) {
        for (int ev = 0; ev < TD_WE_NEVENTS; ev++) {
            if (documented(s, ev) >= 0)
                continue;
            struct td_worker w;
            memset(&w, 0, sizeof(w));
            w.state = s;
            assert_int_equal(td_worker_next(s, ev), TD_W_ILLEGAL);
            assert_false(td_worker_step(&w, ev));
            assert_int_equal(w.state, s);
            refused++;
        }
    }
    assert_int_equal(refused, TD_W_NSTATES * TD_WE_NEVENTS - NLEGAL);
    /* out of range either way: no entry */
    assert_int_equal(td_worker_next(TD_W_NSTATES, TD_WE_RESULT), TD_W_ILLEGAL);
    assert_int_equal(td_worker_next(TD_W_RUNNING, TD_WE_NEVENTS), TD_W_ILLEGAL);
}

/* What each state answers, as worker_int.h says: result taken, exit
 * handled, pid gone (the reaper's word), its init's report, all gone. */
static void test_predicates(void **state)
{
    (void)state;
    static const struct {
        enum td_wstate s;
        bool result, reaped, pid_gone, ended, gone;
    } want[] = {
        {TD_W_STARTING, 0, 0, 0, 0, 0},      {TD_W_RUNNING, 0, 0, 0, 0, 0},
        {TD_W_REAPING, 0, 0, 1, 0, 0},       {TD_W_ENDED, 0, 0, 0, 1, 1},
        {TD_W_ENDED_REAPING, 0, 0, 1, 1, 1}, {TD_W_EXITED, 0, 1, 1, 0, 1},
        {TD_W_RESULT, 1, 0, 0, 0, 0},        {TD_W_RESULT_REAPING, 1, 0, 1, 0, 0},
        {TD_W_RESULT_ENDED, 1, 0, 0, 1, 1},  {TD_W_RESULT_ENDED_REAPING, 1, 0, 1, 1, 1},
        {TD_W_DONE, 1, 1, 1, 0, 1},          {TD_W_CLOSING, 1, 1, 1, 0, 1},
    };
    assert_int_equal(sizeof(want) / sizeof(want[0]), TD_W_NSTATES);
    for (size_t i = 0; i < TD_W_NSTATES; i++) {
        assert_int_equal(want[i].s, i);
        assert_int_equal(td_wstate_has_result(want[i].s), want[i].result);
        assert_int_equal(td_wstate_reaped(want[i].s), want[i].reaped);
        assert_int_equal(td_wstate_pid_gone(want[i].s), want[i].pid_gone);
        assert_int_equal(td_wstate_ended(want[i].s), want[i].ended);
        assert_int_equal(td_wstate_gone(want[i].s), want[i].gone);
        assert_string_not_equal(td_wstate_name(want[i].s), "illegal");
    }
}

/* Every state is reached from where a worker starts (STARTING: the
 * spawner's or a template's; RUNNING: spawned here), and from each some
 * events lead to CLOSING: no worker is left where it can never be freed.
 * A spawned that keeps the state and a serving worker's answered are the
 * only self-loops, none other. */
static void test_reachable_and_no_dead_end(void **state)
{
    (void)state;
    bool reached[TD_W_NSTATES] = {[TD_W_STARTING] = true, [TD_W_RUNNING] = true};
    for (bool more = true; more;) {
        more = false;
        for (int s = 0; s < TD_W_NSTATES; s++)
            for (int ev = 0; reached[s] && ev < TD_WE_NEVENTS; ev++) {
                enum td_wstate to = td_worker_next(s, ev);
                if (to != TD_W_ILLEGAL && !reached[to])
                    reached[to] = more = true;
            }
    }
    bool frees[TD_W_NSTATES] = {[TD_W_CLOSING] = true};
    for (bool more = true; more;) {
        more = false;
        for (int s = 0; s < TD_W_NSTATES; s++)
            for (int ev = 0; !frees[s] && ev < TD_WE_NEVENTS; ev++) {
                enum td_wstate to = td_worker_next(s, ev);
                if (to != TD_W_ILLEGAL && frees[to])
                    frees[s] = more = true;
            }
    }
    for (int s = 0; s < TD_W_NSTATES; s++) {
        assert_true(reached[s]);
        assert_true(frees[s]);
        for (int ev = 0; ev < TD_WE_NEVENTS; ev++)
            if (td_worker_next(s, ev) == (enum td_wstate)s)
                assert_true(ev == TD_WE_SPAWNED || ev == TD_WE_ANSWERED);
    }
}

/* Lifetimes the daemon goes through, event by event. */
static void walk(enum td_wstate from, const enum td_wevent *evs, size_t n, enum td_wstate end)
{
    struct td_worker w;
    memset(&w, 0, sizeof(w));
    w.state = from;
    for (size_t i = 0; i < n; i++)
        assert_true(td_worker_step(&w, evs[i]));
    assert_int_equal(w.state, end);
}
#define WALK(from, end, ...)                                                                       \
    walk(from, (const enum td_wevent[]){__VA_ARGS__},                                              \
         sizeof((const enum td_wevent[]){__VA_ARGS__}) / sizeof(enum td_wevent), end)

static void test_lifetimes(void **state)
{
    (void)state;
    /* cold, spawned here: a response frame, then its reaping */
    WALK(TD_W_RUNNING, TD_W_CLOSING, TD_WE_RESULT, TD_WE_REAPED, TD_WE_EXITED, TD_WE_CLOSE);
    /* it exits first: its exit decides the result */
    WALK(TD_W_RUNNING, TD_W_CLOSING, TD_WE_REAPED, TD_WE_EXITED, TD_WE_RESULT, TD_WE_CLOSE);
    /* under an init: its report decides, the reap comes later */
    WALK(TD_W_RUNNING, TD_W_CLOSING, TD_WE_INIT_ENDED, TD_WE_RESULT, TD_WE_REAPED, TD_WE_EXITED,
         TD_WE_CLOSE);
    /* the spawner's: cancelled before its fork, which is then killed */
    WALK(TD_W_STARTING, TD_W_DONE, TD_WE_RESULT, TD_WE_SPAWNED, TD_WE_REAPED, TD_WE_EXITED);
    /* the spawner could not start it */
    WALK(TD_W_STARTING, TD_W_DONE, TD_WE_REAPED, TD_WE_EXITED, TD_WE_RESULT);
    /* its output paused: reaped before its result is known */
    WALK(TD_W_RUNNING, TD_W_EXITED, TD_WE_INIT_ENDED, TD_WE_REAPED, TD_WE_EXITED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legal_transitions), cmocka_unit_test(test_illegal_refused),
        cmocka_unit_test(test_predicates),        cmocka_unit_test(test_reachable_and_no_dead_end),
        cmocka_unit_test(test_lifetimes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
