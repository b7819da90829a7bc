"""Running as a service: SIGHUP reload, graceful SIGTERM (shutdown timeout,
second signal), journal and JSON logging, the tail op and the events socket
(filters, lagged), stats, sd_notify (READY/STATUS/RELOADING/STOPPING on a
NOTIFY_SOCKET of the test's own), socket activation through
systemd-socket-activate, and systemd-analyze verify of the units."""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import unittest

import harness
from harness import Daemon, worker_tool, WAIT, deadline_wait

UNITS_SRC = os.environ.get("TE_SYSTEMD_UNITS", "")
SERVICE_BUILD = os.environ.get("TE_SYSTEMD_SERVICE_BUILD", "")


def write_tool(d, definition):
    # add_tool: it also lists the test's directory under "write"
    d.add_tool(definition)


def released(d, name):
    """A file whose creation releases a wait-file worker."""
    return os.path.join(d.shared_dir("rel"), name)


def touch(path):
    with open(path, "w"):
        pass


class Reload(unittest.TestCase):

    def setUp(self):
        self.d = Daemon(tools=[worker_tool("alpha", "ok-string")])
        self.addCleanup(self.d.stop)

    def reload_and_wait(self, text):
        before = self.d.stderr().count(text)
        self.d.proc.send_signal(signal.SIGHUP)
        deadline_wait(lambda: self.d.stderr().count(text) > before, what="%r logged" % text)

    def names(self):
        return [t["name"] for t in self.d.client().tools()["tools"]]

    def test_new_definitions_after_sighup(self):
        write_tool(self.d, worker_tool("beta", "echo"))
        self.assertEqual(self.names(), ["alpha"])
        self.reload_and_wait("reloaded 2 tools")
        self.assertEqual(self.names(), ["alpha", "beta"])

    def test_invalid_set_is_rejected_whole(self):
        write_tool(self.d, worker_tool("beta", "echo"))
        write_tool(self.d, dict(worker_tool("gamma", "echo"), timeout_ms="soon"))
        self.reload_and_wait("reload rejected")
        self.assertIn("gamma.json: timeout_ms", self.d.stderr())
        self.assertEqual(self.names(), ["alpha"])

    def test_calls_in_flight_keep_their_definition(self):
        write_tool(self.d, worker_tool("slow", "wait-file"))
        self.reload_and_wait("reloaded 2 tools")
        gate = released(self.d, "gate")
        c = self.d.client()
        c.start_batch([{"id": "s", "name": "slow", "arguments": {"path": gate, "then_mode":
                                                                 "ok-string"}}], batch="old")
        c.recv_for(lambda e: e["event"] == "tool_execution_started")
        # the new "slow" would answer differently; the running call must not care
        write_tool(self.d, worker_tool("slow", "echo"))
        self.reload_and_wait("reloaded 2 tools")
        touch(gate)
        events = c.finish_batch("old")
        done = [e for e in events if e["event"] == "tool_execution_completed"][0]
        self.assertEqual(done["result"], {"ok": "hello world"})
        res = c.run([{"id": "n", "name": "slow", "arguments": {"k": 1}}])
        self.assertEqual(res.result("n"), {"ok": {"k": 1}})


class Shutdown(unittest.TestCase):

    def start(self, *args):
        d = Daemon(tools=[worker_tool("slow", "wait-file"), worker_tool("sleep", "sleep")],
                   args=list(args))
        self.addCleanup(d.stop, check=False)
        return d

    def test_in_flight_calls_finish_then_exit_0(self):
        d = self.start()
        gate = released(d, "gate")
        c = d.client()
        c.start_batch([{"id": "s", "name": "slow", "arguments": {"path": gate}}], batch="b")
        c.recv_for(lambda e: e["event"] == "tool_execution_started")
        d.proc.send_signal(signal.SIGTERM)
        deadline_wait(lambda: not os.path.exists(d.sock), what="the socket file removed")
        c.send({"op": "run", "batch": "late", "calls": []})
        ev = c.recv_for(lambda e: e.get("batch") == "late")
        self.assertEqual((ev["event"], ev["reason"]), ("error", "shutting_down"))
        touch(gate)
        events = c.finish_batch("b")
        self.assertEqual(events[-1]["event"], "batch_completed")
        self.assertIsNone(events[-1]["halt"])
        self.assertEqual(d.proc.wait(timeout=WAIT), 0)

    def test_timeout_then_cancel(self):
        d = self.start("--shutdown-timeout", "1")
        c = d.client()
        c.start_batch([{"id": "z", "name": "sleep"}], batch="b")
        c.recv_for(lambda e: e["event"] == "tool_execution_started")
        d.proc.send_signal(signal.SIGTERM)
        events = c.finish_batch("b")
        done = [e for e in events if e["event"] == "tool_execution_completed"][0]
        self.assertTrue(done["result"]["tool_error"]["cause"]["cancelled"])
        self.assertEqual(events[-1]["halt"], {"halted_reason": "cancelled"})
        self.assertEqual(d.proc.wait(timeout=WAIT), 0)
        self.assertIn("still running after 1 s", d.stderr())

    def test_second_sigterm_cancels_at_once(self):
        d = self.start("--shutdown-timeout", "3600")
        c = d.client()
        c.start_batch([{"id": "z", "name": "sleep"}], batch="b")
        c.recv_for(lambda e: e["event"] == "tool_execution_started")
        d.proc.send_signal(signal.SIGTERM)
        deadline_wait(lambda: "shutting down" in d.stderr(), what="the first SIGTERM handled")
        d.proc.send_signal(signal.SIGTERM)
        events = c.finish_batch("b")
        self.assertEqual(events[-1]["halt"], {"halted_reason": "cancelled"})
        self.assertEqual(d.proc.wait(timeout=WAIT), 0)


class Logging(unittest.TestCase):

    def test_json_lines_name_batch_and_call(self):
        d = Daemon(tools=[worker_tool("x", "exit", "3")], args=["--log-format", "json"])
        self.addCleanup(d.stop)
        d.client().run([{"id": "c9", "name": "x"}], batch="b9")
        deadline_wait(lambda: '"call":"c9"' in d.stderr(), what="a call's log line")
        lines = [json.loads(l) for l in harness.daemon_own_lines(d.stderr()).splitlines()
                 if l.startswith("{")]
        self.assertTrue(lines)
        for l in lines:
            self.assertIn(l["level"], ("error", "warn", "info", "debug"))
            self.assertIsInstance(l["msg"], str)
        call_lines = [l for l in lines if l.get("call") == "c9"]
        self.assertTrue(all(l["batch"] == "b9" for l in call_lines))

    def test_journal_priority_prefixes(self):
        d = Daemon(tools=[], start=False)
        self.addCleanup(d.stop)
        # stderr is this file: pretend it is the journal
        open(d.stderr_path, "wb").close()
        st = os.stat(d.stderr_path)
        d.env = {"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)}
        d.start()
        # (lines a sanitizer adds are not the daemon's)
        first = [l for l in d.stderr().splitlines() if not l.startswith("==")][0]
        self.assertRegex(first, r"^<[3467]>")


class Tail(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="te-ev-", dir="/tmp")
        cls.events = os.path.join(cls.tmp, "events.sock")
        cls.d = Daemon(tools=[worker_tool("echo", "echo"), worker_tool("big", "big-output"),
                              worker_tool("other", "ok-string")],
                       args=["--events-socket", cls.events])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def subscriber(self, **filters):
        s = self.d.client()
        req = {"op": "tail"}
        req.update(filters)
        s.send(req)
        self.assertEqual(s.recv()["event"], "tailing")
        return s

    def test_tail_sees_another_clients_batch(self):
        sub = self.subscriber()
        c = self.d.client()
        c.run([{"id": "a", "name": "echo", "arguments": {"v": 1}}], batch="seen")
        started = sub.recv_for(lambda e: e["event"] == "batch_started" and e["batch"] == "seen")
        self.assertEqual(started["client"]["pid"], os.getpid())
        self.assertEqual(started["calls"], [{"id": "a", "name": "echo"}])
        kinds = []
        while not kinds or kinds[-1] != "batch_completed":
            kinds.append(sub.recv_for(lambda e: e.get("batch") == "seen")["event"])
        self.assertEqual(kinds, ["tool_execution_started", "tool_execution_completed",
                                 "tool_result_encoded", "batch_completed"])

    def test_filters(self):
        sub = self.subscriber(tools=["other"])
        c = self.d.client()
        c.run([{"id": "a", "name": "echo"}], batch="f1")
        c.run([{"id": "b", "name": "other"}], batch="f2")
        ev = sub.recv_for(lambda e: "batch" in e)
        self.assertEqual(ev["batch"], "f2")  # nothing of f1 came first
        sub2 = self.subscriber(batches=["f4"])
        c.run([{"id": "b", "name": "other"}], batch="f3")
        c.run([{"id": "b", "name": "other"}], batch="f4")
        self.assertEqual(sub2.recv_for(lambda e: "batch" in e)["batch"], "f4")

    def test_events_socket_with_a_half_closed_reader(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(s.close)
        s.connect(self.events)
        s.shutdown(socket.SHUT_WR)  # what socat -u does
        f = s.makefile("rb")
        s.settimeout(WAIT)
        self.assertEqual(json.loads(f.readline())["event"], "tailing")
        self.d.client().run([{"id": "a", "name": "echo"}], batch="ev")
        while True:
            e = json.loads(f.readline())
            if e.get("batch") == "ev" and e["event"] == "batch_completed":
                break

    def test_slow_subscriber_lags_and_never_slows_a_batch(self):
        slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(slow.close)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(self.events)
        c = self.d.client()
        # ~8 MiB of events: far past the subscriber's 256 KiB queue
        calls = [{"id": "c%d" % i, "name": "big", "arguments": {"n": 512 * 1024}}
                 for i in range(8)]
        res = c.run(calls, batch="flood", timeout=WAIT * 2)
        self.assertEqual(res.terminal["event"], "batch_completed")
        f = slow.makefile("rb")
        slow.settimeout(WAIT)
        lagged = None
        while lagged is None:
            e = json.loads(f.readline())
            if e["event"] == "lagged":
                lagged = e
        self.assertGreater(lagged["dropped"], 0)


class DefaultWorkDir(unittest.TestCase):

    def test_workers_reach_their_directory_in_the_default_work_dir(self):
        class NoWorkDir(Daemon):
            def command(self):
                cmd = super().command()
                i = cmd.index("--work-dir")
                return cmd[:i] + cmd[i + 2:]
        d = NoWorkDir(tools=[worker_tool("env", "env")], start=False)
        # as under systemd's RuntimeDirectory= (see test_hard_calldir)
        rt = os.path.join(d.tmp, "runtime")
        os.mkdir(rt, 0o755)
        d.env = {"RUNTIME_DIRECTORY": rt}
        d.start()
        self.addCleanup(d.stop)
        res = d.client().run([{"id": "e", "name": "env"}])
        ok = res.result("e")["ok"]
        self.assertTrue(ok["cwd"].startswith(os.path.join(rt, "work.")), ok["cwd"])
        self.assertTrue(ok["cwd_writable"])


class Stats(unittest.TestCase):

    def test_per_tool_counts_and_latency(self):
        d = Daemon(tools=[worker_tool("echo", "echo"), worker_tool("boom", "exit", "3"),
                          worker_tool("err", "error")])
        self.addCleanup(d.stop)
        c = d.client()
        c.run([{"id": "a", "name": "echo"}, {"id": "b", "name": "echo"},
               {"id": "c", "name": "boom"}, {"id": "d", "name": "err"}])
        c.send({"op": "stats"})
        st = c.recv_for(lambda e: e["event"] == "stats")
        self.assertEqual(st["batches"]["served"], 1)
        self.assertEqual(st["calls"], 4)
        self.assertGreaterEqual(st["uptime_ms"], 0)
        self.assertEqual(st["workers"]["running"], 0)
        echo, boom, err = st["tools"]["echo"], st["tools"]["boom"], st["tools"]["err"]
        self.assertEqual((echo["calls"], echo["ok"]), (2, 2))
        self.assertEqual(boom["tool_errors"]["handler_exit"], 1)
        self.assertEqual(err["handler_errors"], 1)
        lat = echo["latency_ms"]
        self.assertTrue(0 < lat["p50"] <= lat["p90"] <= lat["p99"])
        self.assertGreater(echo["spawn_us_mean"], 0)


class Notify(unittest.TestCase):

    def test_ready_status_reloading_stopping(self):
        tmp = tempfile.mkdtemp(prefix="te-nt-", dir="/tmp")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "notify")
        ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(ns.close)
        ns.bind(path)
        ns.settimeout(WAIT)
        d = Daemon(tools=[worker_tool("echo", "echo")], env={"NOTIFY_SOCKET": path})
        self.addCleanup(d.stop, check=False)

        def expect(word):
            while True:
                msg = ns.recv(4096).decode()
                if word in msg.split("\n") or any(l.startswith(word) for l in msg.split("\n")):
                    return msg

        expect("READY=1")
        status = expect("STATUS=")
        self.assertIn("STATUS=1 tool,", status)
        d.proc.send_signal(signal.SIGHUP)
        expect("RELOADING=1")
        expect("READY=1")
        d.proc.send_signal(signal.SIGTERM)
        expect("STOPPING=1")
        self.assertEqual(d.proc.wait(timeout=WAIT), 0)


@unittest.skipUnless(shutil.which("systemd-socket-activate"), "needs systemd-socket-activate")
class SocketActivation(unittest.TestCase):

    def test_inherited_socket(self):
        class Activated(Daemon):
            def command(self):
                return ["systemd-socket-activate", "-l", self.sock, "--fdname=main"] + \
                    super().command()
        d = Activated(tools=[worker_tool("echo", "echo")], start=False)
        self.addCleanup(d.stop, check=False)
        d.spawn()
        d.wait_ready()
        res = d.client().run([{"id": "a", "name": "echo", "arguments": {"z": 1}}])
        self.assertEqual(res.result("a"), {"ok": {"z": 1}})
        self.assertIn("passed by systemd", d.stderr())


@unittest.skipUnless(shutil.which("systemd-analyze") and UNITS_SRC and SERVICE_BUILD,
                     "needs systemd-analyze and the units")
class Units(unittest.TestCase):

    def test_verify(self):
        tmp = tempfile.mkdtemp(prefix="te-units-")
        self.addCleanup(shutil.rmtree, tmp, True)
        for name in ("toolexecd.socket", "toolexecd-events.socket"):
            shutil.copy(os.path.join(UNITS_SRC, name), tmp)
        shutil.copy(SERVICE_BUILD, os.path.join(tmp, "toolexecd.service"))
        # the MCP HTTP front, and the daemon's drop-in that trusts its user
        shutil.copy(os.path.join(os.path.dirname(SERVICE_BUILD), "toolexec-mcp-build.service"),
                    os.path.join(tmp, "toolexec-mcp.service"))
        shutil.copytree(os.path.join(UNITS_SRC, "toolexecd.service.d"),
                        os.path.join(tmp, "toolexecd.service.d"))
        units = [os.path.join(tmp, n) for n in
                 ("toolexecd.service", "toolexecd.socket", "toolexecd-events.socket",
                  "toolexec-mcp.service")]
        p = subprocess.run(["systemd-analyze", "verify", "--man=no"] + units,
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        noise = [l for l in p.stderr.splitlines() if "toolexec" in l]
        self.assertEqual(noise, [], p.stderr)

    def test_front_confinement(self):
        """The HTTP front's unit is tight: systemd's own measure of its
        exposure stays at 2.0 or below ("OK")."""
        unit = os.path.join(os.path.dirname(SERVICE_BUILD), "toolexec-mcp-build.service")
        tmp = tempfile.mkdtemp(prefix="te-units-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "toolexec-mcp.service")
        shutil.copy(unit, path)
        p = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--threshold=20",
                            "--no-pager", path], capture_output=True, text=True)
        if "--offline" in p.stderr or "--threshold" in p.stderr:
            self.skipTest("systemd-analyze security lacks --offline/--threshold")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("exposure level for toolexec-mcp.service", p.stdout)


if __name__ == "__main__":
    unittest.main()
