"""toolexec.mcpwarm - an MCP server written in Python, kept warm.

    python3 -m toolexec.mcpwarm BRIDGE server NAME -- MODULE [ARGS...]
    python3 -m toolexec.mcpwarm BRIDGE call TOOL -- MODULE [ARGS...]

The daemon runs this (its first form) as the command of each tool of an
"mcp_server" definition named NAME with "python_module" and "start": "warm"
(toolexecd.tools(5)); you do not run it yourself. Each call's request frame
names its tool, NAME.TOOL, and the server is called TOOL; so every tool of
the server has the same command and one template, the server's, serves them
all. (The second form calls TOOL whatever the frame says.) As any warm tool
(proto/PROTOCOL.md, "Warm start") it is a template: it imports MODULE once,
and with it everything MODULE imports (for a server on the `mcp` package:
pydantic, anyio, starlette, httpx... the bulk of a Python server's start),
then forks on the daemon's request. Each call is a fresh fork, PID 2 of a
PID, user and mount namespace of its own, set up by the SDK exactly as for
a warm tool of toolexec.worker. There it forks once more: the child is the
server, the module run as `python -m MODULE ARGS...` would run it (runpy,
as __main__) with its stdin and stdout on pipes; the call's process then
execs the bridge (toolexec-mcp-bridge, BRIDGE) attached to that child,
which speaks MCP to it and answers the call as a cold call's bridge does.
Nothing of one call reaches the next: each starts from the template as it
was after the import, and all its processes die with its namespace.

Where no template is ready the daemon runs the same command cold: the first
frame is then the call's request, and the rest is the same (MODULE imported
by this process instead of a template). Either way the request is read here
(its tool) and the bridge gets it in a memfd.
"""

import importlib
import io
import json
import os
import runpy
import sys

from . import worker


def _preload():
    """What a server imports only as it starts serving, the same for most:
    its arguments' parser, and the event loop of anyio, on which the `mcp`
    package runs (imported at its first use). Loaded here, once, so that
    no call pays for it; a module missing is the server's to find."""
    names = ["argparse", "asyncio"]
    if "anyio" in sys.modules:
        names.append("anyio._backends._asyncio")
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _usage():
    sys.stderr.write("usage: python3 -m toolexec.mcpwarm BRIDGE server NAME -- MODULE [ARGS...]\n"
                     "       python3 -m toolexec.mcpwarm BRIDGE call TOOL -- MODULE [ARGS...]\n"
                     "The command of a warm Python MCP server's tools (toolexecd.tools(5)).\n")
    raise SystemExit(2)


def _tool_of(body, server):
    """The server's tool the request frame body names ("tool": NAME.TOOL,
    NAME the server's), for the bridge's `call TOOL`."""
    try:
        name = json.loads(body.decode("utf-8")).get("tool")
    except (ValueError, AttributeError):
        name = None
    prefix = server + "."
    if not isinstance(name, str) or not name.startswith(prefix) or len(name) == len(prefix):
        sys.stderr.write("toolexec.mcpwarm: the request names no tool of server %s: %r\n"
                         % (server, name))
        raise SystemExit(2)
    return name[len(prefix):]


def _fresh_stdio():
    """sys.stdin, sys.stdout and sys.stderr made anew on descriptors 0, 1
    and 2 as the interpreter makes them at its start (CPython's
    create_stdio, POSIX): those of this process were made for the
    template's own descriptors (a socket, the daemon's pipe, or a file run
    cold) and keep what they learnt of them, such as a file's position,
    which a server's TextIOWrapper(sys.stdout.buffer) would seek to on a
    pipe."""
    # -u or PYTHONUNBUFFERED, which sys.flags does not show: stdout's
    unbuffered = bool(getattr(sys.stdout, "write_through", False))
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        raw = io.open(fd, "rb" if fd == 0 else "wb", buffering=0 if unbuffered and fd else -1,
                      closefd=False)
        tty = os.isatty(fd)
        new = io.TextIOWrapper(raw, encoding=getattr(old, "encoding", None),
                               errors="backslashreplace" if fd == 2 else
                               getattr(old, "errors", None),
                               newline="\n", line_buffering=not unbuffered and (tty or fd == 2),
                               write_through=unbuffered and fd != 0)
        setattr(sys, name, new)
        setattr(sys, "__%s__" % name, new)


def _start_server(module, args):
    """Fork the server, MODULE run as __main__ with its stdin and stdout on
    pipes; (its pid, the write end of its stdin, the read end of its
    stdout), both ends ours to pass to the bridge."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        for fd in (in_r, in_w, out_r, out_w):
            os.close(fd)
        _fresh_stdio()
        sys.argv = [module] + list(args)
        # as `python -m MODULE`: a package runs its __main__; what it
        # raises ends this process as it would end that one
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        raise SystemExit(0)
    os.close(in_r)
    os.close(out_w)
    os.set_inheritable(in_w, True)
    os.set_inheritable(out_r, True)
    return pid, in_w, out_r


def _request_on_stdin(body):
    """The call's request frame, already read, put back on stdin for the
    bridge (a memfd: a pipe could not hold a large one unread)."""
    fd = os.memfd_create("toolexec-request")
    worker._write_all(fd, worker._HEADER.pack(len(body)) + body)
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        _usage()
    sep = argv.index("--")
    head, tail = argv[:sep], argv[sep + 1:]
    if len(head) != 3 or head[1] not in ("call", "server") or not head[2] or not tail:
        _usage()
    bridge, module, args = head[0], tail[0], tail[1:]
    # the cost this saves: a package's __init__ and all it imports (not its
    # __main__, which would run the server here)
    importlib.import_module(module)
    _preload()
    body = worker.read_frame(0)
    try:
        first = json.loads(body.decode("utf-8"))
    except ValueError:
        first = None
    if isinstance(first, dict) and isinstance(first.get("template"), dict):
        # returns in each call's process, its descriptors 0-2 the call's:
        # the call's request is read here (its tool), then handed on
        worker._warm_template(first["template"])
        body = worker.read_frame(0)
    tool = head[2] if head[1] == "call" else _tool_of(body, head[2])
    _request_on_stdin(body)
    pid, server_in, server_out = _start_server(module, args)
    os.execv(bridge, [bridge, "attach", str(pid), str(server_in), str(server_out), "call", tool,
                      "--"])


if __name__ == "__main__":
    main()
