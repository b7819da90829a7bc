"""A new user's first hour: the ask decision, batch ids and client identity,
Ctrl-C, and the cause of a failed `toolexec call`.

- `toolexec run --on-tool-error ask` answered with [c]ontinue sends
  "continue", which the daemon now takes (the error stands, the batch goes
  on); while the question waits, the other calls' TIME is their real
  duration (the daemon's duration_ms), not the time until the answer.
- ids the daemon assigns are unique in its life, across connections;
  every event a subscriber receives names the batch's client (pid, uid).
- Ctrl-C ends `toolexec run` with 130; a cancelled call says "cancelled".
- `toolexec call` shows why a call failed (its message and stderr).
"""

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import tempfile
import termios
import time
import unittest

import harness
from harness import Daemon, worker_tool, deadline_wait, WAIT

TOOLEXEC = os.environ.get("TOOLEXEC", "")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

TOOLS = [
    worker_tool("echo", "echo"),
    worker_tool("crash", "exit", "3"),
    worker_tool("wait", "wait-file"),
    worker_tool("sleep", "sleep", timeout_ms=60000),
    {"name": "noisy", "description": "fails with a word on stderr", "schema": {"type": "object"},
     "protocol": "plain",
     "command": ["/bin/sh", "-c", "echo 'kaboom: the disk is on fire' >&2; exit 4"]},
]


def jsonl(text):
    return [json.loads(l) for l in text.splitlines() if l.strip()]


def ms_of(text):
    """toolexec's TIME column ("12ms", "1.52s", "2m03s") in ms."""
    m = re.fullmatch(r"([\d.]+)(ms|s)", text)
    if m:
        return float(m.group(1)) * (1 if m.group(2) == "ms" else 1000)
    m = re.fullmatch(r"(\d+)m(\d+)s", text)
    if m:
        return (int(m.group(1)) * 60 + int(m.group(2))) * 1000
    raise AssertionError("not a TIME: %r" % text)


class FirstHourCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        cls.d = Daemon(TOOLS)
        cls.files = tempfile.mkdtemp(prefix="te-fh-", dir=cls.d.tmp)
        os.chmod(cls.files, 0o1777)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def env(self, **extra):
        env = dict(os.environ)
        env.pop("TOOLEXECD_SOCKET", None)
        env.update(extra)
        return env

    def cli(self, *args, stdin=None):
        return subprocess.run([TOOLEXEC, "--socket", self.d.sock] + list(args), input=stdin,
                              stdin=None if stdin is not None else subprocess.DEVNULL,
                              capture_output=True, text=True, env=self.env(), timeout=WAIT)

    def write(self, name, value):
        path = os.path.join(self.files, name)
        with open(path, "w") as f:
            f.write(json.dumps(value))
        return path

    # -- [c]ontinue after ask --------------------------------------------------
    def test_decide_continue_is_a_decision(self):
        c = self.d.client()
        c.start_batch([{"id": "a", "name": "crash"}, {"id": "b", "name": "echo"}],
                      batch="askc", on_tool_error="ask")
        c.recv_for(lambda e: e["event"] == "tool_error_decision_requested")
        c.send({"op": "decide", "batch": "askc", "id": "a", "decision": "continue"})
        evs = c.finish_batch("askc")
        done = {e["id"]: e for e in evs if e["event"] == "tool_execution_completed"}
        self.assertEqual(done["a"]["result"]["tool_error"]["reason"], "handler_exit", evs)
        self.assertIn("a", [e["id"] for e in evs if e["event"] == "tool_result_encoded"])
        self.assertIsNone(evs[-1]["halt"], evs)
        self.assertEqual(len(evs[-1]["messages"]), 2)

    def run_in_pty(self, argv, steps):
        """Run argv with a pty as its controlling terminal (so /dev/tty is
        it). steps: [(until(output) -> bool, then(master_fd))], in order.
        Returns (exit status, output)."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 150, 0, 0))
        env = self.env(TERM="xterm", LANG="C.UTF-8", LC_ALL="C.UTF-8")

        def ctty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                start_new_session=True, preexec_fn=ctty)
        os.close(slave)
        self.addCleanup(proc.kill)
        out = b""
        end = time.monotonic() + WAIT
        steps = list(steps)
        try:
            while time.monotonic() < end:
                r, _, _ = select.select([master], [], [], max(0.0, end - time.monotonic()))
                if not r:
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child side is closed
                    break
                if not chunk:
                    break
                out += chunk
                while steps and steps[0][0](out):
                    steps.pop(0)[1](master)
        finally:
            os.close(master)
        return proc.wait(timeout=WAIT), out.decode("utf-8", "replace")

    def test_cli_ask_continue_and_real_durations(self):
        gate = os.path.join(self.files, "gate-ask")
        calls = [{"id": "failing", "name": "crash"},
                 {"id": "gated", "name": "wait", "arguments": {"path": gate}}]
        path = self.write("ask.json", {"batch": "ask-cli", "calls": calls})
        tail = self.d.client()
        tail.send({"op": "tail", "batches": ["ask-cli"]})
        tail.recv_for(lambda e: e["event"] == "tailing")
        held = {}

        def open_gate(master):
            open(gate, "w").close()
            # the gated call completes while the question waits
            held["done"] = tail.recv_for(lambda e: e["event"] == "tool_execution_completed"
                                         and e["id"] == "gated")
            held["since"] = time.monotonic()

        def answer(master):
            # the person takes their time: longer than the call took
            while time.monotonic() - held["since"] < 1.0 + held["done"]["duration_ms"] / 1000:
                time.sleep(0.05)
            os.write(master, b"c\n")

        status, out = self.run_in_pty(
            [TOOLEXEC, "--socket", self.d.sock, "run", "--on-tool-error", "ask", path],
            [(lambda o: b"[c]ontinue" in o, open_gate), (lambda o: True, answer)])
        plain = ANSI.sub("", out)
        self.assertEqual(status, 1, plain)  # a call failed; the batch was not halted
        self.assertNotIn("halted", plain)
        self.assertNotIn("invalid_return", plain)
        table = plain[plain.index("ID "):]
        rows = {l.split()[0]: l.split() for l in table.splitlines() if l.strip()}
        self.assertEqual(rows["failing"][2:4], ["tool_error", "handler_exit"], plain)
        self.assertEqual(rows["gated"][2], "ok", plain)
        shown = ms_of(rows["gated"][3])
        real = held["done"]["duration_ms"]
        # what the daemon measured (as the table rounds it), not the wait for the answer
        self.assertLessEqual(abs(shown - real), max(1.0, real * 0.05), (shown, real, plain))

    # -- unique ids, the client in every event ---------------------------------
    def test_assigned_ids_unique_and_events_name_their_client(self):
        tail = self.d.client()
        tail.send({"op": "tail", "tools": ["echo"]})
        tail.recv_for(lambda e: e["event"] == "tailing")
        calls = json.dumps([{"id": "x", "name": "echo", "arguments": {"n": 1}}])
        procs = [subprocess.Popen([TOOLEXEC, "--socket", self.d.sock, "run", "-"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=self.env())
                 for _ in range(2)]
        outs = [p.communicate(calls, timeout=WAIT) for p in procs]
        for p, (o, e) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, e)
        ids = [jsonl(o)[-1]["batch"] for o, _ in outs]
        self.assertNotEqual(ids[0], ids[1])
        for i in ids:
            self.assertRegex(i, r"^b-\d+$")
        # a third connection of our own, which also names none
        c = self.d.client()
        res = c.run([{"id": "x", "name": "echo"}], batch=None)
        self.assertNotIn(res.events[-1]["batch"], ids)
        # the subscriber can tell the two toolexec processes apart
        seen = {}
        while len(seen) < 2 or not all(k in seen for k in ids):
            ev = tail.recv()
            if ev.get("event") == "batch_completed" and ev["batch"] in ids:
                seen[ev["batch"]] = ev["client"]
        for p, i in zip(procs, ids):
            self.assertEqual(seen[i], {"pid": p.pid, "uid": os.getuid()})

    def test_subscribers_get_client_on_every_event(self):
        tail = self.d.client()
        tail.send({"op": "tail", "batches": ["who"]})
        tail.recv_for(lambda e: e["event"] == "tailing")
        c = self.d.client()
        own = c.run([{"id": "x", "name": "echo"}], batch="who").events
        self.assertTrue(all("client" not in e for e in own), own)  # the client's own: unchanged
        got = []
        while not got or got[-1]["event"] != "batch_completed":
            got.append(tail.recv())
        for e in got:
            self.assertEqual(e["client"]["pid"], os.getpid(), e)
            self.assertEqual(e["client"]["uid"], os.getuid(), e)

    # -- Ctrl-C ---------------------------------------------------------------
    def test_ctrl_c_exits_130_and_says_cancelled(self):
        path = self.write("int.json", [{"id": "slow", "name": "sleep"}])
        status, out = self.run_in_pty(
            [TOOLEXEC, "--socket", self.d.sock, "run", path],
            [(lambda o: b"running" in o, lambda m: os.write(m, b"\x03"))])
        plain = ANSI.sub("", out)
        self.assertEqual(status, 130, plain)
        row = [l for l in plain.splitlines() if l.startswith("slow ")][-1]
        self.assertEqual(row.split()[2:4], ["tool_error", "cancelled"], plain)

    # -- toolexec call: the cause ----------------------------------------------
    def test_call_shows_the_cause(self):
        p = self.cli("call", "noisy")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("kaboom: the disk is on fire", p.stderr)
        self.assertIn("exited with status 4", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
