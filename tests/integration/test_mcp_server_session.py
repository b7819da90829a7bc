"""MCP servers with "instance": "session" (toolexecd.tools(5)): one server
per batch, serving the batch's calls of its tools one at a time, gone with
the batch. Our own server (tests/mcp_servers/odd_server.py) through the real
daemon, root and unprivileged.

- a batch's second call reads the file its first wrote in /tmp (one
  instance: one sandbox, one server) while the next batch does not (a
  fresh one);
- the instance's processes (found by a token on the server's command line)
  are gone when its batch completes, when its client disconnects mid-batch,
  at daemon stop, and after a reload once its batch is over;
- a call that hangs times out (its instance killed) and the batch's next
  call gets a fresh server; a crash is the call's handler_exit and the next
  call a fresh server too;
- a call narrowed by a "policy" never shares an instance;
- counted while alive in stats, capacity and /metrics;
- "instances" bounds the instances of a server: a batch past it is refused
  with cause.instance_ceiling; a bad value is refused at load.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import unittest

import harness
import test_capacity

SRV = os.path.realpath(os.path.join(harness.HERE, "..", "mcp_servers", "odd_server.py"))
PY = "/usr/bin/python3"


def odd(token, name="odd", **fields):
    d = {"name": name, "mcp_server": {"command": [PY, SRV, token]}, "instance": "session",
         "timeout_ms": 10000}
    d.update(fields)
    return d


def text_ok(t):
    return {"ok": {"content": [{"type": "text", "text": t}]}}


def results(c, calls, timeout=harness.WAIT, **opts):
    """{call id: its result} of one batch of calls [(id, tool, arguments)]."""
    b = c.start_batch([{"id": i, "name": "odd." + t, "arguments": a} for i, t, a in calls],
                      **opts)
    return {e["id"]: e["result"] for e in c.recv_batch(b, timeout=timeout)
            if e["event"] == "tool_execution_completed"}


def capacity(d):
    c = d.client()
    try:
        c.send({"op": "capacity"})
        return c.recv_for(lambda e: e.get("event") == "capacity")
    finally:
        c.close()
        d.clients.remove(c)


def metrics_of(d):
    """/metrics' text (the metrics op) as test_capacity reads it."""
    c = d.client()
    try:
        return test_capacity.metrics(c)
    finally:
        c.close()
        d.clients.remove(c)


def wait_listed(c, name):
    harness.deadline_wait(lambda: any(t["name"] == name for t in c.tools()["tools"]),
                          what="%s listed" % name)


WRITE = ("w", "write", {"path": "/tmp/kept", "text": "one instance"})
READ = ("r", "read", {"path": "/tmp/kept"})


class Session:
    """Against the daemon cls.daemon() makes."""

    def setUp(self):
        self.token = harness.new_token("mcpsession")
        self.d = self.daemon([odd(self.token, timeout_ms=int(2000 * harness.SCALE))])
        self.addCleanup(self.d.stop)
        self.c = self.d.client()
        self.addCleanup(self.c.close)
        wait_listed(self.c, "odd.read")
        harness.assert_token_gone(self.token)  # its listing's server is gone

    def test_one_instance_per_batch(self):
        r = results(self.c, [WRITE, READ])
        self.assertEqual(r["w"], text_ok("written"))
        self.assertEqual(r["r"], text_ok("one instance"))
        # gone with its batch
        harness.assert_token_gone(self.token)
        # the next batch: a fresh server in a fresh sandbox
        r = results(self.c, [READ])
        self.assertIn("No such file", r["r"]["error"])
        harness.assert_token_gone(self.token)

    def test_hang_times_out_next_call_fresh(self):
        r = results(self.c, [WRITE, ("h", "hang", {}), READ], timeout=60 * harness.SCALE)
        self.assertEqual(r["w"], text_ok("written"))
        self.assertEqual(r["h"]["tool_error"]["reason"], "timeout")
        self.assertIn("No such file", r["r"]["error"])  # not the killed server's /tmp
        harness.assert_token_gone(self.token)

    def test_crash_next_call_fresh(self):
        r = results(self.c, [WRITE, ("x", "crash", {}), READ, ("w2", "write", WRITE[2]),
                             ("r2", "read", READ[2])])
        self.assertEqual(r["x"]["tool_error"]["reason"], "handler_exit")
        self.assertIn("exited with status 3", r["x"]["tool_error"]["message"])
        self.assertIn("No such file", r["r"]["error"])
        self.assertEqual(r["r2"], text_ok("one instance"))  # the fresh one serves on
        harness.assert_token_gone(self.token)

    def test_progress_is_the_calls(self):
        b = self.c.start_batch([{"id": "p", "name": "odd.progress", "arguments": {}},
                                {"id": "e", "name": "odd.echo", "arguments": {"text": "e"}}])
        events = self.c.recv_batch(b)
        prog = [e["id"] for e in events if e["event"] == "tool_execution_progress"]
        self.assertEqual(prog, ["p", "p", "p"])
        done = {e["id"]: e["result"] for e in events
                if e["event"] == "tool_execution_completed"}
        self.assertEqual(done, {"p": text_ok("done"), "e": text_ok("e")})

    def test_narrowed_call_never_shares(self):
        narrow = {"limits": {"processes": 32}}
        b = self.c.start_batch([
            {"id": "w", "name": "odd.write", "arguments": WRITE[2]},
            {"id": "r", "name": "odd.read", "arguments": READ[2], "policy": narrow},
            {"id": "r2", "name": "odd.read", "arguments": READ[2]}])
        r = {e["id"]: e["result"] for e in self.c.recv_batch(b)
             if e["event"] == "tool_execution_completed"}
        self.assertEqual(r["w"], text_ok("written"))
        self.assertIn("No such file", r["r"]["error"])  # an instance of its own
        self.assertEqual(r["r2"], text_ok("one instance"))
        harness.assert_token_gone(self.token)

    def test_gone_when_its_client_leaves(self):
        self.c.start_batch([{"id": "w", "name": "odd.write", "arguments": WRITE[2]},
                            {"id": "h", "name": "odd.hang", "arguments": {}}])
        harness.wait_token_present(self.token)
        # counted while it lives: stats, capacity (on its server's entry)
        harness.deadline_wait(lambda: self.d.stats()["mcp_instances"] ==
                              {"alive": 1, "servers": {"odd": 1}}, what="the instance counted")
        cap = capacity(self.d)
        self.assertEqual((cap["mcp_instances"], cap["tools"]["odd"]["instances"]), (1, 1))
        m = metrics_of(self.d)
        self.assertEqual((m[("toolexecd_mcp_instances", None)],
                          m[("toolexecd_tool_mcp_instances", "odd")]), (1, 1))
        self.c.close()
        harness.assert_token_gone(self.token)
        harness.deadline_wait(lambda: self.d.stats()["mcp_instances"] ==
                              {"alive": 0, "servers": {}}, what="no instance counted")
        self.assertNotIn("instances", capacity(self.d)["tools"]["odd"])
        m = metrics_of(self.d)
        self.assertEqual(m[("toolexecd_mcp_instances", None)], 0)
        self.assertNotIn(("toolexecd_tool_mcp_instances", "odd"), m)
        # the daemon serves on
        c = self.d.client()
        self.assertEqual(results(c, [("e", "echo", {"text": "on"})])["e"], text_ok("on"))
        c.close()

    def test_gone_at_daemon_stop(self):
        self.c.start_batch([{"id": "h", "name": "odd.hang", "arguments": {}}])
        harness.wait_token_present(self.token)
        self.d.stop()
        harness.assert_token_gone(self.token)

    def test_reload_leaves_it_to_its_batch(self):
        gate = self.d.path("gate")
        b = self.c.start_batch([{"id": "w", "name": "odd.write", "arguments": WRITE[2]},
                                {"id": "h", "name": "odd.hang", "arguments": {}}])
        harness.wait_token_present(self.token)
        self.d.add_tool(odd(self.token, timeout_ms=int(2000 * harness.SCALE),
                            mcp_server={"command": [PY, SRV, self.token, "gate=" + gate]}))
        os.kill(self.d.proc.pid, signal.SIGHUP)
        harness.deadline_wait(lambda: " reloaded " in self.d.stderr(), what="the reload")
        open(gate, "w").close()
        done = {e["id"]: e["result"] for e in self.c.recv_batch(b, timeout=60 * harness.SCALE)
                if e["event"] == "tool_execution_completed"}
        self.assertEqual(done["h"]["tool_error"]["reason"], "timeout")
        harness.assert_token_gone(self.token)
        self.assertIn("No such file", results(self.c, [READ])["r"]["error"])
        harness.assert_token_gone(self.token)


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Session)


class Ceiling(unittest.TestCase):
    def test_instances_bound_a_server(self):
        token = harness.new_token("mcpceiling")
        with harness.Daemon([odd(token, instances=1, timeout_ms=60000)]) as d:
            c1, c2 = d.client(), d.client()
            wait_listed(c1, "odd.hang")
            c1.start_batch([{"id": "h", "name": "odd.hang", "arguments": {}}])
            harness.wait_token_present(token)
            r = results(c2, [("e", "echo", {"text": "x"})])["e"]["tool_error"]
            self.assertEqual(r["reason"], "handler_exit")
            self.assertEqual(r["cause"]["instance_ceiling"]["limit"], 1)
            c1.close()
            harness.assert_token_gone(token)
            # its instance gone, the next batch gets one
            self.assertEqual(results(c2, [("e", "echo", {"text": "x"})])["e"], text_ok("x"))
            c2.close()


class Check(unittest.TestCase):
    def check(self, d):
        harness.require_env()
        tmp = tempfile.mkdtemp(prefix="te-mcpdefs-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        os.chmod(tmp, 0o755)
        with open(os.path.join(tmp, "odd.json"), "w") as f:
            json.dump(d, f)
        p = subprocess.run([harness.TOOLEXECD, "--check", "--tools", tmp],
                           capture_output=True, text=True, timeout=harness.WAIT)
        return p.returncode, p.stdout + p.stderr

    def test_bad_instances(self):
        for bad, says in (({"instances": 0}, "instances: expected an integer"),
                          ({"instances": "2"}, "instances: expected an integer"),
                          ({"instance": "call", "instances": 2},
                           "instances: only with \"instance\": \"session\"")):
            status, out = self.check(odd("t", **bad))
            self.assertNotEqual(status, 0, bad)
            self.assertIn(says, out, bad)

    def test_not_for_a_url_or_a_warm_server(self):
        # each call reaches those afresh: an instance of them is refused
        url = {"name": "odd", "mcp_server": {"url": "https://mcp.example.com/mcp"}}
        warm = {"name": "odd", "mcp_server": {"python_module": "mcp_server_standin",
                                              "start": "warm"}}
        for kind in ("session", "shared"):
            for d, says in ((url, "a url's server is reached afresh by each call"),
                            (warm, "each call of a warm server is a fresh fork")):
                status, out = self.check(dict(d, instance=kind))
                self.assertNotEqual(status, 0, (kind, d))
                self.assertIn("instance: \"%s\" only for a server run here" % kind, out)
                self.assertIn(says, out)

    def test_session_loads(self):
        status, out = self.check(odd("t", filesystem=harness.with_tree({})))
        self.assertEqual(status, 0, out)


if __name__ == "__main__":
    unittest.main()
