/*
 * outcome.c - a call's outcome in one word (outcome.h).
 */
#include "outcome.h"
#include "toolexec.h"

const char *td_outcome_of(const json_t *result, const char **reason)
{
    *reason = NULL;
    switch (te_result_kind_of(result)) {
    case TE_RESULT_OK:
        return "ok";
    case TE_RESULT_ERROR:
        return "error";
    case TE_RESULT_ASK_USER:
        return "ask_user";
    case TE_RESULT_HALT:
        return "halt";
    case TE_RESULT_TOOL_ERROR: {
        const char *r =
            json_string_value(json_object_get(json_object_get(result, "tool_error"), "reason"));
        *reason = te_reason_parse(r) >= 0 ? r : "unknown";
        return "tool_error";
    }
    default:
        return "unknown";
    }
}
