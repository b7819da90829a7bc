#!/usr/bin/env python3
"""submit_plan - end the agent's turn with a plan (a handler halt).

Arguments: {"plan": string}
Result:    {"halt": "plan_submitted", "result": {"plan": plan}}

A halt stops the agent loop after this batch: the batch's "halt" names
"plan_submitted" and carries the result. Sibling calls of the same batch
still run to completion. Halt reasons used by the engine itself (ask_user,
max_turns, halt_when, tool_error, cancelled, completed) are reserved; a tool
returning one of them gets an invalid_return error instead.
"""

from toolexec.worker import error, halt, serve, tool


@tool
def submit_plan(arguments):
    unknown = sorted(set(arguments) - {"plan"})
    if unknown:
        return error("unknown argument %r" % unknown[0])
    plan = arguments.get("plan")
    if not isinstance(plan, str) or not plan.strip():
        return error("argument 'plan' must be a non-empty string")
    return halt("plan_submitted", {"plan": plan})


if __name__ == "__main__":
    serve()
