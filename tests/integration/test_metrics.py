"""Metrics: {"op": "metrics"} and --metrics-listen's GET /metrics.

The text is parsed by a real Prometheus parser (promtool check metrics, from
Debian's prometheus package) and its samples are checked against the calls
the test ran; the HTTP listener runs on the daemon's loop, so a scraper that
stalls mid-request must not hold up a batch.
"""

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Daemon, WAIT, deadline_wait, require_env, worker_tool  # noqa: E402

PROMTOOL = shutil.which("promtool")

TOOLS = [
    worker_tool("echo", "echo"),
    worker_tool("fail", "error"),
    worker_tool("crash", "segv"),
    worker_tool("slow", "sleep", timeout_ms=200),
    worker_tool("hang", "sleep"),
    worker_tool("probe", "sysprobe"),
]

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def samples(text):
    """{(name, frozenset(labels)): value} of the exposition's samples."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(s, name, **labels):
    return s.get((name, frozenset(labels.items())))


def metrics_port(d):
    line = deadline_wait(lambda: re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics",
                                           d.stderr()), what="the metrics log line")
    return int(line.group(1))


def http_get(port, path="/metrics", method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type"), r.read().decode()
    finally:
        c.close()


def promtool_check(test, text):
    if not PROMTOOL:
        raise unittest.SkipTest("promtool (Debian package prometheus) is not installed")
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=WAIT)
    test.assertEqual(p.returncode, 0, "promtool check metrics:\n" + p.stdout.decode() +
                     "\n--- text ---\n" + text)


class MetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_env()
        cls.d = Daemon(TOOLS, ["--metrics-listen", "127.0.0.1:0"])
        cls.port = metrics_port(cls.d)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def metrics_op(self, c):
        c.send({"op": "metrics"})
        ev = c.recv()
        self.assertEqual(ev["event"], "metrics", ev)
        self.assertTrue(ev["content_type"].startswith("text/plain; version=0.0.4"), ev)
        return ev["text"]

    def test_1_counts_parse_and_agree(self):
        c = self.d.client()
        r = c.run([{"id": "e1", "name": "echo", "arguments": {"a": 1}},
                   {"id": "e2", "name": "echo", "arguments": {}},
                   {"id": "f1", "name": "fail", "arguments": {}},
                   {"id": "c1", "name": "crash", "arguments": {}},
                   {"id": "s1", "name": "slow", "arguments": {}}])
        self.assertEqual(r.tool_error("c1")["reason"], "handler_exit")
        self.assertEqual(r.tool_error("s1")["reason"], "timeout")
        status, ctype, text = http_get(self.port)
        self.assertEqual(status, 200)
        self.assertEqual(ctype, "text/plain; version=0.0.4; charset=utf-8")
        promtool_check(self, text)
        s = samples(text)
        self.assertEqual(value(s, "toolexecd_calls_total", tool="echo", outcome="ok"), 2)
        self.assertEqual(value(s, "toolexecd_calls_total", tool="echo", outcome="error"), 0)
        self.assertEqual(value(s, "toolexecd_calls_total", tool="fail", outcome="error"), 1)
        self.assertEqual(value(s, "toolexecd_calls_total", tool="crash", outcome="tool_error",
                               reason="handler_exit"), 1)
        self.assertEqual(value(s, "toolexecd_calls_total", tool="slow", outcome="tool_error",
                               reason="timeout"), 1)
        for tool, n in (("echo", 2), ("fail", 1), ("crash", 1), ("slow", 1)):
            for h in ("toolexecd_call_duration_seconds", "toolexecd_call_queued_seconds"):
                self.assertEqual(value(s, h + "_count", tool=tool), n, (h, tool))
                self.assertEqual(value(s, h + "_bucket", tool=tool, le="+Inf"), n, (h, tool))
            self.assertEqual(value(s, "toolexecd_spawn_duration_seconds_count", tool=tool), n)
        # the timed-out call took at least its 200 ms timeout
        self.assertGreaterEqual(value(s, "toolexecd_call_duration_seconds_sum", tool="slow"), 0.2)
        self.assertEqual(value(s, "toolexecd_call_duration_seconds_bucket", tool="slow",
                               le="0.1"), 0)
        self.assertEqual(value(s, "toolexecd_batches_total"), 1)
        self.assertEqual(value(s, "toolexecd_clients"), 1)
        self.assertEqual(value(s, "toolexecd_workers_running"), 0)
        self.assertEqual(value(s, "toolexecd_calls_queued"), 0)
        self.assertEqual(value(s, "toolexecd_tail_lagged_total"), 0)
        # denials by kind: the family is there, without samples until
        # confinement reports denials
        self.assertIn("# TYPE toolexecd_denials_total counter", text)
        # the socket op gives the same text (the gauges as they stand)
        op = self.metrics_op(c)
        promtool_check(self, op)
        so = samples(op)
        for k, v in s.items():
            if k[0].startswith("toolexecd_calls_total") or k[0].endswith("_count"):
                self.assertEqual(so.get(k), v, k)

    def test_2_gauges_while_running(self):
        c = self.d.client()
        c.start_batch([{"id": "w", "name": "hang", "arguments": {}}], batch="gauge")
        c.recv_for(lambda e: e.get("event") == "tool_execution_started")
        s = samples(http_get(self.port)[2])
        self.assertEqual(value(s, "toolexecd_workers_running"), 1)
        self.assertEqual(value(s, "toolexecd_batches_running"), 1)
        c.send({"op": "cancel", "batch": "gauge"})
        c.finish_batch("gauge")

    def test_3_stalled_scraper_does_not_block_the_loop(self):
        # half a request line, never finished: MHD waits for the rest
        # without the loop waiting
        s = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)
        try:
            s.sendall(b"GET /metr")
            c = self.d.client()
            r = c.run([{"id": "x", "name": "echo", "arguments": {"k": "v"}}])
            self.assertEqual(r.result("x"), {"ok": {"k": "v"}})
            status, _, text = http_get(self.port)
            self.assertEqual(status, 200)
            self.assertIn("toolexecd_calls_total", text)
        finally:
            s.close()

    def test_5_denials_by_kind(self):
        # two system calls the default filter refuses, each a distinct
        # entry of the call's "denied": two syscall denials counted
        before = value(samples(http_get(self.port)[2]), "toolexecd_denials_total",
                       kind="syscall") or 0
        c = self.d.client()
        r = c.run([{"id": "p", "name": "probe", "arguments": {"try": ["bpf", "keyctl"]}}])
        done = [e for e in r.events if e.get("event") == "tool_execution_completed"][0]
        self.assertEqual(len(done["denied"]), 2, done)
        text = http_get(self.port)[2]
        promtool_check(self, text)
        # (a sanitized testworker's LeakSanitizer may add its own ptrace at
        # exit, which the harness leaves out of the event but the daemon counts)
        self.assertIn(value(samples(text), "toolexecd_denials_total", kind="syscall") - before,
                      (2, 3) if harness.LSAN_WORKER else (2,))

    def test_4_other_paths_and_methods(self):
        status, _, body = http_get(self.port, "/")
        self.assertEqual(status, 404)
        self.assertIn("/metrics", body)
        status, _, _ = http_get(self.port, "/metrics", "POST")
        self.assertEqual(status, 405)
        status, _, body = http_get(self.port, "/metrics", "HEAD")
        self.assertEqual(status, 200)


class ListenTest(unittest.TestCase):
    def setUp(self):
        require_env()

    def listening_tcp_inodes(self):
        inodes = set()
        for f in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(f) as fh:
                    next(fh)
                    for line in fh:
                        cols = line.split()
                        if cols[3] == "0A":  # LISTEN
                            inodes.add(cols[9])
            except FileNotFoundError:
                pass
        return inodes

    def daemon_sockets(self, d):
        out = set()
        fd_dir = "/proc/%d/fd" % d.proc.pid
        for fd in os.listdir(fd_dir):
            try:
                t = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            m = re.match(r"socket:\[(\d+)\]", t)
            if m:
                out.add(m.group(1))
        return out

    def test_off_by_default(self):
        with Daemon(TOOLS) as d:
            c = d.client()
            c.run([{"id": "x", "name": "echo", "arguments": {}}])
            self.assertFalse(self.daemon_sockets(d) & self.listening_tcp_inodes())
            self.assertNotIn("metrics on", d.stderr())
            # the socket op works without the listener
            c.send({"op": "metrics"})
            ev = c.recv()
            self.assertEqual(ev["event"], "metrics")
            self.assertIn('toolexecd_calls_total{tool="echo",outcome="ok"} 1', ev["text"])

    def test_lagged_subscriber_is_counted(self):
        tools = TOOLS + [worker_tool("big", "big-output")]
        with Daemon(tools) as d:
            slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.addCleanup(slow.close)
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            slow.connect(d.sock)
            slow.sendall(b'{"op":"tail"}\n')
            f = slow.makefile("rb")
            slow.settimeout(WAIT)
            self.assertEqual(json.loads(f.readline())["event"], "tailing")
            c = d.client()
            # events just under the 128 KiB a subscriber gets whole, ~3 MiB
            # unread: far past its 256 KiB queue
            c.run([{"id": "c%d" % i, "name": "big", "arguments": {"n": 100 * 1024}}
                   for i in range(16)], batch="flood", timeout=WAIT * 2)
            while True:
                e = json.loads(f.readline())
                if e["event"] == "lagged":
                    break
            c.send({"op": "metrics"})
            s = samples(c.recv()["text"])
            self.assertGreaterEqual(value(s, "toolexecd_tail_lagged_total"), 1)
            self.assertGreaterEqual(value(s, "toolexecd_tail_dropped_lines_total"), e["dropped"])
            self.assertEqual(value(s, "toolexecd_tail_subscribers"), 1)
            f.close()
            slow.close()  # before the daemon stops: it has unread lines

    def test_ipv6_loopback(self):
        if not socket.has_ipv6 or not os.path.exists("/proc/net/tcp6"):
            self.skipTest("no IPv6")
        with Daemon(TOOLS, ["--metrics-listen", "[::1]:0"]) as d:
            m = deadline_wait(lambda: re.search(r"metrics on http://\[::1\]:(\d+)/metrics",
                                                d.stderr()), what="the metrics log line")
            c = http.client.HTTPConnection("::1", int(m.group(1)), timeout=WAIT)
            c.request("GET", "/metrics")
            self.assertEqual(c.getresponse().status, 200)
            c.close()

    def test_bad_address_is_refused_by_name(self):
        for bad in ("localhost", "nonsense:80", "127.0.0.1:99999", "127.0.0.1:"):
            d = Daemon(TOOLS, ["--metrics-listen", bad], start=False)
            try:
                p = d.spawn()
                p.wait(timeout=WAIT)
                self.assertNotEqual(p.returncode, 0, bad)
                self.assertIn("--metrics-listen", d.stderr(), bad)
            finally:
                d.kill()
                d.stop(check=False)

    def test_port_in_use(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        try:
            d = Daemon(TOOLS, ["--metrics-listen", "127.0.0.1:%d" % s.getsockname()[1]],
                       start=False)
            try:
                p = d.spawn()
                p.wait(timeout=WAIT)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn("cannot listen", d.stderr())
            finally:
                d.kill()
                d.stop(check=False)
        finally:
            s.close()


if __name__ == "__main__":
    unittest.main()
