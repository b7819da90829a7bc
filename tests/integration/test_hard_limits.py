"""Client-side resource bounds: queued work per connection and per uid, a
disconnecting client's queue cancelled in slices, a client that never reads,
unfinished request lines of all clients, connections per uid, the idle
timeout and the open-files limit.

Memory is read from /proc/PID/status: VmHWM (the peak) against the
promise, so no sampling moment matters."""

import json
import os
import resource
import subprocess
import sys
import unittest

import harness
from harness import Daemon, worker_tool, WAIT

MIB = 1 << 20


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for %d" % (key, pid))


def live_memory_env():
    """ASan keeps freed memory resident in its quarantine (256 MiB); the
    bounds here are about live memory."""
    opts = [o for o in os.environ.get("ASAN_OPTIONS", "").split(":") if o]
    return {"ASAN_OPTIONS": ":".join(opts + ["quarantine_size_mb=0"])}


def stats(client):
    client.send({"op": "stats"})
    return client.recv_for(lambda e: e.get("event") == "stats")


def errors_of(client, batch):
    return [e for e in client.log if e.get("event") == "error" and e.get("batch") == batch]


class QueuedWork(unittest.TestCase):
    """Batches per connection and calls per uid are bounded; beyond
    them a run is refused like --max-batch-calls refuses, naming the limit."""

    def test_flood_of_batches_is_refused_beyond_the_caps(self):
        tools = [worker_tool("wait", "wait-file"), worker_tool("echo", "echo")]
        args = ["--max-client-batches", "4", "--max-queued-calls", "50",
                "--max-batch-calls", "20", "--max-workers", "2"]
        with Daemon(tools, args) as d:
            release = d.path("release")
            block = {"name": "wait", "arguments": {"path": release}}
            a = d.client()
            for i in range(10):
                a.start_batch([dict(block, id="c")], batch="f%d" % i)
            # f0..f3 run or wait; f4..f9 are refused with the limit named
            for i in range(4, 10):
                ev = a.recv_for(lambda e, b="f%d" % i: e.get("batch") == b)
                self.assertEqual((ev["event"], ev.get("type"), ev.get("reason")),
                                 ("error", "request_error", "invalid_request"), ev)
                self.assertIn("--max-client-batches", ev["message"])
            # calls per uid: this uid holds 4; 40 more fit in 50, 20 more do not,
            # whichever connection of the uid asks
            b = d.client()
            b.start_batch([dict(block, id="q%d" % k) for k in range(20)], batch="q1")
            b.start_batch([dict(block, id="q%d" % k) for k in range(20)], batch="q2")
            stats(b)  # answered after q1 and q2 were taken
            c = d.client()
            c.start_batch([dict(block, id="q%d" % k) for k in range(20)], batch="q3")
            ev = c.recv_for(lambda e: e.get("batch") == "q3")
            self.assertEqual((ev["event"], ev.get("reason")), ("error", "invalid_request"), ev)
            self.assertIn("--max-queued-calls", ev["message"])
            self.assertIn("uid 0", ev["message"])
            # the connection stays usable, and the room comes back as batches end
            self.assertEqual(stats(c)["batches"]["running"], 6)
            with open(release, "w"):
                pass
            for i in range(4):
                a.finish_batch("f%d" % i)
            b.finish_batch("q1")
            b.finish_batch("q2")
            self.assertEqual(errors_of(a, "f0") + errors_of(b, "q1") + errors_of(b, "q2"), [])
            res = c.run([{"id": "e%d" % k, "name": "echo", "arguments": {"k": k}}
                         for k in range(20)], batch="q4")
            self.assertEqual(res.result("e3"), {"ok": {"k": 3}})


class DisconnectInSlices(unittest.TestCase):
    """A client leaving with a huge queue does not hold the loop
    while its calls are cancelled: another client is answered while the
    cancelled batches are still being settled."""

    BATCHES, CALLS = 64, 1024

    def test_other_client_served_while_a_big_queue_is_cancelled(self):
        tools = [worker_tool("wait", "wait-file"), worker_tool("echo", "echo")]
        args = ["--max-workers", "1", "--max-queued-calls", "100000",
                "--max-client-batches", str(self.BATCHES)]
        with Daemon(tools, args) as d:
            never = d.path("never")
            a = d.client()
            for i in range(self.BATCHES):
                a.start_batch([{"id": "c%d" % k, "name": "wait", "arguments": {"path": never}}
                               for k in range(self.CALLS)], batch="big%d" % i)
            b = d.client()
            total = self.BATCHES * self.CALLS
            harness.deadline_wait(lambda: stats(b)["workers"]["queued"] == total - 1,
                                  what="every call of the flood queued")
            a.close()
            # The first answer after the daemon took the hang-up (its worker
            # is killed at once) comes while the queue is still being settled.
            st = stats(b)
            while st["workers"]["running"]:  # polled back to back: each answer is an event
                st = stats(b)
            self.assertGreater(st["batches"]["running"], 0,
                               "the whole queue was cancelled before another client was answered")
            self.assertEqual(st["workers"]["queued"], 0, st)
            res = b.run([{"id": "e", "name": "echo", "arguments": {"x": 1}}], batch="quick")
            self.assertEqual(res.result("e"), {"ok": {"x": 1}})
            harness.deadline_wait(lambda: stats(b)["batches"]["running"] == 0,
                                  what="the cancelled batches completed")


class NonReadingClient(unittest.TestCase):
    """A client that never reads costs about 1 MiB of queued events
    plus one result per running call, even when every worker has its whole
    result in its pipe when it exits."""

    CALLS, CONCURRENCY, SIZE = 128, 16, MIB - 8192

    def test_results_left_in_the_pipe_while_the_client_is_not_reading(self):
        with Daemon([worker_tool("fill", "fill-pipe")], env=live_memory_env()) as d:
            probe = d.client()
            stats(probe)
            before = status_kib(d.proc.pid, "VmHWM")
            slow = d.client()
            slow.start_batch([{"id": "c%d" % i, "name": "fill", "arguments": {"n": self.SIZE}}
                              for i in range(self.CALLS)], batch="flood",
                             max_concurrency=self.CONCURRENCY, tool_timeout=500)
            harness.deadline_wait(lambda: stats(probe)["batches"]["served"] == 1,
                                  timeout=WAIT * 4, what="the non-reading client's batch done")
            grown = status_kib(d.proc.pid, "VmHWM") - before
            # the promise: 1 MiB queued + one result (~1 MiB, held about three
            # times while it is parsed and encoded) per running call, + slack
            bound = (1 + self.CONCURRENCY * 3 + 16) * 1024
            self.assertLess(grown, bound, "daemon peak RSS grew by %d KiB (bound %d KiB) for "
                            "a client that never reads" % (grown, bound))
            # reading now, everything owed arrives: each call either its whole
            # result or a timeout saying its client was not reading
            events = slow.finish_batch("flood", timeout=WAIT * 2)
            done = [e for e in events if e["event"] == "tool_execution_completed"]
            self.assertEqual(len(done), self.CALLS)
            paused = 0
            for e in done:
                r = e["result"]
                if "ok" in r:
                    self.assertEqual(len(r["ok"]), self.SIZE)
                else:
                    self.assertEqual(r["tool_error"]["reason"], "timeout", r)
                    paused += "client was not reading" in r["tool_error"]["message"]
            self.assertGreater(paused, 0)


class ShutdownNotHeld(unittest.TestCase):
    """A client that never reads does not keep the daemon from exiting: once
    the batches are cancelled, its unread events are dropped after a grace."""

    def test_sigterm_with_a_client_that_never_reads(self):
        d = Daemon([worker_tool("big", "big-output")], ["--shutdown-timeout", "1"])
        self.addCleanup(d.stop, check=False)
        slow = d.client()
        slow.start_batch([{"id": "c%d" % i, "name": "big", "arguments": {"n": MIB}}
                          for i in range(8)], batch="flood", max_concurrency=8)
        harness.deadline_wait(lambda: "pausing its workers" in d.stderr(),
                              what="the daemon pausing the slow client's workers")
        d.proc.terminate()
        self.assertEqual(d.proc.wait(timeout=WAIT), 0)
        self.assertIn("unread at shutdown; closing", d.stderr())


class UnfinishedLines(unittest.TestCase):
    """Unfinished request lines of all clients together are bounded
    (64 MiB by default): the client holding the most loses its line with an
    error naming the limit; its connection and every other client work."""

    CLIENTS, LINE = 12, 16 * MIB - 1

    def test_many_huge_unfinished_lines(self):
        with Daemon([worker_tool("echo", "echo")], env=live_memory_env()) as d:
            probe = d.client()
            stats(probe)
            before = status_kib(d.proc.pid, "VmHWM")
            clients = [d.client() for _ in range(self.CLIENTS)]
            chunk = b"x" * MIB
            sent = 0
            while sent < self.LINE:
                n = min(MIB, self.LINE - sent)
                for c in clients:
                    c.send_raw(chunk[:n])
                sent += n
            # a normal client meanwhile
            self.assertTrue(probe.run([{"id": "e", "name": "echo"}], batch="n1").ok)
            for c in clients:
                c.send_raw(b"\n")
                c.send({"op": "tools"})
            dropped = 0
            for c in clients:
                first = c.recv()
                self.assertEqual(first["event"], "error", first)
                if first["reason"] == "request_too_long":
                    self.assertIn("--max-request-buffer", first["message"])
                    dropped += 1
                else:  # a line that fitted: handled, and it is not JSON
                    self.assertEqual(first["reason"], "invalid_json", first)
                self.assertEqual(c.recv()["event"], "tools")
            grown = status_kib(d.proc.pid, "VmHWM") - before
            self.assertGreaterEqual(dropped, self.CLIENTS - 4)
            bound = (64 + 24) * 1024  # the budget, + one buffer being grown, + slack
            self.assertLess(grown, bound, "daemon peak RSS grew by %d KiB for %d unfinished "
                            "lines" % (grown, self.CLIENTS))
            self.assertTrue(probe.run([{"id": "e", "name": "echo"}], batch="n2").ok)


# A client run as another user: opens N connections, sends a tools request on
# each, prints the first reply of each (or null at EOF) as one JSON line, then
# holds the connections until its stdin closes.
AS_USER = r"""
import json, socket, sys
path, n = sys.argv[1], int(sys.argv[2])
socks, out = [], []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    try:
        s.sendall(b'{"op":"tools"}\n')
    except OSError:
        pass
    buf = b""
    while b"\n" not in buf:
        try:
            chunk = s.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            break
        buf += chunk
    out.append(json.loads(buf.split(b"\n")[0]) if b"\n" in buf else None)
    socks.append(s)
print(json.dumps(out), flush=True)
sys.stdin.read()
"""


# one that nobody can run (ours may live under /root)
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


@unittest.skipUnless(os.geteuid() == 0, "needs root (to run a client as nobody)")
class Connections(unittest.TestCase):
    """Connections per uid, the idle timeout, the open-files limit."""

    def test_one_uid_beyond_its_share_is_refused_root_still_connects(self):
        args = ["--max-clients-per-uid", "3", "--socket-mode", "0666"]
        with Daemon([worker_tool("echo", "echo")], args) as d:
            p = subprocess.Popen([PYTHON, "-c", AS_USER, d.sock, "4"], user=65534,
                                 group=65534, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            try:
                replies = json.loads(p.stdout.readline())
                self.assertEqual([r and r["event"] for r in replies[:3]], ["tools"] * 3)
                last = replies[3]
                self.assertEqual((last["event"], last["reason"]),
                                 ("error", "too_many_clients"), last)
                self.assertIn("uid 65534", last["message"])
                self.assertIn("--max-clients-per-uid", last["message"])
                # while nobody holds its three, root connects and is served
                self.assertTrue(d.client().run([{"id": "e", "name": "echo"}]).ok)
            finally:
                p.stdin.close()
                p.wait()

    def test_idle_connection_is_closed_busy_one_is_not(self):
        tools = [worker_tool("wait", "wait-file"), worker_tool("echo", "echo")]
        with Daemon(tools, ["--idle-timeout", "2"]) as d:
            release = d.path("release")
            busy = d.client()
            busy.start_batch([{"id": "w", "name": "wait", "arguments": {"path": release}}],
                             batch="long")
            busy.recv_for(lambda e: e.get("event") == "tool_execution_started")
            idle = d.client()
            ev = idle.recv(timeout=WAIT)
            self.assertEqual((ev["event"], ev.get("type"), ev.get("reason")),
                             ("error", "request_error", "idle_timeout"), ev)
            self.assertIn("--idle-timeout", ev["message"])
            self.assertIsNone(idle.recv_or_eof(), "the idle connection stayed open")
            # the one with a batch running was connected longer, and is kept
            with open(release, "w"):
                pass
            events = busy.finish_batch("long")
            self.assertEqual(events[-1]["event"], "batch_completed")
            self.assertTrue(busy.run([{"id": "e", "name": "echo"}]).ok)

    def test_soft_open_files_limit_raised_workers_keep_theirs(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard <= 256:
            self.skipTest("hard open files limit too low")
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        try:
            d = Daemon([worker_tool("files", "open-files")])
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        with d:
            with open("/proc/%d/limits" % d.proc.pid) as f:
                line = [l for l in f if l.startswith("Max open files")][0].split()
            self.assertEqual(line[3], line[4], "soft limit not raised: " + " ".join(line))
            self.assertIn("soft limit raised from 256", d.stderr())
            res = d.client().run([{"id": "f", "name": "files"}])
            self.assertEqual(res.result("f")["ok"]["nofile"], 256)


if __name__ == "__main__":
    unittest.main()
