"""The toolexec command-line client against the real daemon: run (from a
file and from stdin, JSON lines when stdout is not a terminal, LLM-shaped
input), exit codes 0/1/2/3, call, tools, stats, tail, Ctrl-C cancelling a
batch, and the terminal mode (progress line and table) through a pty.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import errno
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
from harness import BatchResult, Daemon, worker_tool, deadline_wait, WAIT

TOOLEXEC = os.environ.get("TOOLEXEC", "")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

TOOLS = [
    worker_tool("echo", "echo"),
    worker_tool("say", "ok-string"),       # content: the string "s", verbatim
    worker_tool("fail", "error"),          # the handler reports an error
    worker_tool("crash", "exit", "3"),     # tool_error handler_exit
    worker_tool("ask", "ask"),
    worker_tool("halt", "halt"),
    worker_tool("wait", "wait-file"),      # returns once a file exists
    worker_tool("sleep", "sleep", timeout_ms=60000),
    {"name": "manual", "description": "answered by the agent's host"},
]


def jsonl(text):
    return [json.loads(l) for l in text.splitlines() if l.strip()]


class Cli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        cls.d = Daemon(TOOLS)
        cls.files = tempfile.mkdtemp(prefix="te-cli-", dir=cls.d.tmp)
        os.chmod(cls.files, 0o1777)  # workers, perhaps another user, wait on files here

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    # -- helpers -------------------------------------------------------------
    def env(self, **extra):
        env = dict(os.environ)
        env.pop("TOOLEXECD_SOCKET", None)
        env.update(extra)
        return env

    def cli(self, *args, stdin=None, env=None, socket=True):
        argv = [TOOLEXEC] + (["--socket", self.d.sock] if socket else []) + list(args)
        return subprocess.run(argv, input=stdin, stdin=None if stdin is not None else
                              subprocess.DEVNULL, capture_output=True, text=True,
                              env=env or self.env(), timeout=WAIT)

    def write(self, name, value):
        path = os.path.join(self.files, name)
        with open(path, "w") as f:
            f.write(value if isinstance(value, str) else json.dumps(value))
        return path

    def batch(self, out, calls):
        """The events on stdout, checked against the protocol's grammar."""
        return BatchResult(calls, jsonl(out))

    def supports(self, op):
        """Whether the daemon knows op (tail and stats came later)."""
        c = self.d.client()
        try:
            c.send({"op": op})
            ev = c.recv()
            return not (ev["event"] == "error" and ev.get("reason") == "unknown_op")
        finally:
            c.close()
            self.d.clients.remove(c)

    # -- run -------------------------------------------------------------------
    def test_run_file_prints_json_lines(self):
        calls = [{"id": "c0", "name": "echo", "arguments": {"x": 1}},
                 {"id": "c1", "name": "echo", "arguments": {"y": [1, 2]}}]
        path = self.write("ok.json", {"op": "run", "batch": "f1", "calls": calls})
        p = self.cli("run", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        res = self.batch(p.stdout, calls)
        self.assertEqual(res.terminal["batch"], "f1")
        self.assertEqual(res.content("c0"), '{"x":1}')
        self.assertEqual(res.content("c1"), '{"y":[1,2]}')
        self.assertEqual(p.stderr, "")

    def test_run_stdin_bare_array(self):
        calls = [{"id": "a", "name": "echo", "arguments": {"n": 1}}]
        for args in (["run", "-"], ["run"]):
            p = self.cli(*args, stdin=json.dumps(calls))
            self.assertEqual(p.returncode, 0, p.stderr)
            res = self.batch(p.stdout, calls)
            self.assertRegex(res.terminal["batch"], r"^b-\d+$")  # the daemon's id

    def test_run_options_fill_the_request(self):
        calls = [{"id": "a", "name": "fail"}, {"id": "b", "name": "echo"}]
        p = self.cli("run", "--batch", "opt", "--on-tool-error", "halt", "--tool-timeout",
                     "5000", "--max-concurrency", "1", "-", stdin=json.dumps(calls))
        self.assertEqual(p.returncode, 1, p.stderr)
        res = self.batch(p.stdout, calls)
        self.assertEqual(res.terminal["batch"], "opt")
        self.assertEqual(res.halt, {"halted_reason": "tool_error", "halt_tool_call_id": "a"})

    def test_run_llm_shaped_calls(self):
        anthropic = {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"a": 1}}]}
        p = self.cli("run", stdin=json.dumps(anthropic))
        self.assertEqual(p.returncode, 0, p.stderr)
        done = jsonl(p.stdout)[-1]
        # messages come back in the shape of the API the calls came from
        self.assertEqual(done["messages"], [{"type": "tool_result", "tool_use_id": "toolu_1",
                                             "content": '{"a":1}', "is_error": False}])
        openai = [{"id": "call_1", "type": "function",
                   "function": {"name": "echo", "arguments": "{\"b\": 2}"}}]
        p = self.cli("run", stdin=json.dumps(openai))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(jsonl(p.stdout)[-1]["messages"],
                         [{"role": "tool", "tool_call_id": "call_1", "content": '{"b":2}'}])
        gemini = [{"functionCall": {"name": "echo", "args": {"c": 3}}}]
        p = self.cli("run", stdin=json.dumps(gemini))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(jsonl(p.stdout)[-1]["messages"][0]["content"], '{"c":3}')

    def test_exit_1_when_a_call_fails_or_the_batch_halts(self):
        for tool in ("fail", "crash", "ask", "halt", "manual"):
            calls = [{"id": "ok", "name": "echo"}, {"id": "x", "name": tool}]
            p = self.cli("run", stdin=json.dumps(calls))
            self.assertEqual(p.returncode, 1, "%s: %s" % (tool, p.stderr))
            self.batch(p.stdout, calls)

    def test_exit_2_for_bad_input_and_refused_requests(self):
        cases = [
            (["run", self.write("bad.json", "{not json")], None, "bad.json: not valid JSON"),
            (["run", os.path.join(self.files, "missing.json")], None, "missing.json"),
            (["run", "-"], '"a string"', "expected a JSON object or array"),
            (["run", "--bogus"], None, "unknown option --bogus"),
            (["run", "--on-tool-error", "maybe", "-"], "[]", "--on-tool-error"),
            (["frobnicate"], None, "unknown command"),
            (["call"], None, "which tool?"),
            (["call", "echo", "[1]"], None, "must be a JSON object"),
        ]
        for args, stdin, message in cases:
            p = self.cli(*args, stdin=stdin)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(message, p.stderr, args)
            self.assertEqual(p.stdout, "", args)
        # refused by the daemon: the error event is the output
        for calls, reason in (([{"id": "a", "name": "no_such_tool"}], "unknown_tool"),
                              ([{"id": 5, "name": "echo"}], "invalid_request")):
            p = self.cli("run", stdin=json.dumps(calls))
            self.assertEqual(p.returncode, 2, p.stderr)
            evs = jsonl(p.stdout)
            self.assertEqual([(e["event"], e["reason"]) for e in evs], [("error", reason)])

    def test_exit_3_names_the_socket(self):
        missing = os.path.join(self.d.tmp, "nobody-here.sock")
        p = self.cli("--socket", missing, "run", "-", stdin="[]", socket=False)
        self.assertEqual(p.returncode, 3)
        self.assertIn("cannot connect to %s" % missing, p.stderr)
        self.assertIn("is toolexecd running?", p.stderr)
        self.assertIn("TOOLEXECD_SOCKET", p.stderr)
        # the variable is used when --socket is not given ...
        p = self.cli("tools", socket=False, env=self.env(TOOLEXECD_SOCKET=missing))
        self.assertEqual(p.returncode, 3)
        self.assertIn(missing, p.stderr)
        p = self.cli("tools", "--json", socket=False, env=self.env(TOOLEXECD_SOCKET=self.d.sock))
        self.assertEqual(p.returncode, 0, p.stderr)
        # ... and --socket wins over it, also after the command
        p = self.cli("tools", "--json", "--socket", self.d.sock, socket=False,
                     env=self.env(TOOLEXECD_SOCKET=missing))
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_sigint_cancels_the_batch(self):
        calls = [{"id": "slow", "name": "sleep"}, {"id": "quick", "name": "echo"}]
        with open(self.write("sigint.json", calls)) as batch:
            proc = subprocess.Popen([TOOLEXEC, "--socket", self.d.sock, "run", "-"],
                                    stdin=batch, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=self.env())
        self.addCleanup(proc.kill)
        lines = []
        for line in proc.stdout:  # the call is running once its started event is out
            lines.append(line)
            if '"tool_execution_started"' in line and '"slow"' in line:
                break
        proc.send_signal(signal.SIGINT)
        out = proc.stdout.read()  # what the line reader has buffered too
        err = proc.stderr.read()
        self.assertEqual(proc.wait(timeout=WAIT), 130, err)  # as a shell reports SIGINT
        proc.stdout.close()
        proc.stderr.close()
        self.assertRegex(err, r"cancelling batch b-\d+")
        res = self.batch("".join(lines) + out, calls)
        self.assertEqual(res.halt, {"halted_reason": "cancelled"})

    # -- call ------------------------------------------------------------------
    def test_call_prints_the_content(self):
        p = self.cli("call", "echo", '{"x": 1}')
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, '{"x":1}\n', ""))
        p = self.cli("call", "echo")  # no arguments: {}
        self.assertEqual((p.returncode, p.stdout), (0, "{}\n"))
        p = self.cli("call", "echo", "-", stdin='{"from": "stdin"}')
        self.assertEqual((p.returncode, p.stdout), (0, '{"from":"stdin"}\n'))

    def test_call_outcomes(self):
        p = self.cli("call", "fail")
        self.assertEqual((p.returncode, p.stdout), (1, '{"error":"boom"}\n'))
        self.assertIn("fail returned an error", p.stderr)
        p = self.cli("call", "crash")
        self.assertEqual(p.returncode, 1)
        self.assertIn("handler_exit", json.loads(p.stdout)["error"])
        p = self.cli("call", "ask", '{"question": "which city?"}')
        self.assertEqual((p.returncode, p.stdout), (1, "<awaiting user response>\n"))
        self.assertIn("which city?", p.stderr)
        p = self.cli("call", "halt", '{"reason": "done", "result": "bye"}')
        self.assertEqual((p.returncode, p.stdout), (1, "bye\n"))
        p = self.cli("call", "no_such_tool")
        self.assertEqual((p.returncode, p.stdout), (2, ""))
        self.assertIn("unknown_tool", p.stderr)

    def test_call_json(self):
        p = self.cli("call", "--json", "echo", '{"k": true}')
        self.assertEqual(p.returncode, 0, p.stderr)
        res = self.batch(p.stdout, [{"id": "c0", "name": "echo"}])
        self.assertEqual(res.result("c0"), {"ok": {"k": True}})

    # -- tools, stats, tail ----------------------------------------------------
    def test_tools(self):
        expected = self.d.client().tools()["tools"]
        p = self.cli("tools", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), expected)
        p = self.cli("tools")
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = p.stdout.splitlines()
        self.assertEqual(rows[0].split(), ["NAME", "MANUAL", "DESCRIPTION"])
        self.assertEqual(sorted(r.split()[0] for r in rows[1:]), sorted(t["name"] for t in TOOLS))
        self.assertIn(["manual", "yes"], [r.split()[:2] for r in rows])

    def test_stats(self):
        if not self.supports("stats"):
            self.skipTest("this toolexecd answers stats with unknown_op")
        self.assertEqual(self.cli("call", "echo").returncode, 0)
        p = self.cli("stats", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        ev = json.loads(p.stdout)
        self.assertEqual(ev["event"], "stats")
        self.assertGreaterEqual(ev["tools"]["echo"]["calls"], 1)
        p = self.cli("stats")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("up ", p.stdout)
        self.assertIn("workers", p.stdout)
        self.assertRegex(p.stdout, r"(?m)^echo\s+\d+")

    def tail(self, *args):
        fd, path = tempfile.mkstemp(prefix="tail-", dir=self.files)
        with os.fdopen(fd, "w") as out, open(path + ".err", "w") as err:
            proc = subprocess.Popen([TOOLEXEC, "--socket", self.d.sock, "tail"] + list(args),
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    env=self.env())
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        return proc, path

    def test_tail(self):
        if not self.supports("tail"):
            self.skipTest("this toolexecd answers tail with unknown_op")
        raw, raw_out = self.tail("--json")
        words, words_out = self.tail("--tools", "echo")

        def read(path):
            with open(path) as f:
                return f.read()

        deadline_wait(lambda: '"tailing"' in read(raw_out), what="tail --json to subscribe")
        # the human form prints nothing for the subscription: probe with a batch
        calls = [{"id": "t0", "name": "echo", "arguments": {"z": 1}}]
        p = self.cli("run", "--batch", "tailed", "-", stdin=json.dumps(calls))
        self.assertEqual(p.returncode, 0, p.stderr)
        deadline_wait(lambda: "batch_completed" in read(raw_out), what="the tail to show it")
        evs = [e for e in jsonl(read(raw_out)) if e.get("batch") == "tailed"]
        self.assertIn("tool_execution_completed", [e["event"] for e in evs])
        self.assertEqual(evs[-1]["event"], "batch_completed")
        # The human tail may have subscribed after the batch: run until it shows one.
        def shown():
            if "t1 echo ok" in read(words_out):
                return True
            self.cli("run", "--batch", "tailed2", "-",
                     stdin=json.dumps([{"id": "t1", "name": "echo"}]))
            return False
        deadline_wait(shown, what="the human tail to show a call")
        self.assertRegex(read(words_out), r"(?m)^\d\d:\d\d:\d\d\.\d{3} tailed2 t1 echo started")
        self.assertIsNone(words.poll())
        self.assertIsNone(raw.poll())

    # -- the terminal ----------------------------------------------------------
    def run_in_pty(self, argv, until=None, then=None):
        """Run argv with a pty as its terminal (120 columns); returns (exit
        status, output). When until(output) holds, then() is called once."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = self.env(TERM="xterm", LANG="C.UTF-8", LC_ALL="C.UTF-8")
        env.pop("NO_COLOR", None)
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                start_new_session=True)
        os.close(slave)
        self.addCleanup(proc.kill)
        out = b""
        end = time.monotonic() + WAIT
        try:
            while time.monotonic() < end:
                r, _, _ = select.select([master], [], [], max(0.0, end - time.monotonic()))
                if not r:
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError as e:  # EIO: the child side is closed
                    if e.errno != errno.EIO:
                        raise
                    break
                if not chunk:
                    break
                out += chunk
                if until and until(out):
                    then()
                    until = None
        finally:
            os.close(master)
        return proc.wait(timeout=WAIT), out.decode("utf-8", "replace")

    def test_terminal_progress_and_table(self):
        gate = os.path.join(self.files, "gate")
        calls = [{"id": "first-call", "name": "say", "arguments": {"s": "hi\u001b]0;title\u0007"}},
                 {"id": "second-call", "name": "crash"},
                 {"id": "gated-call", "name": "wait", "arguments": {"path": gate}},
                 {"id": "asking-call", "name": "ask", "arguments": {"question": "which city?"}}]
        path = self.write("pty.json", {"calls": calls})
        # The gated call keeps the batch running until the progress line is
        # on the screen; then the gate opens.
        status, out = self.run_in_pty(
            [TOOLEXEC, "--socket", self.d.sock, "run", path],
            until=lambda o: b"running" in o, then=lambda: open(gate, "w").close())
        self.assertEqual(status, 1, out)
        self.assertRegex(out, r"\d/4 done.{1,3}\d running.{1,3}\d queued")
        plain = ANSI.sub("", out)
        table = plain[plain.index("ID "):]
        self.assertNotIn("{", plain[:plain.index("ID ")], "JSON on a terminal")
        for c in calls:
            self.assertIn(c["id"], table)
        rows = {l.split()[0]: l for l in table.splitlines() if l.strip()}
        self.assertIn(" ok ", rows["first-call"])
        self.assertIn("tool_error handler_exit", rows["second-call"])
        self.assertIn("ask_user", rows["asking-call"])
        self.assertIn("which city?", rows["asking-call"])
        self.assertIn("4 calls in", table)
        self.assertIn("halted: ask_user at asking-call", table)
        # A tool's escape sequence never reaches the terminal as such.
        self.assertIn("hi ]0;title", rows["first-call"])
        self.assertNotIn("\x1b]0;", out)
        self.assertTrue(all(len(l) < 120 for l in table.splitlines()))

    def test_terminal_json_flag(self):
        status, out = self.run_in_pty([TOOLEXEC, "--socket", self.d.sock, "--json", "call", "echo"])
        self.assertEqual(status, 0, out)
        self.assertEqual(json.loads(out.splitlines()[-1])["event"], "batch_completed")


if __name__ == "__main__":
    unittest.main(verbosity=2)
