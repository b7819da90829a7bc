"""toolexec mcp --listen never waits on the daemon: its poll loop serves
every HTTP client while a daemon connection is slow.

- An event line that comes in pieces (a fake daemon dribbles a large
  result a few bytes at a time, then holds the rest of the line until the
  test lets it go): meanwhile GET /healthz and another client's session
  and call are answered, and the large result arrives whole once the line
  is.
- A daemon whose listen backlog is full (listen(0), no accept, filled):
  GET /ready answers at once, 503 with the reason, /healthz keeps
  answering, and a call that needs a new connection is refused with an
  error rather than hanging the front.
- A daemon that reads nothing: the front queues calls' requests up to its
  bound (16 MiB a connection), then answers each call past it with a typed
  error (data.reason "daemon_send_queue_full"); /healthz answers after
  each call sent.
- The real daemon with its default --max-client-batches (64): 100
  concurrent 2026-07-28 tools/call requests, which share one daemon
  connection, all succeed (the front holds the calls past 64 until a batch
  ends); with --max-client-batches 8 the front learns that bound from the
  daemon's capacity answer, and 20 calls all succeed.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import http.client
import json
import os
import select
import shutil
import socket
import tempfile
import threading
import time
import unittest

import harness
from harness import Daemon, WAIT, deadline_wait, worker_tool
from test_mcp_drain import get, running
from test_mcp_http import OLD, TOOLEXEC, Front, modern, post, rpc

BIG = 256 * 1024  # characters of the dribbled result
DRIBBLED = 700  # bytes of its line sent a few at a time before it is held
CALLS = 100


class FakeDaemon:
    """A Unix socket speaking just enough of toolexecd's protocol for the
    front: capacity, and a run answered with its completion; the tool "big"
    gets a large result whose line is dribbled, then held until release is
    set. Each connection is served by a thread of its own."""

    def __init__(self, testcase, path, backlog=16, reads=True):
        self.path = path
        self.reads = reads
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lsock.bind(path)
        self.lsock.listen(backlog)
        self.conns = []
        self.stop_r, self.stop_w = os.pipe()
        self.partial_sent = threading.Event()
        self.release = threading.Event()
        self.acceptor = threading.Thread(target=self.accept_loop, daemon=True)
        self.acceptor.start()
        testcase.addCleanup(self.close)

    def accept_loop(self):
        while True:
            ready, _, _ = select.select([self.lsock, self.stop_r], [], [])
            if self.stop_r in ready:
                return
            s, _ = self.lsock.accept()
            self.conns.append(s)
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    def stop_accepting(self):
        """No more accept(); the connections made so far closed."""
        os.write(self.stop_w, b"x")
        self.acceptor.join(WAIT)
        for s in self.conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.release.set()
        if self.acceptor.is_alive():
            self.stop_accepting()
        for c in self.conns:
            c.close()
        self.lsock.close()
        os.close(self.stop_r)
        os.close(self.stop_w)
        os.unlink(self.path)

    def serve(self, s):
        def send(ev):
            s.sendall(json.dumps(ev).encode() + b"\n")
        if not self.reads:
            # the answer to the core's own tools listing (the first request
            # on its connection; answers come in order), unread: its calls
            # are then sent, and the socket's buffer fills
            send({"event": "tools", "tools": []})
            self.release.wait(4 * WAIT)
            return
        try:
            for line in s.makefile("rb"):
                req = json.loads(line)
                if req.get("op") == "capacity":
                    send({"event": "capacity", "max_workers": 4, "free_workers": 4,
                          "running_calls": 0, "queued_calls": 0, "prepared_sandboxes": 0,
                          "shutting_down": False, "tools": {}})
                elif req.get("op") == "tools":
                    send({"event": "tools", "tools": []})
                elif req.get("op") == "run":
                    batch, name = req["batch"], req["calls"][0]["name"]
                    send({"event": "tool_execution_completed", "batch": batch, "call_id": "c0",
                          "result": {"ok": {"n": 1}}})
                    content = "y" * BIG if name == "big" else "small"
                    done = json.dumps({"event": "batch_completed", "batch": batch,
                                       "messages": [{"call_id": "c0", "content": content}]})
                    self.send_line(s, done.encode() + b"\n", name == "big")
        except (OSError, ValueError):
            pass  # the test closed it

    def send_line(self, s, line, dribble):
        if not dribble:
            s.sendall(line)
            return
        for i in range(0, DRIBBLED, 7):
            s.sendall(line[i:min(i + 7, DRIBBLED)])
            time.sleep(0.001)  # the pieces apart, as a slow writer's would be
        self.partial_sent.set()
        self.release.wait(4 * WAIT)
        s.sendall(line[DRIBBLED:])


def send_call(testcase, front, rid, name, arguments, timeout):
    """A 2026-07-28 tools/call on a connection of its own, its answer not read."""
    c = http.client.HTTPConnection("127.0.0.1", front.port, timeout=timeout)
    testcase.addCleanup(c.close)
    msg, h = modern(rid, "tools/call", {"name": name, "arguments": arguments}, name=name)
    h.update({"Content-Type": "application/json", "Accept": "application/json"})
    c.request("POST", "/mcp", body=json.dumps(msg).encode(), headers=h)
    return c


class DaemonIo(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        self.tmp = tempfile.mkdtemp(prefix="te-daemonio-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.sock = os.path.join(self.tmp, "fake.sock")

    def call_text(self, body, rid):
        self.assertEqual(body.get("id"), rid, body)
        result = body["result"]
        self.assertFalse(result.get("isError"), result)
        return result["content"][0]["text"]

    def test_a_partial_event_line_stalls_no_other_client(self):
        fake = FakeDaemon(self, self.sock)
        f = Front(self, self.sock)
        got = {}

        def big_call():
            c = http.client.HTTPConnection("127.0.0.1", f.port, timeout=4 * WAIT)
            try:
                msg, h = modern(1, "tools/call", {"name": "big", "arguments": {}}, name="big")
                r = post(c, msg, h)
                got["status"], got["body"] = r.status, json.loads(r.read())
            finally:
                c.close()
        t = threading.Thread(target=big_call)
        t.start()
        try:
            self.assertTrue(fake.partial_sent.wait(WAIT), "the fake daemon got no run")
            # the front has part of a line on the shared core's connection
            self.assertEqual(get(f, "/healthz"), (200, {"alive": True}))
            c = f.conn()
            r = post(c, rpc(0, "initialize", {"protocolVersion": OLD, "capabilities": {},
                                              "clientInfo": {"name": "t", "version": "1"}}))
            self.assertEqual(r.status, 200, r.read())
            r.read()
            s = {"Mcp-Session-Id": r.getheader("Mcp-Session-Id"), "MCP-Protocol-Version": OLD}
            post(c, rpc(None, "notifications/initialized"), s).read()
            r = post(c, rpc(2, "tools/call", {"name": "echo", "arguments": {}}), s)
            self.assertEqual(self.call_text(json.loads(r.read()), 2), "small")
            self.assertFalse(got, "the large result came before its line was whole")
        finally:
            fake.release.set()
            t.join(4 * WAIT)
        self.assertEqual(got.get("status"), 200, got)
        self.assertEqual(self.call_text(got["body"], 1), "y" * BIG)

    def test_b_full_backlog_fails_ready_fast(self):
        fake = FakeDaemon(self, self.sock, backlog=0)
        f = Front(self, self.sock)
        deadline_wait(lambda: get(f, "/ready")[0] == 200, what="/ready 200")
        fake.stop_accepting()
        fillers = []
        self.addCleanup(lambda: [s.close() for s in fillers])
        while True:  # a blocking connect() would now wait for ever
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            fillers.append(s)
            try:
                s.connect(self.sock)
            except BlockingIOError:
                break
            self.assertLess(len(fillers), 1000, "the backlog never filled")
        # the prober's connection is gone: a probe connects anew, refused
        deadline_wait(lambda: "backlog" in get(f, "/ready")[1].get("reason", ""),
                      what="/ready saying the backlog is full")
        st, body = get(f, "/ready")
        self.assertEqual((st, body["ready"]), (503, False), body)
        self.assertEqual(get(f, "/healthz"), (200, {"alive": True}))
        # a call needs a connection of its own: refused, the front goes on
        msg, h = modern(1, "tools/call", {"name": "echo", "arguments": {}}, name="echo")
        body = json.loads(post(f.conn(), msg, h).read())
        self.assertEqual(body["error"]["code"], -32603, body)
        self.assertEqual(get(f, "/healthz"), (200, {"alive": True}))
        self.assertIsNone(f.proc.poll())

    def test_d_a_daemon_that_reads_nothing(self):
        fake = FakeDaemon(self, self.sock, reads=False)
        f = Front(self, self.sock, "--drain-timeout", "0")  # the queued calls never end
        big = "z" * (3 << 20)  # a body under --max-body (4 MiB)
        conns = []
        for i in range(12):
            conns.append(send_call(self, f, i, "echo", {"x": big}, WAIT))
            self.assertEqual(get(f, "/healthz"), (200, {"alive": True}))
        # those past the bound are answered at once, the others wait: 16 MiB
        # and a socket's buffer (well under a call) take at most six
        def answered():
            return [i for i, c in enumerate(conns) if select.select([c.sock], [], [], 0)[0]]
        # under the sanitizers the front reads 36 MiB of bodies several
        # times slower (17 s seen at a timeout scale of 4)
        deadline_wait(lambda: len(answered()) >= len(conns) - 6, what="the calls past the bound",
                      timeout=WAIT * (4 if harness.SANITIZED else 1))
        refused = [(i, json.loads(conns[i].getresponse().read())) for i in answered()]
        for i, body in refused:
            self.assertEqual(body["id"], i, body)
            self.assertEqual(body["error"]["code"], -32603, body)
            self.assertEqual(body["error"]["data"]["reason"], "daemon_send_queue_full", body)
        self.assertGreaterEqual(refused[0][0], 3, refused)  # 16 MiB took at least four
        fake.release.set()
        self.assertIsNone(f.proc.poll())

    def test_c_more_calls_than_daemon_batches(self):
        self.calls_past_the_bound(CALLS, 64)

    def test_e_the_daemons_bound_learnt(self):
        self.calls_past_the_bound(20, 8, "--max-client-batches", "8")

    def calls_past_the_bound(self, ncalls, bound, *daemon_args):
        d = Daemon([worker_tool("wait", "wait-file", timeout_ms=120000)], args=daemon_args)
        self.addCleanup(d.stop, check=False)
        files = tempfile.mkdtemp(prefix="gates-", dir=d.tmp)
        os.chmod(files, 0o1777)  # workers, perhaps another user, wait on files here
        gate = os.path.join(files, "g")
        f = Front(self, d.sock, "--connections", str(ncalls + 16))
        # the daemon's capacity answer, where its bound is, has come
        deadline_wait(lambda: get(f, "/ready")[0] == 200, what="/ready 200")
        conns = [send_call(self, f, i, "wait", {"path": gate}, 8 * WAIT) for i in range(ncalls)]
        # the daemon runs the connection's limit of them, and a request on
        # the same core answered after them says the front read them all
        deadline_wait(lambda: running(d) >= bound, what="%d calls at the daemon" % bound)
        msg, h = modern(ncalls, "tools/list")
        r = post(f.conn(), msg, h)
        self.assertEqual(r.status, 200, r.read())
        r.read()
        open(gate, "w").close()
        failed = []
        for i, c in enumerate(conns):
            r = c.getresponse()
            body = json.loads(r.read())
            if r.status != 200 or "result" not in body or body["result"].get("isError"):
                failed.append((i, r.status, body))
        self.assertEqual(failed, [], "%d of %d calls failed" % (len(failed), ncalls))


if __name__ == "__main__":
    unittest.main()
