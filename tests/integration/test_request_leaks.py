"""A refused request is freed, whatever refuses it.
{"op":"tools","watch":<not a boolean>} returned before the request was freed
(LeakSanitizer: 2.96 MB per 2,000 such lines), so any client could grow the
daemon without bound.

A client sends each refused shape many times, every line padded so that a
leak is large, and reads the one request_error each line gets.
- Normal build: the daemon's VmRSS may not grow by more than a fraction of
  what the watch lines alone would leak (before the fix it grew by all of
  it, about 120 MB).
- Sanitized build (ASan's quarantine makes RSS meaningless): fewer rounds,
  and the daemon must stop with no LeakSanitizer report."""

import json
import unittest

import harness
from harness import Daemon, worker_tool

WATCH_PAD = "w" * 60000  # under server.c's LINE_KEEP_MAX: no buffer churn
PAD = "p" * 4000

# (line, reason): each gets exactly one request_error with that reason
SHAPES = [
    ({"op": "tools", "watch": 1, "pad": WATCH_PAD}, "invalid_request"),
    ({"op": "tools", "watch": "yes", "pad": WATCH_PAD}, "invalid_request"),
    ({"op": "tools", "format": "nope", "pad": PAD}, "invalid_request"),
    ({"op": "run", "calls": [{"id": "a", "name": "echo"}], "pad": PAD}, "invalid_request"),
    ({"op": "cancel", "batch": "no-such", "pad": PAD}, "unknown_batch"),
    ({"op": "decide", "batch": "x", "pad": PAD}, "invalid_request"),
    ({"op": "tail", "tools": "x", "pad": PAD}, "invalid_request"),
    ({"op": "dance", "pad": PAD}, "unknown_op"),
    ([PAD], "not_an_object"),
    ('{"pad":"%s"' % PAD, "invalid_json"),
]
WATCH_BYTES = sum(len(WATCH_PAD) for line, _ in SHAPES if "watch" in line)


def vm_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


class RequestLeaks(unittest.TestCase):
    def setUp(self):
        harness.require_env()

    def send_rounds(self, c, rounds):
        data = b"".join((s if isinstance(s, str) else json.dumps(s)).encode() + b"\n"
                        for s, _ in SHAPES)
        for _ in range(rounds):
            c.send_raw(data)
            for _, reason in SHAPES:
                ev = c.recv()
                self.assertEqual((ev["event"], ev.get("type"), ev.get("reason")),
                                 ("error", "request_error", reason), ev)

    def test_refused_requests_are_freed(self):
        d = Daemon(tools=[worker_tool("echo", "echo")])
        try:
            c = d.client()
            self.send_rounds(c, 20)  # the allocator's pools warm
            before = vm_rss_kb(d.proc.pid)
            rounds = 50 if harness.SANITIZED else 1000
            self.send_rounds(c, rounds)
            after = vm_rss_kb(d.proc.pid)
            # still serving, and the watch lines set nothing
            res = c.run([{"id": "u", "name": "echo", "arguments": {"x": 1}}])
            self.assertTrue(res.ok)
        except BaseException:
            d.kill()
            d.stop(check=False)
            raise
        leaked_kb = rounds * WATCH_BYTES // 1024
        print("VmRSS %d kB -> %d kB over %d rounds of %d lines (the watch lines carry %d kB)"
              % (before, after, rounds, len(SHAPES), leaked_kb))
        # exit 0 and no sanitizer report (LeakSanitizer's runs at exit) or
        # DaemonFailed with the daemon's stderr
        d.stop()
        if not harness.SANITIZED:
            self.assertLess(after - before, leaked_kb // 4,
                            "the daemon's RSS grew by %d kB while refusing requests"
                            % (after - before))


if __name__ == "__main__":
    harness.main()
