"""Capacity for placement: {"op": "capacity"} and the
/metrics gauges of the same numbers.

Calls of the "wait" tool block until the test creates their release file,
so with --max-workers 2 the daemon's state is known exactly: a request on
the same connection as the run is handled after it, when its calls hold
their slots or wait for one.
"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Daemon, deadline_wait, require_env, worker_tool  # noqa: E402

TOOLS = [worker_tool("wait", "wait-file", timeout_ms=60000), worker_tool("echo", "echo")]


def capacity(c):
    c.send({"op": "capacity"})
    return c.recv_for(lambda e: e.get("event") in ("capacity", "error") and "batch" not in e)


def metrics(c):
    c.send({"op": "metrics"})
    text = c.recv_for(lambda e: e.get("event") == "metrics")["text"]
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(toolexecd_[a-z_]+)(?:\{tool="([^"]*)"\})? (\d+)$', line)
        if m:
            out[(m.group(1), m.group(2))] = int(m.group(3))
    return out


def tool(queued=0, running=0, spares=0, warm=None):
    return {"queued": queued, "running": running, "spares": spares, "warm": warm}


class CapacityTest(unittest.TestCase):
    def setUp(self):
        require_env()

    def assertMetricsAgree(self, cap, m):
        self.assertEqual(m[("toolexecd_workers_free", None)], cap["free_workers"])
        self.assertEqual(m[("toolexecd_workers_running", None)], cap["running_calls"])
        self.assertEqual(m[("toolexecd_calls_queued", None)], cap["queued_calls"])
        self.assertEqual(m[("toolexecd_workers_max", None)], cap["max_workers"])
        for name, t in cap["tools"].items():
            self.assertEqual(m[("toolexecd_tool_calls_queued", name)], t["queued"], name)
            self.assertEqual(m[("toolexecd_tool_calls_running", name)], t["running"], name)
            self.assertEqual(m[("toolexecd_tool_spares_ready", name)], t["spares"], name)
            if t["warm"] is None:
                self.assertNotIn(("toolexecd_tool_warm_ready", name), m)
            else:
                self.assertEqual(m[("toolexecd_tool_warm_ready", name)],
                                 int(t["warm"] == "ready"), name)

    def test_running_and_queued(self):
        with Daemon(TOOLS, ["--max-workers", "2"]) as d:
            a, b = d.client(), d.client()
            cap = capacity(a)
            self.assertEqual(cap, {"event": "capacity", "max_workers": 2, "free_workers": 2,
                                   "running_calls": 0, "queued_calls": 0,
                                   "prepared_sandboxes": 0, "max_client_batches": 64,
                                   "mcp_instances": 0,
                                   "shutting_down": False,
                                   "tools": {"wait": tool(), "echo": tool()}})
            rel = [d.path("release%d" % i) for i in range(3)]
            a.start_batch([{"id": "w%d" % i, "name": "wait", "arguments": {"path": p}}
                           for i, p in enumerate(rel)], batch="A")
            cap = capacity(a)
            self.assertEqual((cap["free_workers"], cap["running_calls"], cap["queued_calls"]),
                             (0, 2, 1), cap)
            self.assertEqual(cap["tools"]["wait"], tool(queued=1, running=2))
            b.start_batch([{"id": "e1", "name": "echo", "arguments": {}},
                           {"id": "e2", "name": "echo", "arguments": {}}], batch="B")
            cap = capacity(b)
            self.assertEqual((cap["free_workers"], cap["running_calls"], cap["queued_calls"]),
                             (0, 2, 3), cap)
            self.assertEqual(cap["tools"], {"wait": tool(queued=1, running=2),
                                            "echo": tool(queued=2)})
            self.assertMetricsAgree(cap, metrics(b))
            for p in rel:
                open(p, "w").close()
            a.finish_batch("A")
            b.finish_batch("B")
            cap = capacity(a)
            self.assertEqual((cap["free_workers"], cap["running_calls"], cap["queued_calls"]),
                             (2, 0, 0), cap)
            self.assertEqual(cap["tools"], {"wait": tool(), "echo": tool()})
            self.assertMetricsAgree(cap, metrics(a))

    def test_spares_and_warm(self):
        tools = TOOLS + [worker_tool("hot", "echo", start="warm")]
        with Daemon(tools, ["--spares", "1"]) as d:
            c = d.client()
            c.run([{"id": "e", "name": "echo", "arguments": {}}], batch="s")
            cap = deadline_wait(
                lambda: (lambda x: x if x["tools"]["echo"]["spares"] == 1 and
                         x["tools"]["hot"]["warm"] == "ready" else None)(capacity(c)),
                what="a spare of echo and hot's template")
            self.assertEqual(cap["prepared_sandboxes"],
                             sum(t["spares"] for t in cap["tools"].values()))
            self.assertIsNone(cap["tools"]["wait"]["warm"])
            self.assertMetricsAgree(cap, metrics(c))

    def test_malformed(self):
        with Daemon(TOOLS) as d:
            c = d.client()
            c.send({"op": "capacity", "tool": "echo"})
            ev = c.recv()
            self.assertEqual((ev["event"], ev["type"], ev["reason"]),
                             ("error", "request_error", "invalid_request"), ev)
            self.assertIn('unknown key "tool" in capacity request', ev["message"])
            # the connection goes on
            self.assertEqual(capacity(c)["event"], "capacity")


if __name__ == "__main__":
    unittest.main()
