#!/usr/bin/env python3
"""An MCP server (stdio, 2025-11-25) of our own, normal and hostile by turns,
for the tests of "mcp_server" definitions (tests/integration/test_mcp_server.py).

With argument "hang" it never answers the handshake; with "modern" it
speaks only the stateless revision 2026-07-28 (initialize refused,
server/discover, each request's _meta naming the version); its tools
exercise what a confined server's call must survive: isError, structured
results, progress, a crash mid-call, a flood of output, a daemonised child
left behind, a fork bomb, reads and writes of any path it is given, an
image and embedded resources, whether a variable is in its environment.

With an argument "state=DIR" its tools can change: DIR/added (one tool name
a line) holds the tools added since, each listing is a line appended to
DIR/lists (the test counts them), and it has two tools more: add_tool adds
one and says so (notifications/tools/list_changed), changed says so a
number of times without changing anything. With "listnote" too, each
listing says so before it answers; while DIR/broken exists, a listing
fails (a JSON-RPC error). The files must exist, writable by the
calls' users (the test makes them).

With an argument "cancels=FILE" it has one tool more, linger, which never
answers but leaves the server reading (its call is a line "linger
REQUESTID" appended to FILE), and each notifications/cancelled it
reads a line "REQUESTID REASON" (which must exist,
writable by the calls' users), and a ping after it is answered; a call of
hang is a line "hang REQUESTID" there before it sleeps (and reads no
more)."""
import hashlib
import json
import os
import sys
import time

MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"

TOOLS = [
    {"name": "echo", "description": "Echo the text", "title": "Echo",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "add", "description": "Add two numbers",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "number"},
                                                       "b": {"type": "number"}}},
     "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}},
                      "required": ["sum"]}},
    {"name": "fail", "description": "Fail as a tool does",
     "inputSchema": {"type": "object"}},
    {"name": "progress", "description": "Report progress three times",
     "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "Exit in the middle of the call",
     "inputSchema": {"type": "object"}},
    {"name": "flood", "description": "Write without end",
     "inputSchema": {"type": "object"}},
    {"name": "daemon", "description": "Leave a daemonised child running",
     "inputSchema": {"type": "object", "properties": {"mark": {"type": "string"}}}},
    {"name": "read", "description": "Read a file",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "write", "description": "Write a file",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"},
                                                       "text": {"type": "string"}}}},
    {"name": "hang", "description": "Never answer",
     "inputSchema": {"type": "object"}},
    {"name": "env", "description": "One environment variable",
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
    {"name": "forkbomb", "description": "Fork until refused",
     "inputSchema": {"type": "object"}},
    {"name": "image", "description": "An image, an embedded resource and a link",
     "inputSchema": {"type": "object"}},
    {"name": "has_env", "description": "Whether a variable is set, and its digest",
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
]

STATE = next((a[6:] for a in sys.argv[1:] if a.startswith("state=")), None)
STATE_TOOLS = [
    {"name": "add_tool", "description": "Add a tool, and say the tools changed",
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                     "required": ["name"]}},
    {"name": "changed", "description": "Say the tools changed, a number of times",
     "inputSchema": {"type": "object", "properties": {"times": {"type": "integer"}}}},
]
LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
CANCELS = next((a[8:] for a in sys.argv[1:] if a.startswith("cancels=")), None)
LINGER = {"name": "linger", "description": "Never answer, but go on reading",
          "inputSchema": {"type": "object"}}


def added():
    with open(os.path.join(STATE, "added")) as f:
        return [n for n in f.read().split("\n") if n]


def append(name, line):
    with open(os.path.join(STATE, name), "a") as f:
        f.write(line + "\n")


def listed():
    if CANCELS:
        return TOOLS + [LINGER]
    if not STATE:
        return TOOLS
    append("lists", str(os.getpid()))
    if "listnote" in sys.argv[1:]:
        send(LIST_CHANGED)
    if os.path.exists(os.path.join(STATE, "broken")):
        return None
    return TOOLS + STATE_TOOLS + [{"name": n, "description": "Added by add_tool",
                                   "inputSchema": {"type": "object"}} for n in added()]


# a tiny PNG (1x1, transparent) and what the image tool returns with it
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg==")
IMAGE = {"content": [
    {"type": "text", "text": "a picture:"},
    {"type": "image", "data": PNG, "mimeType": "image/png"},
    {"type": "resource", "resource": {"uri": "odd://notes/1", "mimeType": "text/plain",
                                      "text": "an embedded note"}},
    {"type": "resource", "resource": {"uri": "odd://blobs/1",
                                      "mimeType": "application/octet-stream",
                                      "blob": "AAECAw=="}},
    {"type": "resource_link", "uri": "odd://notes/2", "name": "note 2",
     "mimeType": "text/plain"},
], "structuredContent": {"pictures": 1}}

# a fork bomb that stops on its own at this many children should the
# limit not hold, so that a failing test does not take the machine
BOMB_CAP = 512


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def text(t, error=False):
    return {"content": [{"type": "text", "text": t}], "isError": error}


def call(name, args, token):
    if name == "echo":
        return text(args["text"])
    if name == "add":
        s = args.get("a", 0) + args.get("b", 0)
        return {"content": [{"type": "text", "text": json.dumps({"sum": s})}],
                "structuredContent": {"sum": s}}
    if name == "fail":
        return text("it failed on purpose", error=True)
    if name == "progress":
        for i in range(3):
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": i + 1, "total": 3,
                             "message": "step %d" % (i + 1)}})
        return text("done")
    if name == "crash":
        sys.stderr.write("odd_server: crashing now\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "flood":
        chunk = "x" * (1 << 20)
        while True:
            sys.stdout.write(chunk)
    if name == "daemon":
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                # out of our process group and session: only the call's
                # PID namespace or cgroup can find it
                os.execvp("sleep", ["sleep", "1000", args.get("mark", "")])
            os._exit(0)
        os.wait()
        return text("left a child")
    if name == "read":
        try:
            with open(args["path"]) as f:
                return text(f.read())
        except OSError as e:
            return text("read %s: %s" % (args["path"], e), error=True)
    if name == "write":
        try:
            with open(args["path"], "w") as f:
                f.write(args["text"])
            return text("written")
        except OSError as e:
            return text("write %s: %s" % (args["path"], e), error=True)
    if name == "hang":
        time.sleep(100000)
    if name == "env":
        return text(os.environ.get(args["name"], "(unset)"))
    if name == "image":
        return IMAGE
    if name == "has_env":
        # said without the value itself: a digest the test compares
        v = os.environ.get(args["name"])
        out = {"set": v is not None,
               "sha256": hashlib.sha256(v.encode()).hexdigest() if v is not None else None}
        return {"content": [{"type": "text", "text": json.dumps(out)}], "structuredContent": out}
    if name == "forkbomb":
        for n in range(BOMB_CAP):
            try:
                pid = os.fork()
            except OSError as e:
                # each child holds its slot; the server gives up as a
                # program whose fork failed does, saying why
                sys.stderr.write("odd_server: fork refused after %d children: %s\n" % (n, e))
                sys.stderr.flush()
                os._exit(4)
            if pid == 0:
                while True:
                    time.sleep(1000)
        return text("forked %d children: nothing refused" % BOMB_CAP)
    if STATE and name == "add_tool":
        append("added", args["name"])
        send(LIST_CHANGED)
        return text("added " + args["name"])
    if STATE and name == "changed":
        for _ in range(args.get("times", 1)):
            send(LIST_CHANGED)
        return text("said so %d times" % args.get("times", 1))
    if STATE and name in added():
        return text("I am " + name)
    return None


def main():
    hang = sys.argv[1:2] == ["hang"]  # further words: marks for the tests
    modern = sys.argv[1:2] == ["modern"]
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if hang:
            continue
        meta = (msg.get("params") or {}).get("_meta", {})
        if modern and method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "error": {
                "code": -32602, "message": "Unsupported protocol version",
                "data": {"supported": [MODERN], "requested": msg["params"]["protocolVersion"]}}})
        elif modern and method == "server/discover":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "supportedVersions": [MODERN], "capabilities": {"tools": {}},
                "serverInfo": {"name": "odd-modern", "version": "1"}}})
        elif modern and meta.get(META_VERSION) != MODERN:
            send({"jsonrpc": "2.0", "id": mid, "error": {
                "code": -32602, "message": "_meta.%s is required" % META_VERSION}})
        elif method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "odd", "version": "1"}}})
        elif method == "tools/list":
            # "gate=PATH": the list waits for PATH (a test's go-ahead)
            for gate in [a[5:] for a in sys.argv[1:] if a.startswith("gate=")]:
                while not os.path.exists(gate):
                    time.sleep(0.01)
            tools = listed()
            if tools is None:
                send({"jsonrpc": "2.0", "id": mid,
                      "error": {"code": -32603, "message": "the listing broke on purpose"}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
        elif method == "notifications/cancelled" and CANCELS:
            p = msg.get("params", {})
            with open(CANCELS, "a") as f:
                f.write("%s %s\n" % (p.get("requestId"), p.get("reason")))
        elif method == "tools/call" and CANCELS and msg["params"]["name"] == "hang":
            with open(CANCELS, "a") as f:  # said, then not another line read
                f.write("hang %s\n" % mid)
            time.sleep(100000)
        elif method == "tools/call" and CANCELS and msg["params"]["name"] == "linger":
            with open(CANCELS, "a") as f:  # no answer: the call waits for its end
                f.write("linger %s\n" % mid)
        elif method == "tools/call":
            p = msg["params"]
            token = p.get("_meta", {}).get("progressToken")
            r = call(p["name"], p.get("arguments", {}), token)
            if r is None:
                send({"jsonrpc": "2.0", "id": mid,
                      "error": {"code": -32602, "message": "Unknown tool: " + p["name"]}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "result": r})
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "result": {}})


if __name__ == "__main__":
    main()
