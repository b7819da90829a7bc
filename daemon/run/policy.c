/*
 * policy.c - on_tool_error routing (see policy.h).
 */
#include "policy.h"

enum td_route td_policy_decision(const json_t *decision, const json_t **with)
{
    switch (te_decision_check(decision)) {
    case TE_DECIDE_CONTINUE:
        return TD_ROUTE_CONTINUE;
    case TE_DECIDE_CONTINUE_WITH:
        /* the replacement is the call's content, exactly like an ok value */
        *with = json_object_get(decision, "continue_with");
        return TD_ROUTE_REPLACE;
    default:
        return TD_ROUTE_HALT;
    }
}

enum td_route td_policy_route(te_error_policy policy, const json_t *policy_map, bool cancelled,
                              const json_t *result, const json_t **with)
{
    int kind = te_result_kind_of(result);
    bool error = kind == TE_RESULT_ERROR || kind == TE_RESULT_TOOL_ERROR;
    if (!error || policy == TE_POLICY_CONTINUE)
        return TD_ROUTE_CONTINUE;
    if (policy == TE_POLICY_HALT)
        return TD_ROUTE_HALT;
    if (policy == TE_POLICY_ASK && !cancelled)
        return TD_ROUTE_ASK;
    /* per reason: "handler_error" for an error of the handler's own */
    const char *key =
        kind == TE_RESULT_ERROR
            ? "handler_error"
            : json_string_value(json_object_get(json_object_get(result, "tool_error"), "reason"));
    const json_t *d = policy_map ? json_object_get(policy_map, key) : NULL;
    if (!d && policy_map)
        d = json_object_get(policy_map, "default");
    if (!d)
        return TD_ROUTE_CONTINUE;
    return td_policy_decision(d, with);
}
