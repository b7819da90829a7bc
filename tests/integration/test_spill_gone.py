"""Spill files go with their client.

A spill file (the full content of a cut result) is for the client that ran
the batch: it stays while that connection is open, however long ago its
batch completed, and is removed once the connection closes, not
--spill-max-age (an hour) later. Another client's file is left alone."""

import os
import unittest

from harness import Daemon, deadline_wait, nobody_daemon, worker_tool

TOOLS = [worker_tool("spilling", "ok-string", max_content_bytes=100, spill=True)]
FULL = "x" * 5000


def spill_of(client, batch):
    res = client.run([{"id": "s", "name": "spilling", "arguments": {"s": FULL}}], batch=batch)
    path = res.completed("s")["truncated"]["spill_path"]
    with open(path) as f:
        assert FULL in f.read(), "the spill file does not hold the content"
    return path


class SpillGone(unittest.TestCase):
    def check(self, d):
        a, b = d.client(), d.client()
        pa, pb = spill_of(a, "A"), spill_of(b, "B")
        # a's batch is over: its file stays for it while it is connected
        a.assert_quiet()
        self.assertTrue(os.path.exists(pa))
        a.close()
        d.clients.remove(a)
        deadline_wait(lambda: not os.path.lexists(pa),
                      what="the closed client's spill file %s removed" % pa)
        self.assertTrue(os.path.exists(pb), "another client's spill file was removed")
        b.assert_quiet()
        with open(pb) as f:
            self.assertIn(FULL, f.read())
        b.close()
        d.clients.remove(b)
        deadline_wait(lambda: not os.path.lexists(pb), what="the spill file %s removed" % pb)

    def test_root_daemon(self):
        with Daemon(TOOLS) as d:
            self.check(d)

    @unittest.skipUnless(os.geteuid() == 0, "needs root (to drop to nobody)")
    def test_unprivileged_daemon(self):
        d = nobody_daemon(TOOLS)
        try:
            self.check(d)
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
