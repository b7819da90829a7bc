/*
 * json_numbers.c - parse + dump speed of the daemon's messages: jansson as
 * it was (json_loadb + json_dumps), jansson through te_json_loadb +
 * te_json_dumps (numbers kept as written), and json-c (Debian's other
 * well-kept C JSON library, which keeps a parsed real's source text), to
 * decide how numbers pass through as their tools wrote them.
 *
 *   json_numbers [ROUNDS]
 *
 *   json_numbers [ROUNDS]  and  json_numbers_jsonc [ROUNDS]
 *
 * Each round parses and re-serialises every message of json_messages.h
 * once; each prints microseconds per message. Run by hand, never as a test.
 * json-c is a separate binary: its names clash with jansson's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "toolexec.h"
#include "json_messages.h"

static size_t sink;

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 100000;
    double t0 = now();
    size_t refused = 0;
    for (long r = 0; r < rounds; r++)
        for (size_t i = 0; i < NMSG; i++) {
            json_t *v = json_loadb(messages[i], strlen(messages[i]), 0, NULL);
            if (!v) {
                refused++;
                continue;
            }
            char *s = json_dumps(v, JSON_COMPACT);
            sink += strlen(s);
            free(s);
            json_decref(v);
        }
    double t1 = now();
    for (long r = 0; r < rounds; r++)
        for (size_t i = 0; i < NMSG; i++) {
            json_t *v = te_json_loadb(messages[i], strlen(messages[i]), 0, NULL);
            size_t len;
            char *s = te_json_dumps(v, 0, &len);
            sink += len;
            free(s);
            json_decref(v);
        }
    double t2 = now();
    double per = 1e6 / ((double)rounds * NMSG);
    printf("jansson json_loadb+json_dumps:      %.2f us/message (%zu of %zu messages refused)\n",
           (t1 - t0) * per, refused / (size_t)rounds, NMSG);
    printf("jansson te_json_loadb+te_json_dumps: %.2f us/message\n", (t2 - t1) * per);
    return sink == 0;
}
