/*
 * tiny_client - a client of an installed toolexecd, built against the
 * installed toolexec.h and libtoolexec.pc (tests/install/run.sh).
 *
 *   tiny_client SOCKET                  prints "tools: N"
 *   tiny_client SOCKET TOOL ARGS-JSON   also runs one call of TOOL and prints
 *                                       "ok: CONTENT" (exit 0) or
 *                                       "not ok: RESULT" (exit 1)
 *
 * Exit status 2: the daemon could not be reached or answered nonsense.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <toolexec.h>

/* The next event named `name` (skipping others); NULL at end of stream. */
static json_t *expect(te_client *c, const char *name)
{
    json_t *ev;
    while (te_client_recv(c, &ev) == 0) {
        const char *e = json_string_value(json_object_get(ev, "event"));
        if (e && (strcmp(e, name) == 0 || strcmp(e, "error") == 0))
            return ev;
        json_decref(ev);
    }
    return NULL;
}

static int run_one(te_client *c, const char *tool, const char *args_text)
{
    json_error_t jerr;
    json_t *args = json_loads(args_text, 0, &jerr);
    if (!json_is_object(args)) {
        fprintf(stderr, "tiny_client: ARGS-JSON: not a JSON object\n");
        json_decref(args);
        return 2;
    }
    json_t *req = json_pack("{s:s,s:s,s:[{s:s,s:s,s:o}]}", "op", "run", "batch", "t", "calls", "id",
                            "c0", "name", tool, "arguments", args);
    int rc = req ? te_client_send(c, req) : -1;
    json_decref(req);
    json_t *done = NULL, *result = NULL, *ev;
    /* the call's result, then the batch's end */
    while (rc == 0 && te_client_recv(c, &ev) == 0) {
        const char *e = json_string_value(json_object_get(ev, "event"));
        if (e && strcmp(e, "tool_execution_completed") == 0) {
            json_decref(result);
            result = json_incref(json_object_get(ev, "result"));
        }
        if (e && (strcmp(e, "batch_completed") == 0 || strcmp(e, "error") == 0)) {
            done = ev;
            break;
        }
        json_decref(ev);
    }
    if (!done) {
        fprintf(stderr, "tiny_client: no batch_completed\n");
        json_decref(result);
        return 2;
    }
    int status = 1;
    const char *content = json_string_value(
        json_object_get(json_array_get(json_object_get(done, "messages"), 0), "content"));
    if (result && json_object_get(result, "ok") && content) {
        printf("ok: %s\n", content);
        status = 0;
    } else {
        char *text = json_dumps(result ? result : done, JSON_COMPACT);
        printf("not ok: %s\n", text ? text : "?");
        free(text);
    }
    json_decref(result);
    json_decref(done);
    return status;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: tiny_client SOCKET [TOOL ARGS-JSON]\n");
        return 2;
    }
    te_client *c;
    int rc = te_client_connect(argv[1], &c);
    if (rc < 0) {
        fprintf(stderr, "tiny_client: %s: %s\n", argv[1], strerror(-rc));
        return 2;
    }
    json_t *req = json_pack("{s:s}", "op", "tools");
    rc = te_client_send(c, req);
    json_decref(req);
    json_t *ev = rc == 0 ? expect(c, "tools") : NULL;
    json_t *tools = json_object_get(ev, "tools");
    if (!json_is_array(tools)) {
        fprintf(stderr, "tiny_client: no tools event\n");
        json_decref(ev);
        te_client_close(c);
        return 2;
    }
    printf("tools: %zu\n", json_array_size(tools));
    json_decref(ev);
    int status = argc == 4 ? run_one(c, argv[2], argv[3]) : 0;
    te_client_close(c);
    return status;
}
