"""MCP servers with "instance": "shared" (toolexecd.tools(5)): a pool of
instances per server serving every client's calls, one call at a time each.
Our own server (tests/mcp_servers/odd_server.py) through the real daemon,
root and unprivileged; its processes found by a token on its command line.

- two clients' calls served by one pooled instance (a file one writes in
  its /tmp the other reads), which lives on between batches;
- the pool bounded by "instances": two calls hanging on two instances, a
  third waits for one of them rather than making a third;
- a client gone mid-call kills the instance it was on, and another
  client's call waiting for it gets a fresh one;
- recycled after "recycle_calls" answers, restarted (fresh) after a crash,
  reaped after "idle_ms" idle, gone at a reload and at daemon stop;
- a call narrowed by a "policy" is never served by the pool;
- a flood against a shared server: processes and descriptors back to where
  they were (test_mcp_server_flood's counts).
"""
import os
import signal
import threading
import unittest

import harness
from test_mcp_server_flood import descendants, fds, flood, WARMUP
import test_mcp_server_session as session
from test_mcp_server_session import capacity, text_ok, wait_listed

SRV = os.path.realpath(os.path.join(harness.HERE, "..", "mcp_servers", "odd_server.py"))
PY = "/usr/bin/python3"
WRITE = {"path": "/tmp/kept", "text": "one instance"}
READ = {"path": "/tmp/kept"}


def odd(token, name="odd", **fields):
    d = {"name": name, "mcp_server": {"command": [PY, SRV, token]}, "instance": "shared",
         "timeout_ms": 10000}
    d.update(fields)
    return d


def one(c, tool, args, timeout=harness.WAIT, **call):
    b = c.start_batch([dict({"id": "c", "name": "odd." + tool, "arguments": args}, **call)])
    events = c.recv_batch(b, timeout=timeout)
    done = [e for e in events if e["event"] == "tool_execution_completed"]
    if not done:
        raise AssertionError("no tool_execution_completed: %s" % events)
    return done[0]["result"]


def alive(d):
    return d.stats()["mcp_instances"]["alive"]


class Shared:
    def start(self, **fields):
        self.token = harness.new_token("mcpshared")
        self.d = self.daemon([odd(self.token, **fields)])
        self.addCleanup(self.d.stop)
        self.c = self.d.client()
        wait_listed(self.c, "odd.read")
        harness.assert_token_gone(self.token)  # its listing's server is gone

    def test_two_clients_one_instance(self):
        self.start()
        self.assertEqual(one(self.c, "write", WRITE), text_ok("written"))
        self.assertEqual(alive(self.d), 1)
        harness.wait_token_present(self.token)  # it lives on between batches
        c2 = self.d.client()
        self.assertEqual(one(c2, "read", READ), text_ok("one instance"))
        self.assertEqual(alive(self.d), 1)
        self.assertEqual(capacity(self.d)["tools"]["odd"]["instances"], 1)

    def test_pool_bounded(self):
        self.start(instances=2, timeout_ms=int(3000 * harness.SCALE))
        cs = [self.d.client() for _ in range(3)]
        bs = [cs[0].start_batch([{"id": "h", "name": "odd.hang", "arguments": {}}]),
              cs[1].start_batch([{"id": "h", "name": "odd.hang", "arguments": {}}])]
        harness.deadline_wait(lambda: alive(self.d) == 2, what="two instances")
        b3 = cs[2].start_batch([{"id": "e", "name": "odd.echo", "arguments": {"text": "x"}}])
        # the third waits for one of the two: never a third instance
        ev = cs[2].recv_for(lambda e: e.get("event") == "tool_execution_started")
        self.assertEqual(ev["id"], "e")
        self.assertEqual(alive(self.d), 2)
        self.assertEqual(d_stats_servers(self.d), {"odd": 2})
        for c, b in zip(cs, bs):
            r = [e for e in c.recv_batch(b, timeout=60 * harness.SCALE)
                 if e["event"] == "tool_execution_completed"][0]["result"]
            self.assertEqual(r["tool_error"]["reason"], "timeout")
        r = [e for e in cs[2].recv_batch(b3, timeout=60 * harness.SCALE)
             if e["event"] == "tool_execution_completed"][0]["result"]
        self.assertEqual(r, text_ok("x"))  # on a fresh instance after the timeout
        self.assertLessEqual(alive(self.d), 2)

    def test_client_gone_mid_call(self):
        # its call cancelled kills the instance it was on; another client's
        # call waiting for that instance is served by a fresh one
        self.start(timeout_ms=60000)
        c1, c2 = self.d.client(), self.d.client()
        self.assertEqual(one(c2, "write", WRITE), text_ok("written"))
        c1.start_batch([{"id": "h", "name": "odd.hang", "arguments": {}}])
        harness.deadline_wait(lambda: self.d.stats()["workers"]["running"] == 1,
                              what="the hang in flight")
        b = c2.start_batch([{"id": "r", "name": "odd.read", "arguments": READ}])
        c2.recv_for(lambda e: e.get("event") == "tool_execution_started")
        c1.close()
        r = [e for e in c2.recv_batch(b) if e["event"] == "tool_execution_completed"]
        self.assertIn("No such file", r[0]["result"]["error"])  # a fresh instance
        self.assertEqual(alive(self.d), 1)

    def test_recycled_after_n_calls(self):
        self.start(recycle_calls=2)
        self.assertEqual(one(self.c, "write", WRITE), text_ok("written"))
        self.assertEqual(one(self.c, "read", READ), text_ok("one instance"))
        harness.assert_token_gone(self.token)  # its second answer recycled it
        self.assertIn("No such file", one(self.c, "read", READ)["error"])

    def test_restarted_after_a_crash(self):
        self.start()
        self.assertEqual(one(self.c, "write", WRITE), text_ok("written"))
        err = one(self.c, "crash", {})["tool_error"]
        self.assertEqual(err["reason"], "handler_exit")
        self.assertIn("exited with status 3", err["message"])
        harness.assert_token_gone(self.token)
        self.assertIn("No such file", one(self.c, "read", READ)["error"])  # a fresh one
        self.assertEqual(alive(self.d), 1)

    def test_idle_reaped(self):
        self.start(idle_ms=200)
        self.assertEqual(one(self.c, "write", WRITE), text_ok("written"))
        harness.assert_token_gone(self.token)
        harness.deadline_wait(lambda: alive(self.d) == 0, what="no instance counted")
        self.assertIn("No such file", one(self.c, "read", READ)["error"])

    def test_gone_at_reload(self):
        self.start()
        self.assertEqual(one(self.c, "write", WRITE), text_ok("written"))
        harness.wait_token_present(self.token)
        os.kill(self.d.proc.pid, signal.SIGHUP)
        # the reload's listing starts a server with the same token: waited
        # for first, or the token's check would see (and kill) it
        harness.deadline_wait(
            lambda: self.d.stderr().count("MCP server odd: 14 tools registered") == 2,
            what="the reload's listing")
        harness.assert_token_gone(self.token)
        wait_listed(self.c, "odd.read")
        self.assertIn("No such file", one(self.c, "read", READ)["error"])

    def test_gone_at_stop(self):
        self.start()
        self.assertEqual(one(self.c, "write", WRITE), text_ok("written"))
        harness.wait_token_present(self.token)
        self.d.stop()  # within its time, status 0: an idle instance does not hold it
        harness.assert_token_gone(self.token)

    def test_narrowed_not_pooled(self):
        self.start()
        self.assertEqual(one(self.c, "write", WRITE), text_ok("written"))
        r = one(self.c, "read", READ, policy={"limits": {"processes": 32}})
        self.assertIn("No such file", r["error"])
        self.assertEqual(one(self.c, "read", READ), text_ok("one instance"))


def d_stats_servers(d):
    return d.stats()["mcp_instances"]["servers"]


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Shared)


class Check(unittest.TestCase):
    check = session.Check.check

    def test_bad_instances(self):
        for bad, says in (({"instance": "session", "recycle_calls": 2},
                           "recycle_calls: only with \"instance\": \"shared\""),
                          ({"instance": "session", "idle_ms": 2},
                           "idle_ms: only with \"instance\": \"shared\""),
                          ({"instance": "shared", "idle_ms": 0}, "idle_ms: expected an integer"),
                          ({"instance": "shared", "recycle_calls": -1},
                           "recycle_calls: expected an integer")):
            status, out = self.check(dict(odd("t"), **bad))
            self.assertNotEqual(status, 0, bad)
            self.assertIn(says, out, bad)

    def test_session_loads(self):
        status, out = self.check(odd("t", instances=2, recycle_calls=10, idle_ms=1000,
                                     filesystem=harness.with_tree({})))
        self.assertEqual(status, 0, out)


if __name__ == "__main__":
    unittest.main()
