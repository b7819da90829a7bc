"""One client's work must not hold the loop so long that no other client is
served.

A hostile batch of many calls, each leaving 1 MB in a stdout pipe it grew
to 1 MiB before exiting, used to keep the daemon inside its SIGCHLD
callback: every exit was handled there, the next calls started there, and
they exited before libuv had read the signal pipe dry. A second client's
trivial call then waited for the whole batch.

Ordering, not timing: every hostile worker appends "start PID" to a log
file as it starts; once the second client has its result, the test appends
"probe-done". Hostile workers that start after that line prove that the
second client was served while the hostile batch was still running.
"""

import json
import os
import socket
import threading
import unittest

import harness
from harness import Daemon, worker_tool, WAIT

CALLS = 200
BYTES = 1000000
CONCURRENCY = 16


class RawReader(threading.Thread):
    """Reads the hostile client's events as fast as they come (each up to
    ~1 MB), keeping only counts and the terminal event."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT * 8)
        self.sock.connect(path)
        self.completed = 0
        self.first_completed = threading.Event()
        self.terminal = None
        self.error = None

    def send(self, obj):
        self.sock.sendall(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def run(self):
        buf = bytearray()
        scan = 0
        try:
            while self.terminal is None:
                i = buf.find(b"\n", scan)
                if i < 0:
                    scan = len(buf)
                    chunk = self.sock.recv(1 << 20)
                    if not chunk:
                        raise AssertionError("hostile connection closed early")
                    buf += chunk
                    continue
                line = bytes(buf[:i])
                del buf[:i + 1]
                scan = 0
                head = line[:100]
                if b'"event":"tool_execution_completed"' in head:
                    self.completed += 1
                    self.first_completed.set()
                elif b'"event":"batch_completed"' in head or b'"event":"error"' in head:
                    self.terminal = json.loads(line)
        except BaseException as e:  # reported by the test
            self.error = e
        finally:
            self.first_completed.set()
            self.sock.close()


class HardStall(unittest.TestCase):

    def test_big_exits_leave_other_clients_served(self):
        # slots to spare beside the hostile batch's 16: the probe never
        # waits for a slot, only for the loop
        d = Daemon(tools=[worker_tool("bigexit", "big-exit"), worker_tool("echo", "echo")],
                   args=["--max-workers", str(CONCURRENCY + 8)])
        self.addCleanup(d.stop)
        # made here, writable by all: each call runs as a uid of its own
        log = os.path.join(d.shared_dir("log"), "starts")
        with open(log, "w"):
            os.chmod(log, 0o666)

        hostile = RawReader(d.sock)
        calls = [{"id": "h%d" % i, "name": "bigexit", "arguments": {"n": BYTES, "log": log}}
                 for i in range(CALLS)]
        hostile.start()
        hostile.send({"op": "run", "batch": "hostile", "calls": calls,
                      "max_concurrency": CONCURRENCY, "max_content_bytes": 1000})
        # the first exit has been handled: exits are under way
        self.assertTrue(hostile.first_completed.wait(WAIT * 4), "no hostile call completed")
        self.assertIsNone(hostile.error)

        probe = d.client()
        res = probe.run([{"id": "p", "name": "echo", "arguments": {"x": 1}}], batch="probe",
                        timeout=WAIT * 8)
        self.assertEqual(res.result("p"), {"ok": {"x": 1}})
        with open(log, "a") as f:
            f.write("probe-done\n")

        hostile.join(WAIT * 16)
        self.assertFalse(hostile.is_alive(), "the hostile batch did not finish")
        self.assertIsNone(hostile.error)
        self.assertEqual(hostile.terminal["event"], "batch_completed", hostile.terminal)
        self.assertEqual(hostile.completed, CALLS)
        msgs = hostile.terminal["messages"]
        self.assertEqual([m["tool_call_id"] for m in msgs], [c["id"] for c in calls])
        # each call was hostile indeed: its pipe grew, its result was whole
        # in it at the exit (else big-exit answers an error)
        for m in msgs:
            self.assertTrue(m["content"].startswith("xxxx"), m["content"][:200])

        with open(log) as f:
            lines = f.read().split("\n")
        self.assertEqual(sum(l.startswith("start ") for l in lines), CALLS)
        after = sum(l.startswith("start ") for l in lines[lines.index("probe-done"):])
        self.assertGreater(after, 0, "the second client's call completed only after every "
                           "hostile call had started: the loop served nobody else meanwhile")


SLUG = "^([a-z0-9]+-?)*$"  # nested repeats: exponential on "aaa...!"


class CatastrophicPattern(unittest.TestCase):
    """A schema pattern over 200 tags of catastrophic input used to take
    PCRE2's default limits per tag (0.2 s each, 26-33 s in all) with the
    loop waiting. It is now a clear validation error, while another
    client's call is in flight and completes after it normally."""

    def test_catastrophic_pattern_is_a_clear_error_and_others_go_on(self):
        schema = {"type": "object",
                  "properties": {"tags": {"type": "array",
                                          "items": {"type": "string", "pattern": SLUG}}}}
        d = Daemon(tools=[worker_tool("tagger", "echo", schema=schema),
                          worker_tool("gated", "wait-file")])
        self.addCleanup(d.stop)
        gate = os.path.join(d.shared_dir("gate"), "open")

        victim = d.client()
        victim.start_batch([{"id": "v", "name": "gated", "arguments": {"path": gate}}],
                           batch="victim")
        victim.recv_for(lambda e: e["event"] == "tool_execution_started")

        hostile = d.client()
        tags = ["a" * 29 + "!" for _ in range(200)]
        res = hostile.run([{"id": "h", "name": "tagger", "arguments": {"tags": tags}}],
                          batch="hostile")
        err = res.result("h").get("error")
        self.assertEqual(err, "invalid arguments: /tags/0: validation too expensive: matching "
                         "the pattern \"%s\" stopped: match limit exceeded" % SLUG)
        self.assertEqual(json.loads(res.content("h")), {"error": err})

        # the victim's call was in flight all along and is still served
        self.assertEqual([e["event"] for e in victim.log], ["tool_execution_started"])
        open(gate, "w").close()
        done = victim.recv_batch("victim")
        completed = [e for e in done if e["event"] == "tool_execution_completed"]
        self.assertEqual(completed[0]["result"], {"ok": {"path": gate}})

        # ordinary tags still pass
        res = hostile.run([{"id": "ok", "name": "tagger",
                            "arguments": {"tags": ["a-b", "c0", "slug-like-tag"] * 100}}])
        self.assertEqual(res.result("ok")["ok"]["tags"][:3], ["a-b", "c0", "slug-like-tag"])


if __name__ == "__main__":
    harness.main()
