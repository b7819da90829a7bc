#!/usr/bin/env python3
"""call_info - report what a worker sees of its call (a "context": true tool).

Arguments: any object.
Result:    {"ok": {"tool", "arguments", "opts", "environment", "cwd", "pid",
                   "pgid"}}

Because its definition says "context": true, the request frame carries
"opts" (the batch's context, session_id, request_id and engine, and this
call's tool_call) and the helper calls handler(arguments, opts). The rest
shows the isolation the daemon sets up: the clean environment, the private
working directory and the worker's own process group.
"""

import os

from toolexec_worker import ok, run


def handler(arguments, opts):
    return ok({
        "tool": os.environ.get("TOOLEXEC_TOOL"),
        "arguments": arguments,
        "opts": opts,
        "environment": dict(os.environ),
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
    })


if __name__ == "__main__":
    run(handler)
