/*
 * policy.h - on_tool_error routing: what a call's result means under its
 * batch's policy. No libuv, no I/O: tested in daemon/unit/test_policy.c.
 */
#ifndef TD_POLICY_H
#define TD_POLICY_H

#include <stdbool.h>

#include <jansson.h>

#include "toolexec.h"

enum td_route {
    TD_ROUTE_CONTINUE, /* the result is the call's content */
    TD_ROUTE_HALT,     /* an error that halts the batch */
    TD_ROUTE_ASK,      /* the batch's client decides (on_tool_error "ask") */
    TD_ROUTE_REPLACE,  /* {"continue_with": v}: *with is v, the call's ok value */
};

/* A result's route under policy (policy_map for TE_POLICY_MAP); a cancelled
 * batch asks no one. *with borrows from policy_map. */
enum td_route td_policy_route(te_error_policy policy, const json_t *policy_map, bool cancelled,
                              const json_t *result, const json_t **with);
/* One decision's route: "continue", {"continue_with": v} (*with is v, borrowed
 * from decision); anything else halts. */
enum td_route td_policy_decision(const json_t *decision, const json_t **with);

#endif
