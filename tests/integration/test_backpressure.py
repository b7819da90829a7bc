"""A client that stops reading: the daemon stops reading that client's
workers' output (they block on their pipes), keeps a bounded amount queued
for it, and never slows another client. When the client reads again,
everything it is owed arrives."""

import unittest

import harness
from harness import Daemon, worker_tool, WAIT

MIB = 1 << 20
CALLS = 8


def vm_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


class NonReadingClient(unittest.TestCase):

    def test_non_reading_client_beside_a_normal_one(self):
        d = Daemon(tools=[worker_tool("big", "big-output"), worker_tool("echo", "echo")])
        self.addCleanup(d.stop)
        slow = d.client()
        calls = [{"id": "c%d" % i, "name": "big", "arguments": {"n": MIB}}
                 for i in range(CALLS)]
        slow.start_batch(calls, batch="flood", max_concurrency=CALLS)

        # The daemon notices the client is not reading and pauses its workers.
        harness.deadline_wait(lambda: "pausing its workers" in d.stderr(),
                              what="the daemon pausing the slow client's workers")

        # Meanwhile another client is served normally.
        fast = d.client()
        res = fast.run([{"id": "e", "name": "echo", "arguments": {"x": 1}}], batch="quick")
        self.assertEqual(res.result("e"), {"ok": {"x": 1}})

        # Bounded: the daemon holds at most ~1 MiB queued plus one result
        # per running call, nowhere near the 8 x 2 MiB of events owed.
        # (Under the sanitizers RSS is mostly ASan's shadow and quarantine:
        # the bound is checked in the plain build's run.)
        rss = vm_rss_kib(d.proc.pid)
        if not harness.SANITIZED:
            self.assertLess(rss, 64 * 1024,
                            "daemon RSS %d KiB while a client is not reading" % rss)

        # Reading again resumes the paused workers: every call completes.
        events = slow.finish_batch("flood", timeout=WAIT * 2)
        done = [e for e in events if e["event"] == "tool_execution_completed"]
        self.assertEqual(len(done), CALLS)
        for e in done:
            self.assertEqual(len(e["result"]["ok"]), MIB)
        final = [e for e in events if e["event"] == "batch_completed"]
        self.assertEqual(len(final), 1)
        self.assertEqual([m["tool_call_id"] for m in final[0]["messages"]],
                         [c["id"] for c in calls])


if __name__ == "__main__":
    import unittest
    unittest.main()
