/*
 * warmdef.c - the tool definition keys of warm start, "start" and
 * "max_forks" (the rest of warm start is template.c; this part is apart so
 * that the registry needs nothing of the running side).
 */
#include <stdio.h>
#include <string.h>

#include "warmdef.h"
#include "toolexec.h"

#define MAX_FORKS_DEFAULT 1000

int td_warmdef_parse(const char *file, const json_t *def, bool framed_command, struct td_warmdef *t,
                     char *err, size_t errlen)
{
    const json_t *v = json_object_get(def, "start");
    const char *s = te_json_text_value(v);
    if (v && (!s || (strcmp(s, "cold") && strcmp(s, "warm")))) {
        snprintf(err, errlen, "%s: start: expected \"cold\" or \"warm\"", file);
        return -1;
    }
    t->warm = s && strcmp(s, "warm") == 0;
    v = json_object_get(def, "max_forks");
    if (v &&
        (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1000000000)) {
        snprintf(err, errlen, "%s: max_forks: expected an integer from 1 to 1000000000", file);
        return -1;
    }
    if (v && !t->warm) {
        snprintf(err, errlen, "%s: max_forks: only for a tool with \"start\": \"warm\"", file);
        return -1;
    }
    t->max_forks = v ? (unsigned)json_integer_value(v) : MAX_FORKS_DEFAULT;
    if (t->warm && !framed_command) {
        snprintf(err, errlen, "%s: start: \"warm\" needs a command speaking the framed protocol",
                 file);
        return -1;
    }
    return 0;
}
