"""A tool's declared timeout_ms is not cut by a default the client never
set: test_hard_calldir's tool said 120 s and was killed at the batch's 30 s
default on a loaded machine.

The daemon's default (--tool-timeout) is made tiny here, so that what
decides each call's timeout shows in the timeout error's cause.timeout_ms
without waiting on a 30 s clock: the test asserts which value applied, not
how long anything took.
"""

import unittest

import harness
from harness import DaemonTestCase, worker_tool

DEFAULT = 100  # --tool-timeout: far below the tool's own


class TimeoutDefault(DaemonTestCase):
    ARGS = ["--tool-timeout", str(DEFAULT)]

    @classmethod
    def tools(cls):
        return [worker_tool("declared", "sleep", timeout_ms=400),
                worker_tool("undeclared", "sleep")]

    def cause(self, name, **opts):
        res = self.c.run([{"id": "c0", "name": name}], **opts)
        return self.assertToolError(res, "c0", "timeout")["cause"]["timeout_ms"]

    def test_tool_timeout_beats_the_default(self):
        # the client set no tool_timeout: the tool's 400 ms, not the 100 ms default
        self.assertEqual(self.cause("declared"), 400)

    def test_default_applies_to_a_tool_that_declares_none(self):
        self.assertEqual(self.cause("undeclared"), DEFAULT)

    def test_client_tool_timeout_still_caps(self):
        # a tool_timeout the client did set is its choice: the smaller wins
        self.assertEqual(self.cause("declared", tool_timeout=150), 150)
        self.assertEqual(self.cause("undeclared", tool_timeout=150), 150)


if __name__ == "__main__":
    harness.main()
