"""The metrics endpoint against the daemon's own calls and idle connections.

A call with the host's network ("network": true, the default) can reach
127.0.0.1 like any process: it must not read /metrics (the daemon refuses
connections whose socket a call made). Idle connections of one user must not
lock out a scraper of another."""

import json
import os
import re
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Daemon, deadline_wait, nobody_daemon  # noqa: E402

from test_metrics import http_get  # noqa: E402

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# Plain protocol: the arguments on stdin, the result on stdout. GET /metrics
# as any client would, and say what came back.
SCRAPE = r"""
import json, socket, sys
port = json.loads(sys.stdin.readline())["port"]
out = {"read": ""}
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    out["read"] = data.decode("utf-8", "replace")
except OSError as e:
    out["error"] = type(e).__name__
print(json.dumps(out))
"""

SCRAPER = {"name": "scrape", "description": "GET /metrics from inside a call",
           "schema": {"type": "object"}, "command": [PYTHON, "-c", SCRAPE],
           "protocol": "plain", "network": True}


def port_of(d):
    m = deadline_wait(lambda: re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics",
                                        d.stderr()), what="the metrics log line")
    return int(m.group(1))


def scrape_from_a_call(d, port):
    res = d.client().run([{"id": "s", "name": "scrape", "arguments": {"port": port}}])
    r = res.result("s")
    assert set(r) == {"ok"}, r
    out = r["ok"]
    return json.loads(out) if isinstance(out, str) else out


class CallsCannotScrape(unittest.TestCase):
    def check(self, d):
        port = port_of(d)
        out = scrape_from_a_call(d, port)
        self.assertNotIn("toolexecd_", out["read"], "a call read the metrics: %r" % out)
        self.assertNotIn("200 OK", out["read"], out)
        # the test's own scrape (root, not a call) still works
        status, _, text = http_get(port)
        self.assertEqual(status, 200)
        self.assertIn("toolexecd_calls_total", text)

    def test_root_daemon(self):
        with Daemon([SCRAPER], ["--metrics-listen", "127.0.0.1:0"]) as d:
            self.check(d)

    def test_root_daemon_one_user_for_calls(self):
        with Daemon([SCRAPER], ["--metrics-listen", "127.0.0.1:0", "--call-uids", "no"]) as d:
            self.check(d)

    @unittest.skipUnless(os.geteuid() == 0, "needs root (a tool that names its user)")
    def test_tool_with_a_named_user(self):
        # its calls run as that user, neither the workers' default user nor
        # one of --call-uids: refused all the same
        tool = dict(SCRAPER, user="daemon")
        with Daemon([tool], ["--metrics-listen", "127.0.0.1:0"]) as d:
            self.check(d)

    @unittest.skipUnless(os.geteuid() == 0, "needs root (to drop to nobody)")
    def test_unprivileged_daemon(self):
        d = nobody_daemon([SCRAPER], ["--metrics-listen", "127.0.0.1:0"])
        try:
            self.check(d)
        finally:
            d.stop()


# Open N connections to the port as uid nobody and hold them, idle, until
# stdin closes; say READY once all are open.
HOLD = r"""
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
print("READY", flush=True)
sys.stdin.read()
"""


@unittest.skipUnless(os.geteuid() == 0, "needs root (to hold connections as nobody)")
class IdleConnections(unittest.TestCase):
    def test_idle_connections_of_one_user_do_not_lock_out_the_scraper(self):
        with Daemon([], ["--metrics-listen", "127.0.0.1:0"]) as d:
            port = port_of(d)
            p = subprocess.Popen([PYTHON, "-c", HOLD, str(port), "48"], user=65534, group=65534,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            try:
                self.assertEqual(p.stdout.readline().strip(), b"READY")
                # the daemon has seen all 48 before it answers a request
                # of its own socket: each accept is on the same loop
                d.client().tools()
                status, _, text = http_get(port)
                self.assertEqual(status, 200)
                self.assertIn("toolexecd_calls_total", text)
            finally:
                p.stdin.close()
                p.wait()

    def test_metrics_timeout_is_checked(self):
        for bad in ("0", "x", "3601"):
            d = Daemon([], args=["--metrics-listen", "127.0.0.1:0", "--metrics-timeout", bad],
                       start=False)
            try:
                d.spawn()
                self.assertEqual(d.proc.wait(timeout=harness.WAIT), 2)
                self.assertIn("--metrics-timeout: expected seconds", d.stderr())
            finally:
                d.stop(check=False)


if __name__ == "__main__":
    unittest.main()
