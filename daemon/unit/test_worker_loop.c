/* "The result callback runs exactly once, never from inside
 * td_worker_start()" (worker.c), on a real libuv loop with real worker
 * processes: plain-protocol tools run from the system's own binaries, and a
 * cancel at every step of the loop from the start to the callback, so that
 * it races the exit, the reaping and the read of the output. */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "calldir.h"
#include "config.h"
#include "containment.h"
#include "reaper.h"
#include "registry.h"
#include "worker.h"

static char tools_dir[PATH_MAX], work_dir[PATH_MAX];
static struct td_registry *reg;
static uv_loop_t loop;

struct call {
    int calls;      /* times the callback ran */
    json_t *result; /* the last result */
    bool had_ru;
};

static void on_result(void *data, json_t *result, const struct td_call_facts *f)
{
    struct call *c = data;
    c->calls++;
    json_decref(c->result);
    c->result = result;
    c->had_ru = f && f->ru != NULL;
}

static void put_tool(const char *name, const char *json)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s.json", tools_dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(json, f) < 0 || fclose(f) != 0 || chmod(path, 0644) < 0)
        abort();
}

static int setup(void **state)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tools_dir, sizeof(tools_dir), "%s/td-worker-tools-XXXXXX", tmp);
    snprintf(work_dir, sizeof(work_dir), "%s/td-worker-work-XXXXXX", tmp);
    if (!mkdtemp(tools_dir) || !mkdtemp(work_dir) || chmod(tools_dir, 0755) < 0 ||
        chmod(work_dir, 0711) < 0)
        return -1;
    put_tool("true", "{\"name\":\"true\",\"protocol\":\"plain\",\"command\":[\"/bin/true\"]}");
    put_tool("sleep", "{\"name\":\"sleep\",\"protocol\":\"plain\",\"command\":[\"/bin/sleep\","
                      "\"60\"]}");
    /* framed: answers, then lingers until the daemon kills it */
    put_tool("answer",
             "{\"name\":\"answer\",\"command\":[\"/bin/sh\",\"-c\",\"printf "
             "'\\\\000\\\\000\\\\000\\\\013{\\\"ok\\\":\\\"hi\\\"}'; exec /bin/sleep 60\"]}");
    put_tool("missing", "{\"name\":\"missing\",\"protocol\":\"plain\",\"command\":["
                        "\"/nonexistent/tool\"]}");
    char err[512];
    if (td_registry_load(tools_dir, &reg, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    /* as main() does: a worker gone before its request is written is a
     * failed write, not a dead daemon */
    signal(SIGPIPE, SIG_IGN);
    if (td_calldir_setup(work_dir) < 0) /* sets td_cfg.work_dir */
        return -1;
    td_cfg.max_frame = TE_FRAME_MAX_DEFAULT;
    td_cfg.max_content = TE_FRAME_MAX_DEFAULT;
    td_cfg.network = 1;
    if (td_containment_setup("pgroup") < 0)
        return -1;
    td_worker_setup();
    uv_loop_init(&loop);
    td_loop = &loop;
    return td_reaper_start() < 0 ? -1 : 0;
}

/* Remove the tree at path (absolute): td_remove_tree_at() takes a directory
 * descriptor, the parent's, and the name in it. */
static int remove_path(const char *path)
{
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", path);
    char *slash = strrchr(parent, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    int fd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = td_remove_tree_at(fd, slash + 1);
    close(fd);
    return rc;
}

static int teardown(void **state)
{
    td_reaper_stop();
    uv_run(&loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(&loop); /* every handle closed: nothing left behind */
    td_registry_free(reg);
    td_calldir_shutdown();
    if (remove_path(tools_dir) < 0 || remove_path(work_dir) < 0)
        return -1;
    return rc;
}

static struct td_worker *start(const char *tool, struct call *c)
{
    json_t *req = json_pack("{s:s,s:{}}", "tool", tool, "arguments");
    struct td_worker_spec spec = {.tool = td_registry_find(reg, tool),
                                  .batch_id = "b",
                                  .call_id = "c",
                                  .request = req,
                                  .timeout_ms = 30000};
    assert_non_null(spec.tool);
    json_t *result = NULL;
    struct td_worker *w = td_worker_start(&spec, on_result, c, &result);
    json_decref(req);
    assert_non_null(w);
    assert_null(result);
    assert_int_equal(c->calls, 0); /* never from inside the start */
    return w;
}

/* Run the loop until the call's callback ran and every worker is gone. */
static void run_out(struct call *c)
{
    while (c->calls == 0 || td_workers_alive() > 0)
        uv_run(&loop, UV_RUN_ONCE);
    /* and a little more: a second callback would come now */
    for (int i = 0; i < 8; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
}

static void test_exit(void **state)
{
    struct call c = {0};
    start("true", &c);
    run_out(&c);
    assert_int_equal(c.calls, 1);
    assert_int_equal(te_result_kind_of(c.result), TE_RESULT_OK);
    assert_true(c.had_ru);
    json_decref(c.result);
}

/* The exec fails in the child: one callback, a handler_exit naming it. */
static void test_exec_failure(void **state)
{
    struct call c = {0};
    start("missing", &c);
    run_out(&c);
    assert_int_equal(c.calls, 1);
    assert_int_equal(te_result_kind_of(c.result), TE_RESULT_TOOL_ERROR);
    const char *msg =
        json_string_value(json_object_get(json_object_get(c.result, "tool_error"), "message"));
    assert_non_null(strstr(msg, "could not execute /nonexistent/tool"));
    json_decref(c.result);
}

static void test_cancel_running(void **state)
{
    struct call c = {0};
    struct td_worker *w = start("sleep", &c);
    uv_run(&loop, UV_RUN_NOWAIT);
    td_worker_cancel(w);
    assert_int_equal(c.calls, 1); /* a cancel completes at once */
    json_t *cause = json_object_get(json_object_get(c.result, "tool_error"), "cause");
    assert_true(json_is_true(json_object_get(cause, "cancelled")));
    run_out(&c);
    assert_int_equal(c.calls, 1); /* not again when it is reaped */
    json_decref(c.result);
}

/* A cancel after k turns of the loop, k = 0, 1, 2, ... until the call has
 * ended by itself first: whichever wins, one callback. */
static void test_cancel_races_exit(void **state)
{
    int won_by_exit = 0;
    for (int k = 0; k < 200 && won_by_exit < 3; k++) {
        struct call c = {0};
        struct td_worker *w = start("true", &c);
        for (int i = 0; i < k && c.calls == 0; i++)
            uv_run(&loop, UV_RUN_ONCE);
        if (c.calls == 0)
            td_worker_cancel(w);
        else
            won_by_exit++;
        run_out(&c);
        assert_int_equal(c.calls, 1);
        json_decref(c.result);
    }
    assert_true(won_by_exit > 0);
}

/* The same with a framed worker that answers and lingers: its result is
 * known before it is reaped (and is held until then, for its resource use),
 * so a cancel may also come while the answer waits for the reaping. */
static void test_cancel_races_answer(void **state)
{
    int won_by_answer = 0, held = 0;
    for (int k = 0; k < 400 && won_by_answer < 3; k++) {
        struct call c = {0};
        struct td_worker *w = start("answer", &c);
        for (int i = 0; i < k && c.calls == 0; i++)
            uv_run(&loop, UV_RUN_ONCE);
        bool cancelled = c.calls == 0;
        if (cancelled)
            td_worker_cancel(w);
        else
            won_by_answer++;
        run_out(&c);
        assert_int_equal(c.calls, 1);
        if (cancelled && te_result_kind_of(c.result) == TE_RESULT_OK)
            held++; /* the cancel came while the answer waited */
        json_decref(c.result);
    }
    print_message("cancel while the answer waited for the reaping: %d times\n", held);
}

/* Abandoned (its owner is going away): the callback never runs, and the
 * worker is still killed and reaped. */
static void test_abandon(void **state)
{
    struct call c = {0};
    struct td_worker *w = start("sleep", &c);
    uv_run(&loop, UV_RUN_NOWAIT);
    td_worker_abandon(w);
    while (td_workers_alive() > 0)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(c.calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit),
        cmocka_unit_test(test_exec_failure),
        cmocka_unit_test(test_cancel_running),
        cmocka_unit_test(test_cancel_races_exit),
        cmocka_unit_test(test_cancel_races_answer),
        cmocka_unit_test(test_abandon),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
