"""An MCP server's call that is cancelled or times out: the server is told
(notifications/cancelled with the call's request id and the reason, then a
ping), before the call's processes are ended, as an MCP client cancels a
request. Our own server (tests/mcp_servers/odd_server.py "cancels=FILE",
whose linger tool never answers but goes on reading, and notes each cancel
it reads in FILE), through the real daemon, root and unprivileged:

- a call instance's batch cancelled: the call ends at once (handler_exit,
  cancelled), the server notes "2 the call was cancelled" after the call
  it had ("linger 2"), and no process
  of the call is left;
- a call instance's call past its timeout: the result is the timeout, the
  server notes "2 the call timed out", nothing is left;
- a shared instance's call whose client goes: the same note, and the next
  call is served (by a fresh instance);
- a server that does not read (odd's hang tool: it sleeps in the middle of
  a call) is told nothing it reads, and is still ended: the bridge does not
  wait for it past its bound. The bridge ends by itself: the daemon, which
  kills a bridge still there 1 s after it was told (worker.c,
  on_grace_over), never had to (it says so in its log when it does).
"""
import os
import unittest

import harness
from test_mcp_server import PY, SRV, completed, run_events, text_ok, wait_listed


# the daemon's word when it had to kill a bridge that did not end by itself
GRACE_OVER = "its MCP bridge had not ended"


def odd(token, cancels, **fields):
    d = {"name": "odd", "mcp_server": {"command": [PY, SRV, token, "cancels=" + cancels]},
         "timeout_ms": 30000}
    d.update(fields)
    return d


def notes(path):
    with open(path) as f:
        return f.read().splitlines()


class Cancel:
    """Against the daemon cls.daemon makes (harness.root_and_unprivileged)."""

    def start(self, **fields):
        self.token = harness.new_token("mcpcancel")
        d = self.daemon(start=False)
        self.cancels = os.path.join(d.shared_dir("cancel"), "notes")
        open(self.cancels, "w").close()
        os.chmod(self.cancels, 0o666)  # each call may be a uid of its own
        d.add_tool(odd(self.token, self.cancels, **fields))
        self.d = harness.started(d)
        self.addCleanup(self.d.stop)
        self.c = self.d.client()
        wait_listed(self.c, "odd.linger")
        harness.assert_token_gone(self.token)  # its listing's server is gone

    def lingering(self, c):
        """A one-call batch of linger, started and running; its batch id."""
        b = c.start_batch([{"id": "l", "name": "odd.linger", "arguments": {}}])
        c.recv_for(lambda e: e.get("event") == "tool_execution_started")
        harness.deadline_wait(lambda: notes(self.cancels), what="the server to have the call")
        return b

    def test_cancelled_call_tells_the_server(self):
        self.start()
        b = self.lingering(self.c)
        self.c.send({"op": "cancel", "batch": b})
        events = self.c.recv_batch(b)
        err = completed(events)["result"]["tool_error"]
        self.assertEqual((err["reason"], err["cause"]["cancelled"]), ("handler_exit", True), err)
        self.assertEqual(events[-1]["halt"], {"halted_reason": "cancelled"})
        harness.deadline_wait(lambda: len(notes(self.cancels)) == 2, what="the server's note")
        self.assertEqual(notes(self.cancels), ["linger 2", "2 the call was cancelled"])
        harness.assert_token_gone(self.token)

    def test_timed_out_call_tells_the_server(self):
        # the listing has the same timeout: long enough for a sanitized build's
        self.start(timeout_ms=int(3000 * harness.SCALE))
        err = completed(run_events(self.c, "odd.linger", {}))["result"]["tool_error"]
        self.assertEqual(err["reason"], "timeout", err)
        self.assertEqual(notes(self.cancels), ["linger 2", "2 the call timed out"])
        harness.assert_token_gone(self.token)

    def test_shared_instance_client_gone(self):
        self.start(instance="shared")
        c1 = self.d.client()
        self.lingering(c1)
        c1.close()
        harness.deadline_wait(lambda: len(notes(self.cancels)) == 2, what="the server's note")
        self.assertEqual(notes(self.cancels), ["linger 2", "2 the call was cancelled"])
        self.assertEqual(completed(run_events(self.c, "odd.echo", {"text": "on"}))["result"],
                         text_ok("on"))

    def test_server_not_reading_is_ended(self):
        self.start()
        b = self.c.start_batch([{"id": "h", "name": "odd.hang", "arguments": {}}])
        self.c.recv_for(lambda e: e.get("event") == "tool_execution_started")
        # the server has the call (the bridge awaits its answer), then reads
        # nothing more: the bridge's cancel and ping are never read
        harness.deadline_wait(lambda: notes(self.cancels), what="the server to have the call")
        self.c.send({"op": "cancel", "batch": b})
        err = completed(self.c.recv_batch(b))["result"]["tool_error"]
        self.assertTrue(err["cause"]["cancelled"], err)
        harness.assert_token_gone(self.token)
        self.assertEqual(notes(self.cancels), ["hang 2"])
        # once the call's worker is freed its grace timer can no longer
        # fire: had it, the daemon would have said so before
        harness.deadline_wait(lambda: self.d.stats()["workers"]["processes"] == 0,
                              what="the call's worker freed")
        self.assertNotIn(GRACE_OVER, self.d.stderr())


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Cancel)


if __name__ == "__main__":
    harness.require_env()
    unittest.main()
