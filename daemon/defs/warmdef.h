/*
 * warmdef.h - the tool definition keys of warm start, "start" and
 * "max_forks" (registry.c parses definitions with it; the running side is
 * template.c).
 */
#ifndef TD_WARMDEF_H
#define TD_WARMDEF_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct td_warmdef {
    bool warm;          /* "start": "warm" */
    unsigned max_forks; /* calls one template serves */
};

/* def: the definition object of file; framed_command: the tool has a
 * command speaking the framed protocol (what warm start needs). 0, or -1
 * with err naming file and key. */
int td_warmdef_parse(const char *file, const json_t *def, bool framed_command,
                     struct td_warmdef *out, char *err, size_t errlen);

#endif
