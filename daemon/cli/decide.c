/*
 * decide.c - on_tool_error "ask": the daemon holds a failed call and asks
 * the batch's client what to do (continue, halt, or continue with a value)
 * while the call's timeout runs. toolexec asks the person at the terminal.
 *
 * The question goes to /dev/tty, not stdin: stdin may be the batch itself.
 * Without a terminal nobody can answer, so nothing is sent and the daemon's
 * timeout decides (the call becomes a tool error that halts the batch).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* How often a wrong answer is asked again before giving up. */
#define CLI_DECIDE_TRIES 3

/* The failure in a few words: its message, or the handler's error value. */
static char *describe_error(const json_t *err)
{
    json_t *te = json_object_get(err, "tool_error");
    const char *msg = json_string_value(json_object_get(te, "message"));
    if (msg)
        return cli_text_clean(msg);
    char *dump = te_json_dumps(json_object_get(err, "error"), JSON_ENCODE_ANY, NULL);
    char *clean = cli_text_clean(dump ? dump : "error");
    free(dump);
    return clean;
}

/* "c", "continue", "h", "halt", "" (halt) or a JSON value to continue with.
 * NULL when the answer is none of these. */
static json_t *parse_answer(char *line)
{
    line[strcspn(line, "\r\n")] = '\0';
    if (!*line || strcmp(line, "h") == 0 || strcmp(line, "halt") == 0)
        return json_string("halt");
    if (strcmp(line, "c") == 0 || strcmp(line, "continue") == 0)
        return json_string("continue");
    json_t *v = te_json_loads(line, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    return v ? json_pack("{s:o}", "continue_with", v) : NULL;
}

/* Ask on tty; NULL when the user did not answer (end of file, Ctrl-C). */
static json_t *ask_user(FILE *tty, const char *id, const char *name, const char *what)
{
    fprintf(tty, "toolexec: call %s (%s) failed: %s\n", id, name, what);
    for (int i = 0; i < CLI_DECIDE_TRIES; i++) {
        fputs("  [c]ontinue, [h]alt (the default), or a JSON value to continue with: ", tty);
        fflush(tty);
        char line[4096];
        if (!fgets(line, sizeof(line), tty))
            return NULL;
        json_t *d = parse_answer(line);
        if (d)
            return d;
        fputs("  not c, h, or valid JSON\n", tty);
    }
    return NULL;
}

void cli_decide(const struct cli *cli, te_client *c, const char *batch, const json_t *ev,
                const char *tool, bool ask)
{
    const char *id = json_string_value(json_object_get(ev, "id"));
    FILE *tty = ask && id ? fopen("/dev/tty", "r+e") : NULL;
    if (!tty) {
        if (ask)
            cli_err("call %s needs a decision about its error and there is no terminal to ask; "
                    "its timeout will decide",
                    id ? id : "?");
        return;
    }
    cli_clear_progress();
    char *what = describe_error(json_object_get(ev, "error"));
    char *cid = cli_text_clean(id);
    char *name = cli_text_clean(tool ? tool : "?");
    json_t *decision = what && cid && name ? ask_user(tty, cid, name, what) : NULL;
    fclose(tty);
    free(what);
    free(cid);
    free(name);
    if (!decision)
        return;
    json_t *req = json_pack("{s:s,s:s,s:s,s:o}", "op", "decide", "batch", batch, "id", id,
                            "decision", decision);
    if (req)
        cli_send(cli, c, req);
    json_decref(req);
}
