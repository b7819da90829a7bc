#!/usr/bin/env python3
"""bench/mcpwarm.py - a Python MCP server's call, cold and warm, in one run.

  bench/mcpwarm.py [--build DIR] [--calls N]

The stand-in for a PyPI server (tests/mcp_servers/pymod/mcp_server_standin:
a package run with python -m that imports pydantic, anyio, httpx,
starlette..., as a server on the `mcp` package does; PyPI cannot be reached
here), its get_current_time tool, N times each (default 10), one way after
another per round:

- bare: `python3 -m mcp_server_standin` started as an MCP host starts it,
  the handshake, the call, the server killed (bench/mcpstart.py's);
- cold: a one-call batch through the real daemon (BUILD/daemon/toolexecd,
  on a private socket) of a definition with "python_module" and no
  "start": the bridge starts a fresh confined server per call;
- warm: the same definition with "start": "warm": each call a fresh fork of
  a template that has imported the module (toolexec.mcpwarm).

Prints each way's median and mean seconds per call, and cold/warm and
warm/bare (medians). Standard library only; a benchmark to run by hand,
never a pass/fail test.

  bench/mcpwarm.py [--build DIR] --pss

instead prints the memory the warm server's templates hold once ready and
idle: each template's PSS (stats' pss_kb, /proc/PID/smaps_rollup) and their
sum, for the stand-in's seven tools.
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--pss", action="store_true", help="the templates' memory, no calls")
    a = ap.parse_args()
    build = os.path.realpath(a.build)
    os.environ.setdefault("TOOLEXECD", os.path.join(build, "daemon", "toolexecd"))
    os.environ.setdefault("TE_TESTWORKER", os.path.join(build, "tests", "workers", "testworker"))
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
    import harness
    from mcpstart import bare_call
    from test_mcp_server_warm import ENV, PY, standin

    if a.pss:
        return pss(harness, standin("warm"))
    tool, args = "get_current_time", {"timezone": "UTC"}
    d = harness.Daemon([standin("cold", start=None), standin("warm")])
    times = {"bare": [], "cold": [], "warm": []}
    try:
        c = d.client()
        for name in ("cold", "warm"):
            harness.deadline_wait(lambda: any(t["name"] == name + "." + tool
                                              for t in c.tools()["tools"]), timeout=60)
        harness.wait_template(d, "warm")  # the server's template, for all its tools
        command = ["env"] + ["%s=%s" % kv for kv in ENV.items()] + [PY, "-m",
                                                                     "mcp_server_standin"]
        bare_call(command, tool, args)  # caches warm, every way
        for i in range(a.calls + 1):
            if i:
                times["bare"].append(bare_call(command, tool, args))
            for name in ("cold", "warm"):
                t0 = time.perf_counter()
                b = c.start_batch([{"id": "c", "name": name + "." + tool, "arguments": args}])
                events = c.recv_batch(b, timeout=60)
                dt = time.perf_counter() - t0
                done = [e for e in events if e["event"] == "tool_execution_completed"][0]
                assert "ok" in done["result"], done
                assert done.get("start", "cold") == name, done
                if i:
                    times[name].append(dt)
    finally:
        d.stop()
    for name, v in times.items():
        print("%-5s median %.4f s  mean %.4f s  (%d calls)" % (name, statistics.median(v),
                                                             statistics.mean(v), len(v)))
    med = {k: statistics.median(v) for k, v in times.items()}
    print("cold/warm (medians): %.2fx" % (med["cold"] / med["warm"]))
    print("warm/bare (medians): %.2fx" % (med["warm"] / med["bare"]))
    return 0


def pss(harness, definition):
    """The templates of a warm server, ready and idle: their PSS."""
    d = harness.Daemon([definition])
    try:
        c = d.client()
        harness.deadline_wait(lambda: any(t["name"].startswith("warm.")
                                          for t in c.tools()["tools"]), timeout=60)
        n = sum(1 for t in c.tools()["tools"] if t["name"].startswith("warm."))

        def ready():
            t = d.stats().get("templates") or {}
            return t if t and all(v["state"] == "ready" and v["pss_kb"] for v in t.values()) \
                else None
        templates = harness.deadline_wait(ready, timeout=60)
        for name, t in sorted(templates.items()):
            print("%-28s pid %-7d pss %6d kB" % (name, t["pid"], t["pss_kb"]))
        print("%d tools, %d templates, PSS %d kB in all" % (
            n, len(templates), sum(t["pss_kb"] for t in templates.values())))
    finally:
        d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
