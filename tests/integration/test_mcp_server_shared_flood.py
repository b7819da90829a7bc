"""A flood of calls against an MCP server with "instance": "shared" (a pool
of 4, recycled every 50 calls, reaped after 300 ms idle) through the real
daemon, root and unprivileged, as test_mcp_server_flood floods one with a
fresh server per call.

- TE_MCP_FLOOD_CALLS (default 1,000) calls over 16 connections after a
  warm-up of the same shape: every call answered, never more instances
  than the pool's 4 (stats' mcp_instances polled meanwhile);
- afterwards, the pool idle-reaped: no process of the server left, the
  daemon's descendants and descriptors back to where they were after the
  warm-up (its pool reaped too), no instance counted.
"""
import os
import threading
import unittest

import harness
import test_mcp_server_flood as call_flood
from test_mcp_server_flood import CALLS, CONNS, WARMUP, descendants, fds, flood, uids_in

SRV = os.path.realpath(os.path.join(harness.HERE, "..", "mcp_servers", "odd_server.py"))
PY = "/usr/bin/python3"
POOL = 4


def server(token):
    return {"name": "odd", "mcp_server": {"command": [PY, SRV, token]}, "instance": "shared",
            "instances": POOL, "recycle_calls": 50, "idle_ms": 300, "timeout_ms": 30000}


class Flood:
    def test_flood_leaves_nothing(self):
        token = harness.new_token("mcpsharedflood")
        d = self.daemon([server(token)])
        try:
            c = d.client()
            harness.deadline_wait(lambda: any(t["name"] == "odd.echo"
                                              for t in c.tools()["tools"]),
                                  what="odd's tools listed")
            c.close()
            pid = d.proc.pid
            self.assertEqual(flood(d, "odd.echo", WARMUP), [])
            harness.assert_token_gone(token, what="the pool's instances, idle")
            procs0, fds0 = len(descendants(pid)), fds(pid)

            most, stop = [0], threading.Event()

            def watch():
                while not stop.is_set():
                    most[0] = max(most[0], d.stats()["mcp_instances"]["alive"])
                    stop.wait(0.05)

            w = threading.Thread(target=watch)
            w.start()
            try:
                bad = flood(d, "odd.echo", CALLS)
            finally:
                stop.set()
                w.join()
            self.assertEqual(bad, [], "%d of %d calls failed" % (len(bad), CALLS))
            self.assertLessEqual(most[0], POOL)

            harness.assert_token_gone(token, what="the pool's instances, idle")
            harness.deadline_wait(lambda: len(descendants(pid)) == procs0,
                                  what="the daemon's descendants back to %d" % procs0)
            harness.deadline_wait(lambda: fds(pid) == fds0,
                                  what="the daemon's descriptors back to %d" % fds0)
            self.assertEqual(d.stats()["mcp_instances"], {"alive": 0, "servers": {}})
            if self.LENT:
                self.assertEqual(uids_in(*self.LENT), [], "processes of the uids it lends")
            print("shared flood %s: %d calls over %d connections, at most %d instances; "
                  "descendants %d, fds %d" % (type(self).__name__, CALLS, CONNS, most[0],
                                              procs0, fds0))
        finally:
            d.stop()


# the daemons test_mcp_server_flood floods, as it makes them
class RootDaemon(Flood, unittest.TestCase):
    daemon = staticmethod(call_flood.RootDaemon.daemon)
    LENT = call_flood.RootDaemon.LENT


class UnprivilegedDaemon(Flood, unittest.TestCase):
    daemon = staticmethod(call_flood.UnprivilegedDaemon.daemon)
    LENT = call_flood.UnprivilegedDaemon.LENT


if __name__ == "__main__":
    harness.require_env()
    unittest.main(verbosity=2)
