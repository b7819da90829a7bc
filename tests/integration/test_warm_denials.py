"""A warm call reports the system calls its filter denied as a cold call
does ("denied" in its tool_execution_completed, the same names, the same
limits), and is still refused them (EPERM).

The template is started with its filter's notification listener; the daemon
tells the template's and each call's denials apart by PID namespace
(proto/PROTOCOL.md, "Warm start", denials). Hostile tools really try:
the testworker's sysprobe mode makes each call with syscall(); two warm
calls of one template meet (both alive) and each makes its own denied call
(ptrace, keyctl): each reports only its own; a template that makes denied
calls itself, at start and from a child all along, has them logged and
reported in no call. Against a root daemon and an unprivileged one.

What a warm call's stacked filter refuses on its own (unshare, setns, the
mount calls, clone with namespace flags) is refused with EPERM but cannot
be reported (one listener per chain of filters, and an EPERM of a stacked
filter beats a notification): the tests hold that to the documented list."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness
from harness import Daemon, deadline_wait, syscall_names

# the testworker keeps no LeakSanitizer (detect_leaks=0): a ptrace in
# "denied" is the probe's
harness.KEEP_LSAN_PTRACE = True

# as in test_confine_sys
PROBES = ["ptrace", "io_uring_setup", "bpf", "netlink", "packet", "keyctl"]
NAMES = {"ptrace": "ptrace", "io_uring_setup": "io_uring_setup", "bpf": "bpf",
         "netlink": "socket(AF_NETLINK)", "packet": "socket(AF_PACKET)", "keyctl": "keyctl"}
# refused by the call's stacked filter alone: EPERM, not reported
STACKED = ["unshare_user", "clone_newuser", "mount"]


def tool(name, mode=None, *argv, **fields):
    d = harness.worker_tool(name, mode, *argv, **fields)
    # so far a warm call needs the host's file system view (template.c
    # warm_gap); a tool without it runs cold
    if d.get("start") == "warm":
        d.setdefault("filesystem", "host")
    return d


PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PYSDK = os.path.join(os.path.dirname(harness.WORKERS_SRC), "..", "contrib", "python")


def py_tool(name, **fields):
    d = {"name": name, "description": "python warm_denials.py", "schema": {"type": "object"},
         "command": [PYTHON, os.path.join(harness.WORKERS_SRC, "warm_denials.py")],
         "env": {"PYTHONPATH": os.path.normpath(PYSDK), "PYTHONDONTWRITEBYTECODE": "1"}}
    d.update(fields)
    if d.get("start") == "warm":
        d.setdefault("filesystem", "host")
    return d


def python_loads_lib():
    """Can the Python SDK load this build's libtoolexec? Not one built with
    ASan (its runtime must come first)."""
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(harness.TOOLEXECD))),
                       "lib", "libtoolexec.so.0")
    return subprocess.run([PYTHON, "-c", "import ctypes, sys; ctypes.PyDLL(sys.argv[1])", lib],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


TOOLS = [
    tool("w", None, start="warm", timeout_ms=60000),
    tool("c", None, timeout_ms=60000),
    tool("w_deny", "sysprobe", start="warm", deny_syscalls=["sched_yield"]),
    tool("c_deny", "sysprobe", deny_syscalls=["sched_yield"]),
    tool("w_self", "deny-at-start", start="warm", timeout_ms=60000),
    py_tool("py_w", start="warm"),
    py_tool("py_c"),
]


class Checks:
    DAEMON = Daemon

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        d = cls.DAEMON(TOOLS, start=False)
        harness.give_work_dir(d)
        harness.started(d)
        cls.d = d
        for name in ("w", "w_deny", "w_self"):
            harness.wait_template(d, name)
        cls.python = python_loads_lib()
        if cls.python:
            harness.wait_template(d, "py_w")

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def call(self, name, start, **args):
        res = self.d.client().run([{"id": "x", "name": name, "arguments": args}], timeout=120)
        done = res.completed("x")
        # a cold tool's event has no "start"
        self.assertEqual(done.get("start", "cold"), start, done)
        self.assertEqual(set(done["result"]), {"ok"}, done)
        return done["result"]["ok"], done

    def test_warm_call_reports_as_a_cold_one(self):
        got_w, warm = self.call("w", "warm", mode="sysprobe", **{"try": PROBES + STACKED})
        got_c, cold = self.call("c", "cold", mode="sysprobe", **{"try": PROBES + STACKED})
        for p in PROBES + STACKED:
            self.assertEqual(got_w[p], "EPERM", (p, got_w))
            self.assertEqual(got_c[p], "EPERM", (p, got_c))
        # each named once, as for the cold call; the stacked filter's own
        # refusals are the documented exception
        self.assertEqual(syscall_names(warm), sorted(set(NAMES.values())), warm)
        unreported = {"unshare", "clone", "mount"}
        self.assertEqual(syscall_names(warm),
                         sorted(n for n in syscall_names(cold) if n not in unreported), cold)
        self.assertNotIn("denied_more", warm)

    def test_no_denial_no_field(self):
        got, done = self.call("w", "warm", mode="sysprobe", **{"try": ["clone_plain"]})
        self.assertEqual(got["clone_plain"], "ok")
        self.assertNotIn("denied", done)

    def test_deny_syscalls(self):
        got, warm = self.call("w_deny", "warm", **{"try": ["sched_yield", "ptrace"]})
        self.assertEqual(got, {"sched_yield": "EPERM", "ptrace": "EPERM"})
        self.assertEqual(syscall_names(warm), ["ptrace", "sched_yield"], warm)
        _, cold = self.call("c_deny", "cold", **{"try": ["sched_yield", "ptrace"]})
        self.assertEqual(warm["denied"], cold["denied"])
        # the tool without it may still call it, warm too
        got, done = self.call("w", "warm", mode="sysprobe", **{"try": ["sched_yield"]})
        self.assertEqual(got, {"sched_yield": "ok"})
        self.assertNotIn("denied", done)

    def test_concurrent_calls_get_their_own(self):
        # both calls of one template alive while each makes its denied
        # call: one ptrace, the other keyctl; no cross-talk
        meet = tempfile.mkdtemp(prefix="wd-meet-")
        os.chmod(meet, 0o777)
        try:
            for rnd in range(3):
                ca, cb = self.d.client(), self.d.client()
                args = {"mode": "sysprobe-meet", "dir": meet}
                ba = ca.start_batch([{"id": "a", "name": "w", "arguments": dict(
                    args, me="a%d" % rnd, peer="b%d" % rnd, **{"try": ["ptrace"]})}])
                bb = cb.start_batch([{"id": "b", "name": "w", "arguments": dict(
                    args, me="b%d" % rnd, peer="a%d" % rnd, **{"try": ["keyctl"]})}])
                ra = harness.BatchResult([{"id": "a", "name": "w"}], ca.recv_batch(ba, timeout=90))
                rb = harness.BatchResult([{"id": "b", "name": "w"}], cb.recv_batch(bb, timeout=90))
                da, db = ra.completed("a"), rb.completed("b")
                for done, name in ((da, "ptrace"), (db, "keyctl")):
                    self.assertEqual(done.get("start"), "warm", done)
                    ok = done["result"]["ok"]
                    self.assertEqual((ok[name], ok["met"]), ("EPERM", True), done)
                    self.assertEqual(done.get("denied"), [{"kind": "syscall", "name": name}],
                                     done)
        finally:
            shutil.rmtree(meet, ignore_errors=True)
        # none went unclaimed (held past its call's "forked")
        self.assertNotIn("of no call known", self.d.stderr())

    def test_template_denials_are_its_own(self):
        # its denied syslog() at start and a child of it making the call
        # every 20 ms: logged, in no call's report
        deadline_wait(lambda: "denied system call syslog (the template's own" in self.d.stderr(),
                      what="the template's own denial in the log")
        got, done = self.call("w_self", "warm", mode="sysprobe", delay_ms=300,
                              **{"try": ["bpf"]})
        self.assertEqual(got, {"bpf": "EPERM"})
        self.assertEqual(done.get("denied"), [{"kind": "syscall", "name": "bpf"}], done)
        got, done = self.call("w_self", "warm", mode="echo", delay_ms=300)
        self.assertNotIn("denied", done)
        # logged once per name, however often made
        self.assertEqual(self.d.stderr().count("denied system call syslog"), 1)

    def test_python_tool(self):
        if not self.python:
            self.skipTest("python cannot load this build's libtoolexec (a sanitizer build)")
        tries = ["ptrace", "keyctl", "unshare"]
        got_w, warm = self.call("py_w", "warm", **{"try": tries})
        got_c, cold = self.call("py_c", "cold", **{"try": tries})
        self.assertEqual(got_w, {"ptrace": "EPERM", "keyctl": "EPERM", "unshare": "EPERM"})
        self.assertEqual(got_c, got_w)
        self.assertEqual(syscall_names(cold), ["keyctl", "ptrace", "unshare"], cold)
        # unshare: refused by the call's stacked filter alone, unreported
        self.assertEqual(syscall_names(warm), ["keyctl", "ptrace"], warm)

    def test_tail_carries_warm_denials(self):
        sub = self.d.client()
        sub.send({"op": "tail"})
        sub.recv_for(lambda e: e["event"] == "tailing")
        res = self.d.client().run([{"id": "t", "name": "w", "arguments": {
            "mode": "sysprobe", "try": ["io_uring_setup"]}}], batch="tailed-warm")
        done = res.completed("t")
        self.assertEqual(done["denied"], [{"kind": "syscall", "name": "io_uring_setup"}], done)
        ev = sub.recv_for(lambda e: e.get("batch") == "tailed-warm" and
                          e["event"] == "tool_execution_completed")
        self.assertEqual(ev["denied"], done["denied"], ev)


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Checks)


if __name__ == "__main__":
    unittest.main()
