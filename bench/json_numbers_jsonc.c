/* json_numbers_jsonc.c - json-c's side of bench/json_numbers.c (see there). */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_messages.h"

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 100000;
    size_t sink = 0;
    double t0 = now();
    for (long r = 0; r < rounds; r++)
        for (size_t i = 0; i < NMSG; i++) {
            json_object *o = json_tokener_parse(messages[i]);
            const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
            sink += strlen(s);
            json_object_put(o);
        }
    double t1 = now();
    printf("json-c tokener_parse+to_json_string: %.2f us/message\n",
           (t1 - t0) * 1e6 / ((double)rounds * NMSG));
    /* what json-c writes back for the numbers */
    for (size_t i = 1; i < NMSG; i += 2) {
        json_object *o = json_tokener_parse(messages[i]);
        printf("json-c writes back: %s\n",
               json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    }
    return sink == 0;
}
