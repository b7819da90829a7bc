#!/usr/bin/env python3
"""call_info - report what a worker sees of its call (a "context": true tool).

Arguments: any object.
Result:    {"ok": {"tool", "arguments", "opts", "environment", "cwd", "pid",
                   "pgid"}}

Because its definition says "context": true, the request frame carries
"opts" (the batch's context, session_id, request_id and engine, and this
call's tool_call), which the SDK passes to the handler as its second
argument, a toolexec.worker.Context (a dict). The rest shows the isolation
the daemon sets up: the clean environment, the private working directory
and the worker's own process group.
"""

import os

from toolexec.worker import serve, tool


@tool
def call_info(arguments, context):
    return {
        "tool": os.environ.get("TOOLEXEC_TOOL"),
        "arguments": arguments,
        "opts": context,  # a Context: the request's "opts"
        "environment": dict(os.environ),
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
    }


if __name__ == "__main__":
    serve()
