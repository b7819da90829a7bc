/*
 * besteffort.h - failing closed: a definition that asks for a
 * confinement layer this host cannot give is refused at load and by
 * --check --tools, unless its "best_effort" names that layer.
 */
#ifndef TD_BESTEFFORT_H
#define TD_BESTEFFORT_H

#include <stddef.h>

#include <jansson.h>

struct td_tool;

/* t's "best_effort" (in def) and the layers it asks for (t->wants,
 * t->best_effort: TD_LAYER_* bits); 0, or -EINVAL with err naming file
 * and key: a bad "best_effort", or a layer asked for and missing. */
int td_besteffort_parse(const char *file, const json_t *def, struct td_tool *t, char *err,
                        size_t errlen);
/* The TD_LAYER_* bits this host (and --disable-layer) gives calls. */
unsigned td_besteffort_available(void);

#endif
