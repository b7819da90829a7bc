/*
 * outcome.h - a call's outcome in one word, as metrics and the audit trail
 * name it: ok, error (the tool's handler error), ask_user, halt, or
 * tool_error with its reason (timeout, crashed, ...).
 */
#ifndef TD_OUTCOME_H
#define TD_OUTCOME_H

#include <jansson.h>

/* The outcome of a final result; *reason: the tool_error reason, or NULL
 * for every other outcome. */
const char *td_outcome_of(const json_t *result, const char **reason);

#endif
