"""SIGTERM with no batch left but a tail subscriber that never reads.

--shutdown-timeout is what batches in flight get to finish; a daemon with
none left only has events to flush, and clients get FLUSH_GRACE_MS (5 s)
for that before the unread rest is dropped. A subscriber that never read
used to keep an idle daemon up for the whole --shutdown-timeout first
(10 + 5 s with the default; seen in stop 18's CI work). Here the timeout is
60 s, so the old behaviour takes 65 s and the test's bound of 30 s (far
above the 5 s grace) tells the two apart without timing anything finer.
"""

import json
import signal
import socket
import subprocess
import unittest

import harness
from harness import Daemon, worker_tool

BOUND_S = 30


class ShutdownFlush(unittest.TestCase):
    def test_idle_daemon_with_an_unread_subscriber_exits_after_the_flush_grace(self):
        harness.require_env()
        d = Daemon([worker_tool("echo", "echo")], args=["--shutdown-timeout", "60"])
        self.addCleanup(d.stop, False)
        tail = socket.socket(socket.AF_UNIX)
        self.addCleanup(tail.close)
        tail.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        tail.connect(d.sock)
        tail.sendall(b'{"op":"tail"}\n')
        c = d.client()
        # Far more events than the subscriber's buffers hold: some are left
        # queued in the daemon, unread.
        for k in range(10):
            res = c.run([{"id": "c%d" % i, "name": "echo", "arguments": {"x": "y" * 400}}
                         for i in range(50)])
            self.assertTrue(res.ok, res.events[-1])
        c.close()
        d.clients.remove(c)
        d.proc.send_signal(signal.SIGTERM)
        try:
            rc = d.proc.wait(timeout=BOUND_S * harness.SCALE)
        except subprocess.TimeoutExpired:
            self.fail("an idle daemon with an unread subscriber did not exit within %d s of "
                      "SIGTERM (--shutdown-timeout 60)" % BOUND_S)
        self.assertEqual(rc, 0, d.stderr()[-3000:])
        self.assertIn("unread at shutdown; closing", d.stderr())


if __name__ == "__main__":
    harness.main()
