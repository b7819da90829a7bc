"""System calls: every worker runs under a seccomp filter; what it denies
fails with EPERM, and the call's tool_execution_completed names it in
"denied" (the tail stream carries the same event; the stats op counts them).
"syscalls": "off" lifts the default set, "deny_syscalls" adds names, an
unknown name is refused at load.

Hostile tools really try: the testworker's sysprobe mode makes each call
with syscall() (ptrace of a sibling it forked, io_uring_setup,
unshare(CLONE_NEWUSER), clone(CLONE_NEWUSER), mount, bpf, an AF_NETLINK
and an AF_PACKET socket, keyctl), and a Python tool makes them through
ctypes. Against a root daemon and an unprivileged one. Where a call would
fail anyway for an unprivileged process (mount, AF_PACKET), "denied" is
what tells the filter's refusal from the kernel's."""

import os
import pwd
import signal
import sys
import time
import unittest

import harness
from harness import Daemon, DaemonFailed, worker_tool

PROBES = ["ptrace", "io_uring_setup", "unshare_user", "clone_newuser", "mount", "bpf",
          "netlink", "packet", "keyctl"]
# the name each probe's system call has in "denied"
NAMES = {"ptrace": "ptrace", "io_uring_setup": "io_uring_setup", "unshare_user": "unshare",
         "clone_newuser": "clone", "mount": "mount", "bpf": "bpf",
         "netlink": "socket(AF_NETLINK)", "packet": "socket(AF_PACKET)", "keyctl": "keyctl"}

PY_HOSTILE = r"""
import ctypes, json, subprocess, sys, threading
sys.stdin.readline()
libc = ctypes.CDLL(None, use_errno=True)
def attempt(nr, *args):
    rc = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return "ok" if rc >= 0 else __import__("errno").errorcode[ctypes.get_errno()]
out = {"ptrace": attempt(101, 0, 0, 0, 0),          # PTRACE_TRACEME
       "unshare": attempt(272, 0x10000000),         # CLONE_NEWUSER
       "keyctl": attempt(250, 0, -3, 0)}            # KEYCTL_GET_KEYRING_ID
t = threading.Thread(target=lambda: out.__setitem__("thread", "ok")); t.start(); t.join()
out["subprocess"] = subprocess.run(["/bin/echo", "child"], capture_output=True).stdout.decode().strip()
print(json.dumps(out))
"""

def _sanitized():
    try:
        with open(harness.TESTWORKER, "rb") as f:
            data = f.read()
        return b"__asan_init" in data or b"__lsan" in data
    except OSError:
        return False


# A testworker built with LeakSanitizer calls ptrace() at exit to stop its
# threads (and races the daemon's kill after the result): that denial is
# its own, not the probe's, and is left out where no probe asked for ptrace.
SANITIZED = _sanitized()
harness.KEEP_LSAN_PTRACE = True  # this file tells the probes' ptrace from LSan's itself

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

TOOLS = [
    worker_tool("probe", "sysprobe", timeout_ms=120000),
    worker_tool("probe_off", "sysprobe", syscalls="off"),
    worker_tool("probe_deny", "sysprobe", deny_syscalls=["sched_yield"]),
    worker_tool("probe_off_deny", "sysprobe", syscalls="off", deny_syscalls=["sched_yield"]),
    worker_tool("probe_offline", "sysprobe", network=False),
    worker_tool("echo", "echo"),
    {"name": "py_hostile", "description": "python ctypes", "schema": {"type": "object"},
     "command": [PYTHON, "-c", PY_HOSTILE], "protocol": "plain"},
]


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


class Checks:
    DAEMON = Daemon

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        d = cls.DAEMON(TOOLS, start=False)
        harness.give_work_dir(d)
        harness.started(d)
        cls.d = d

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def run_probe(self, tool, **args):
        res = self.d.client().run([{"id": "c", "name": tool, "arguments": args}],
                                  timeout=120)
        done = res.completed("c")
        self.assertEqual(set(done["result"]), {"ok"}, done)
        return done["result"]["ok"], done

    def denied_list(self, done, tried=()):
        return [e for e in done.get("denied", [])
                if not (SANITIZED and e == {"kind": "syscall", "name": "ptrace"} and
                        "ptrace" not in tried)]

    def denied_names(self, done, tried=("ptrace",)):
        return {e["name"] for e in self.denied_list(done, tried) if e["kind"] == "syscall"}

    def test_default_filter_denies_with_eperm_and_reports(self):
        got, done = self.run_probe("probe", **{"try": PROBES})
        for p in PROBES:
            self.assertEqual(got[p], "EPERM", (p, got))
        # each named once, however often it was tried
        self.assertEqual(self.denied_names(done), set(NAMES.values()), done)
        self.assertEqual(len(self.denied_list(done, PROBES)), len(set(NAMES.values())), done)
        self.assertNotIn("denied_more", done)

    def test_clone3_is_enosys_and_the_library_falls_back(self):
        got, done = self.run_probe("probe", **{"try": ["clone3", "clone_plain"], "fork": True})
        self.assertEqual((got["clone3"], got["clone_plain"], got["fork"]),
                         ("ENOSYS", "ok", "ok"), got)
        self.assertEqual(self.denied_list(done), [], done)  # ENOSYS is not a denial

    def test_off_lifts_the_default(self):
        got, done = self.run_probe("probe_off", **{"try": ["ptrace", "netlink", "keyctl"]})
        self.assertEqual(got, {"ptrace": "ok", "netlink": "ok", "keyctl": "ok"})
        self.assertNotIn("denied", done)

    def test_deny_syscalls_adds_to_the_default(self):
        got, done = self.run_probe("probe_deny", **{"try": ["sched_yield", "ptrace"]})
        self.assertEqual(got, {"sched_yield": "EPERM", "ptrace": "EPERM"})
        self.assertEqual(self.denied_names(done), {"sched_yield", "ptrace"}, done)
        # the default tool may still call it
        got, done = self.run_probe("probe", **{"try": ["sched_yield"]})
        self.assertEqual(got, {"sched_yield": "ok"})

    def test_deny_syscalls_with_off(self):
        got, done = self.run_probe("probe_off_deny", **{"try": ["sched_yield", "ptrace"]})
        self.assertEqual(got, {"sched_yield": "EPERM", "ptrace": "ok"})
        self.assertEqual(self.denied_names(done), {"sched_yield"}, done)

    def test_inet_socket_without_network(self):
        # its own network namespace (only its own lo): the socket is
        # allowed, and reaches nothing (test_sandbox_net.py)
        got, done = self.run_probe("probe_offline", **{"try": ["inet", "packet"]})
        self.assertEqual(got, {"inet": "ok", "packet": "EPERM"})
        self.assertEqual(self.denied_names(done, ()), {"socket(AF_PACKET)"}, done)
        got, done = self.run_probe("probe", **{"try": ["inet"]})
        self.assertEqual(got, {"inet": "ok"})

    def test_name_resolution_netlink_is_allowed(self):
        # glibc's getaddrinfo asks NETLINK_ROUTE for the interfaces: no
        # denial for a tool that works; other netlink families stay refused
        for tool in ("probe", "probe_offline"):
            got, done = self.run_probe(tool, **{"try": ["netlink_route", "netlink"]})
            self.assertEqual(got, {"netlink_route": "ok", "netlink": "EPERM"}, tool)
            self.assertEqual(self.denied_names(done, ()), {"socket(AF_NETLINK)"}, done)

    @unittest.skipUnless(os.uname().machine == "x86_64", "x86-64's other ABIs")
    def test_another_abi_is_killed(self):
        # i386's int 0x80 and x32 numbers would slip past rules written for
        # x86-64's numbers: the filter kills the process (SIGSYS) instead
        for abi in ("i386", "x32"):
            res = self.d.client().run([{"id": "c", "name": "probe", "arguments": {"try": [abi]}}])
            err = res.result("c").get("tool_error")
            self.assertIsNotNone(err, (abi, res.completed("c")))
            self.assertEqual((err["reason"], err["cause"]["signal"]),
                             ("handler_exit", "SIGSYS"), (abi, err))
        # the same without the filter: both are a plain getpid
        got, _ = self.run_probe("probe_off", **{"try": ["x32"]})
        self.assertIn(got["x32"], ("ok", "ENOSYS"), got)

    def test_python_tool_through_ctypes(self):
        res = self.d.client().run([{"id": "c", "name": "py_hostile", "arguments": {}}])
        done = res.completed("c")
        self.assertEqual(done["result"], {"ok": {
            "ptrace": "EPERM", "unshare": "EPERM", "keyctl": "EPERM", "thread": "ok",
            "subprocess": "child"}}, done)
        self.assertEqual(self.denied_names(done), {"ptrace", "unshare", "keyctl"}, done)

    def test_tail_and_stats_carry_denials(self):
        sub = self.d.client()
        sub.send({"op": "tail"})
        sub.recv_for(lambda e: e["event"] == "tailing")
        c = self.d.client()
        res = c.run([{"id": "t", "name": "probe", "arguments": {"try": ["bpf"]}}],
                    batch="tailed")
        self.assertEqual(self.denied_list(res.completed("t")), [{"kind": "syscall", "name": "bpf"}])
        ev = sub.recv_for(lambda e: e.get("batch") == "tailed" and
                          e["event"] == "tool_execution_completed")
        self.assertEqual(ev["denied"], res.completed("t")["denied"], ev)
        c.send({"op": "stats"})
        st = c.recv_for(lambda e: e.get("event") == "stats")
        self.assertGreaterEqual(st["denied"]["syscall"], 1, st["denied"])
        self.assertGreaterEqual(st["denied"]["syscall_names"]["bpf"], 1, st["denied"])
        self.assertGreaterEqual(st["tools"]["probe"]["denied"]["syscall"], 1, st["tools"])

    def test_a_denied_loop_does_not_stall_other_clients(self):
        n = 100000
        other = self.d.client()
        base = []
        for i in range(20):  # the same calls without the loop, for the report
            t = time.monotonic()
            self.assertTrue(other.run([{"id": "b", "name": "echo", "arguments": {}}]).ok)
            base.append(time.monotonic() - t)
        base.sort()
        hostile = self.d.client()
        hostile.start_batch([{"id": "h", "name": "probe", "arguments": {"loop": {"count": n}}}],
                            batch="loop")
        hostile.recv_for(lambda e: e.get("event") == "tool_execution_started")
        t0 = time.monotonic()
        c0 = cpu_ticks(self.d.proc.pid)
        lat = []
        for i in range(20):
            t = time.monotonic()
            res = other.run([{"id": "e%d" % i, "name": "echo", "arguments": {"i": i}}])
            lat.append(time.monotonic() - t)
            self.assertEqual(res.result("e%d" % i), {"ok": {"i": i}})
        evs = hostile.recv_batch("loop", timeout=120)
        elapsed = time.monotonic() - t0
        done = [e for e in evs if e["event"] == "tool_execution_completed"][0]
        self.assertEqual(done["result"], {"ok": {"looped": {"EPERM": n}}}, done)
        self.assertEqual(self.denied_list(done), [{"kind": "syscall", "name": "io_uring_setup"}])
        lat.sort()
        cpu = (cpu_ticks(self.d.proc.pid) - c0) / os.sysconf("SC_CLK_TCK")
        sys.stderr.write("\n[measure] %s: %d denied calls in %.2f s wall (%.1f us each); daemon "
                         "CPU %.2f s; another client's 20 calls meanwhile: median %.1f ms, max "
                         "%.1f ms (before: median %.1f ms, max %.1f ms)\n"
                         % (type(self).__name__, n, elapsed, elapsed / n * 1e6, cpu,
                            lat[10] * 1000, lat[-1] * 1000, base[10] * 1000, base[-1] * 1000))


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Checks, needs_root=True)


class Load(unittest.TestCase):

    def test_reload_builds_the_new_filter_and_refuses_a_bad_name(self):
        harness.require_env()
        d = Daemon(tools=[worker_tool("probe", "sysprobe")])
        self.addCleanup(d.stop)

        def reload_and_wait(text):
            before = d.stderr().count(text)
            d.proc.send_signal(signal.SIGHUP)
            harness.deadline_wait(lambda: d.stderr().count(text) > before,
                                  what="%r logged" % text)

        def attempt():
            res = d.client().run([{"id": "c", "name": "probe",
                                   "arguments": {"try": ["sched_yield"]}}])
            return res.result("c")["ok"]["sched_yield"]

        self.assertEqual(attempt(), "ok")
        d.add_tool(worker_tool("probe", "sysprobe", deny_syscalls=["sched_yield"]))
        reload_and_wait("reloaded 1 tool from")
        self.assertEqual(attempt(), "EPERM")
        # a bad name rejects the whole set: the filter in force stays
        d.add_tool(worker_tool("probe", "sysprobe", deny_syscalls=["sched_yeld"]))
        reload_and_wait("reload rejected")
        self.assertIn('probe.json: deny_syscalls[0]: unknown system call "sched_yeld"',
                      d.stderr())
        self.assertEqual(attempt(), "EPERM")

    def test_unknown_name_is_refused_at_load(self):
        harness.require_env()
        bad = worker_tool("typo", "echo", deny_syscalls=["ptrace", "no_such_call"])
        with self.assertRaises(DaemonFailed) as cm:
            Daemon(tools=[bad])
        self.assertIn('typo.json: deny_syscalls[1]: unknown system call "no_such_call"',
                      str(cm.exception))

    def test_bad_mode_is_refused_at_load(self):
        harness.require_env()
        bad = worker_tool("typo", "echo", syscalls="strict")
        with self.assertRaises(DaemonFailed) as cm:
            Daemon(tools=[bad])
        self.assertIn('typo.json: syscalls: expected "default" or "off"', str(cm.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
