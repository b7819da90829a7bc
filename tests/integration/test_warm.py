"""Warm start ("start": "warm"; proto/PROTOCOL.md, "Warm start"): a template
process per tool, each call a fresh fork of it.

Against the real daemon (root, and unprivileged through setpriv): a warm call
passes the isolation checks of a cold one (its own PID namespace and
session, no descriptor but 0-2, a clean environment, the limits, a setsid()
grandchild gone after ok, timeout and cancel), nothing passes between two
calls (a global, a file in the working directory, a thread left running;
for the C and the Python SDK), and templates that crash, hang at start,
answer garbage, hang on a fork or start threads give clear errors and a
restart while the daemon stays up; max_forks and a reload replace a
template; a call's PID 1 made ahead serves the next call and goes with its
template.
"""

import json
import os
import pwd
import shutil
import tempfile
import signal
import socket
import subprocess
import sys
import unittest

import harness
from harness import (Daemon, WAIT, assert_token_gone, deadline_wait, new_token,
                     wait_token_present)


def host_if_warm(d):
    """Warm calls get what cold ones would, or the tool runs cold
    (test_gaps_run_cold): since warm calls get the file-system view too,
    these tools keep harness's default one (test_warm_view checks it)."""
    return d


def worker_tool(*args, **fields):
    return host_if_warm(harness.worker_tool(*args, **fields))

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
PYSDK = os.path.join(SRC, "contrib", "python")
WORKERS = harness.WORKERS_SRC
# one every call's user may run (not a pyenv under /root)
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def python_loads_lib():
    """Can the Python SDK load this build's libtoolexec? Not one built with
    ASan (its runtime must come first): the Python warm tests skip there."""
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(harness.TOOLEXECD))),
                       "lib", "libtoolexec.so.0")
    return subprocess.run([PYTHON, "-c", "import ctypes, sys; ctypes.PyDLL(sys.argv[1])", lib],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def needs_python_lib(f):
    def wrapped(self):
        if not python_loads_lib():
            self.skipTest("python cannot load this build's libtoolexec (a sanitizer build)")
        return f(self)
    wrapped.__name__ = f.__name__
    wrapped.__doc__ = f.__doc__
    return wrapped


def py_tool(name, script, *argv, **fields):
    d = {"name": name, "description": "python " + script, "schema": {"type": "object"},
         "command": [PYTHON, os.path.join(WORKERS, script)] + list(argv),
         "env": {"PYTHONPATH": PYSDK, "PYTHONDONTWRITEBYTECODE": "1"}}
    env = fields.pop("extra_env", {})
    d["env"].update(env)
    d.update(fields)
    return host_if_warm(d)


def template(d, name):
    return (d.stats().get("templates") or {}).get(name)


def wait_ready(d, name, other_than=None):
    """The tool's template says ready (and is not the one of pid other_than)."""
    def ready():
        t = template(d, name)
        return t if t and t["state"] == "ready" and t["pid"] != other_than else None
    return deadline_wait(ready, what="the warm template of %s to be ready" % name)


def wait_log(d, text):
    deadline_wait(lambda: text in d.stderr(), timeout=3 * WAIT, what="%r in the daemon log" % text)


def completed(res, cid="a"):
    return res.completed(cid)


def tool_error(res, cid="a"):
    r = res.result(cid)
    assert "tool_error" in r, r
    return r["tool_error"]


def kill_token(tok):
    for pid in harness.pids_with_token(tok):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


WARM_TOOLS = [
    worker_tool("w", None, start="warm", timeout_ms=30000),
    worker_tool("c", None, timeout_ms=30000),
    worker_tool("w_short", None, start="warm", timeout_ms=700),
    worker_tool("w_lim", "open-files", start="warm", limits={"open_files": 40}),
    worker_tool("c_lim", "open-files", limits={"open_files": 40}),
    py_tool("py", "warm_state.py", start="warm"),
    py_tool("py_thread", "warm_state.py", start="warm", extra_env={"WARM_THREAD": "1"}),
    worker_tool("w_max", "echo", start="warm", max_forks=2),
    worker_tool("w_spare", None, start="warm", max_forks=3),
    worker_tool("w_spare_host", None, start="warm", filesystem="host"),
    worker_tool("w_nonet", "connect", start="warm", network=False),
    worker_tool("w_kill", "sleep", start="warm", timeout_ms=60000),
    py_tool("h_crash", "warm_hostile.py", "crash-start", start="warm"),
    py_tool("h_hang", "warm_hostile.py", "hang-start", start="warm"),
    py_tool("h_garbage", "warm_hostile.py", "garbage-start", start="warm"),
    py_tool("h_gfork", "warm_hostile.py", "garbage-fork", start="warm"),
    py_tool("h_hfork", "warm_hostile.py", "hang-fork", start="warm"),
]


class WarmCase(unittest.TestCase):
    daemon_class = Daemon

    @classmethod
    def make_daemon(cls):
        return cls.daemon_class(tools=WARM_TOOLS)

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.d = cls.make_daemon()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def run1(self, name, args=None, **kw):
        return self.d.client().run([{"id": "a", "name": name, "arguments": args or {}}], **kw)

    def warm1(self, name, args=None):
        wait_ready(self.d, name)
        res = self.run1(name, args)
        self.assertEqual(completed(res).get("start"), "warm", completed(res))
        return res


class Warm(WarmCase):

    # -- a warm call is a call ---------------------------------------------

    def test_warm_call_and_stats(self):
        res = self.warm1("w", {"mode": "echo", "x": 1})
        self.assertEqual(res.result("a"), {"ok": {"mode": "echo", "x": 1}})
        self.assertIn("cpu_user_ms", completed(res))
        t = template(self.d, "w")
        self.assertEqual(t["state"], "ready")
        self.assertIsInstance(t["pid"], int)
        self.assertGreaterEqual(t["children"], 1)
        self.assertIsInstance(t["age_ms"], int)
        self.assertGreater(t["pss_kb"], 0)
        # the pid is the daemon's view of the template: its command line
        with open("/proc/%d/cmdline" % t["pid"], "rb") as f:
            self.assertIn(harness.TESTWORKER.encode(), f.read())
        # a cold tool says nothing of its start (the completion is unchanged)
        self.assertNotIn("start", completed(self.run1("c", {"mode": "echo"})))

    def test_isolation_as_cold(self):
        warm = self.warm1("w", {"mode": "isolation"}).result("a")["ok"]
        tpid = template(self.d, "w")["pid"]
        cold = self.run1("c", {"mode": "isolation"}).result("a")["ok"]
        for k in ("pid", "ppid", "pgid", "sid", "no_new_privs", "core_limit", "sigblk", "fds"):
            self.assertEqual(warm[k], cold[k], k)
        self.assertEqual(warm["fds"], [0, 1, 2])
        # a PID namespace of its own, not the template's (which lives on)
        self.assertNotEqual(warm["pidns"], os.readlink("/proc/%d/ns/pid" % tpid))

    def test_environment_as_cold(self):
        wait_ready(self.d, "w")
        c = self.d.client()
        res = c.run([{"id": "e1", "name": "w", "arguments": {"mode": "env"}}])
        cold = c.run([{"id": "e2", "name": "c", "arguments": {"mode": "env"}}])
        warm, cold = res.result("e1")["ok"], cold.result("e2")["ok"]
        self.assertEqual(sorted(warm["env"]), sorted(cold["env"]))
        self.assertEqual(warm["env"]["TOOLEXEC_CALL_ID"], "e1")
        self.assertEqual(warm["env"]["TOOLEXEC_BATCH"], res.terminal["batch"])
        self.assertEqual(warm["cwd_entries"], [])
        self.assertTrue(warm["cwd_writable"])
        self.assertEqual(warm["cwd_mode"], 0o700)

    def test_limits_as_cold(self):
        warm = self.warm1("w_lim").result("a")["ok"]
        cold = self.run1("c_lim").result("a")["ok"]
        self.assertEqual(warm["nofile"], 40)
        self.assertEqual(warm["nofile"], cold["nofile"])
        self.assertEqual(warm["errno"], "EMFILE")

    def test_no_network_as_cold(self):
        """"network": false: the call's own network namespace (and the
        tool's filter, which refuses AF_UNIX sockets) as for a cold call."""
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        self.addCleanup(srv.close)
        got = self.warm1("w_nonet", {"port": srv.getsockname()[1]}).result("a")["ok"]
        self.assertFalse(got["connected"], got)

    def test_other_calls_directories_are_not_reachable(self):
        """The template's directory holds every call's: a call reaches only
        its own."""
        wait_ready(self.d, "w")
        c = self.d.client()
        gate = os.path.join(self.d.tmp, new_token("gate"))
        c.start_batch([{"id": "v", "name": "w", "arguments": {
            "mode": "wait-file", "path": gate, "then_mode": "echo"}}], batch="hold")
        mine = self.run1("w", {"mode": "env"}).result("a")["ok"]["cwd"]
        parent = os.path.dirname(mine)
        # from outside: the waiting call's directory, beside where ours was
        # (ours may not be removed yet: not that one)
        other = deadline_wait(lambda: [e for e in os.listdir(parent)
                                       if e != os.path.basename(mine)],
                              what="the waiting call's directory")
        other = os.path.join(parent, other[0])
        with open(os.path.join(other, "secret.txt"), "w") as f:
            f.write("secret")
        probe = self.warm1("w", {"mode": "probe-dir", "work": parent, "other": other})
        got = probe.result("a")["ok"]
        self.assertEqual(got["list_other"], "ENOENT", got)
        self.assertEqual(got["read_other"], "ENOENT", got)
        self.assertIn(got["write_other"], ("ENOENT", "EROFS"), got)
        open(gate, "w").close()
        self.assertEqual(c.finish_batch("hold")[-1]["event"], "batch_completed")

    # -- nothing passes between calls ---------------------------------------

    def test_nothing_passes_between_c_calls(self):
        first = self.warm1("w", {"mode": "warm-state", "leave": True}).result("a")["ok"]
        second = self.warm1("w", {"mode": "warm-state"}).result("a")["ok"]
        self.assertEqual(first["counter"], 1)
        self.assertEqual(second["counter"], 1, "a global passed from one call to the next")
        self.assertEqual(second["threads"], 1, "a thread passed from one call to the next")
        self.assertEqual(second["entries"], [], "a file passed from one call to the next")

    def test_concurrent_calls_are_each_their_own(self):
        wait_ready(self.d, "w")
        calls = [{"id": "c%d" % i, "name": "w", "arguments": {"mode": "warm-state", "leave": True,
                                                              "delay_ms": 20}}
                 for i in range(24)]
        res = self.d.client().run(calls, max_concurrency=12)
        for call in calls:
            got = res.result(call["id"])["ok"]
            self.assertEqual((got["counter"], got["threads"], got["entries"]), (1, 1, []), got)
        self.assertGreaterEqual([completed(res, c["id"])["start"] for c in calls].count("warm"), 1)

    @needs_python_lib
    def test_nothing_passes_between_python_calls(self):
        first = self.warm1("py", {"leave": True}).result("a")["ok"]
        second = self.warm1("py").result("a")["ok"]
        self.assertEqual((first["counter"], second["counter"]), (1, 1))
        self.assertEqual(second["threads"], 1)
        self.assertEqual(second["entries"], [])
        self.assertEqual(second["call_id"], "a")
        # reseeded in each child: not the template's sequence twice
        self.assertNotEqual(first["random"], second["random"])

    @needs_python_lib
    def test_signals_to_pid_1_do_not_reach_the_template(self):
        # A warm call's PID 1 shares the template's memory (CLONE_VM): a
        # handler of the template's (Python's SIGINT one) run there would
        # set the template's own "signal tripped" state, and the template
        # would die of the KeyboardInterrupt at its next fork. P1 keeps
        # every signal blocked, so the template serves on, the same process.
        t = wait_ready(self.d, "py")
        got = self.warm1("py", {"signal_init": True}).result("a")["ok"]
        self.assertEqual(got["counter"], 1, got)
        for _ in range(3):
            self.assertEqual(self.warm1("py").result("a")["ok"]["counter"], 1)
        t2 = template(self.d, "py")
        self.assertEqual((t2["pid"], t2["restarts"]), (t["pid"], t["restarts"]), t2)
        self.assertNotIn("KeyboardInterrupt", self.d.stderr())

    # -- the call's tree ends with it ---------------------------------------

    def test_setsid_grandchild_gone_after_ok(self):
        tok = new_token("warm-sg-ok")
        self.addCleanup(kill_token, tok)
        res = self.warm1("w", {"mode": "setsid-grandchild", "token": tok, "then": "ok"})
        self.assertEqual(res.result("a"), {"ok": {"token": tok}})
        assert_token_gone(tok, what="setsid grandchild of a warm call after ok")

    def test_setsid_grandchild_gone_after_timeout(self):
        tok = new_token("warm-sg-to")
        self.addCleanup(kill_token, tok)
        res = self.warm1("w_short", {"mode": "setsid-grandchild", "token": tok,
                                     "then": "sleep"})
        te = tool_error(res)
        self.assertEqual(te["reason"], "timeout", te)
        self.assertIn("setsid grandchild forked", te["cause"].get("stderr", ""))
        assert_token_gone(tok, what="setsid grandchild of a warm call after a timeout")

    def test_setsid_grandchild_gone_after_cancel(self):
        wait_ready(self.d, "w")
        tok = new_token("warm-sg-cancel")
        self.addCleanup(kill_token, tok)
        c = self.d.client()
        c.start_batch([{"id": "g", "name": "w", "arguments": {
            "mode": "setsid-grandchild", "token": tok, "then": "sleep"}}], batch="sgc")
        wait_token_present(tok)
        c.send({"op": "cancel", "batch": "sgc"})
        evs = c.finish_batch("sgc")
        done = [e for e in evs if e["event"] == "tool_execution_completed"][0]
        self.assertIs(done["result"]["tool_error"]["cause"].get("cancelled"), True, done)
        self.assertEqual(done["start"], "warm")
        assert_token_gone(tok, what="setsid grandchild of a warm call after a cancel")

    def test_system_call_filter_as_cold(self):
        # the template's filter (the default set less its namespace calls)
        # and the one each call stacks: a warm call is refused what a cold
        # one is, namespace and mount calls included
        tries = ["ptrace", "io_uring_setup", "unshare_user", "clone_newuser", "mount", "bpf",
                 "keyctl", "netlink"]
        got = self.warm1("w", {"mode": "sysprobe", "try": tries}).result("a")["ok"]
        for t in tries:
            self.assertEqual(got[t], "EPERM", (t, got))
        self.assertEqual(got.get("clone3", "ENOSYS"), "ENOSYS")

    def test_exit_status_and_signal_as_cold(self):
        te = tool_error(self.warm1("w", {"mode": "exit", "code": 5}))
        self.assertEqual(te["cause"]["exit_status"], 5)
        self.assertIn("exiting with 5", te["cause"]["stderr"])
        te = tool_error(self.warm1("w", {"mode": "segv"}))
        self.assertEqual(te["cause"]["signal"], "SIGSEGV", te)
        te = tool_error(self.warm1("w", {"mode": "garbage"}))
        self.assertEqual(te["reason"], "invalid_return", te)

    # -- templates that misbehave --------------------------------------------

    def test_gaps_run_cold(self):
        # The one gap left: "write" paths too long to go with each fork
        # request (half a control frame, 32 KiB); the view itself and an
        # egress allow-list are warm now (test_warm_view.py,
        # test_warm_egress.py).
        top = tempfile.mkdtemp(prefix="te-warm-gap-")
        self.addCleanup(shutil.rmtree, top, True)
        os.chmod(top, 0o755)
        paths = []  # 28 paths of ~1,240 bytes: ~35 KB (a view holds at most 32 paths)
        for i in range(28):
            paths.append(os.path.join(top, "%02d" % i, *["w" * 240] * 5))
            os.makedirs(paths[-1])
        # with_tree: the build's tree read-only where the view leaves it out
        # (a checkout under /tmp), as every test tool needs
        tools = [harness.worker_tool("v", "echo", start="warm",
                                     filesystem=harness.with_tree({"write": paths}))]
        with Daemon(tools=tools) as d:
            wait_log(d, "tool v: its \"write\" paths are too long to send with each fork request")
            for name in ("v",):
                res = d.client().run([{"id": "a", "name": name, "arguments": {"k": 1}}])
                self.assertEqual(res.result("a"), {"ok": {"k": 1}})
                self.assertEqual(completed(res)["start"], "cold")
            self.assertFalse((d.stats().get("templates") or {}), "no template started")

    def test_template_crash_at_start(self):
        res = self.run1("h_crash")
        self.assertEqual(res.result("a"), {"ok": "cold"})
        self.assertEqual(completed(res)["start"], "cold")
        wait_log(self.d, "tool h_crash: warm template exited with status 3")
        deadline_wait(lambda: template(self.d, "h_crash")["restarts"] >= 2,
                      timeout=3 * WAIT, what="restarts of a crashing template")
        self.assertEqual(self.run1("c", {"mode": "echo"}).result("a"), {"ok": {"mode": "echo"}})

    def test_template_hang_at_start(self):
        wait_log(self.d, "tool h_hang: warm template hung: not ready in time; restarting it")
        res = self.run1("h_hang")
        self.assertEqual(res.result("a"), {"ok": "cold"})
        self.assertEqual(completed(res)["start"], "cold")

    def test_template_garbage_at_start(self):
        wait_log(self.d, "tool h_garbage: warm template answered garbage")
        self.assertEqual(self.run1("h_garbage").result("a"), {"ok": "cold"})

    def test_template_garbage_on_fork(self):
        wait_ready(self.d, "h_gfork")
        res = self.run1("h_gfork")
        te = tool_error(res)
        self.assertEqual(te["reason"], "handler_exit", te)
        self.assertIn("warm template died", te["message"])
        self.assertEqual(completed(res)["start"], "warm")
        wait_log(self.d, "tool h_gfork: warm template answered garbage: unknown control message")

    def test_template_hang_on_fork(self):
        wait_ready(self.d, "h_hfork")
        te = tool_error(self.run1("h_hfork"))
        self.assertIn("warm template died", te["message"])
        wait_log(self.d, "tool h_hfork: warm template hung: a fork request was not answered")

    def test_template_killed_during_a_call(self):
        t = wait_ready(self.d, "w_kill")
        c = self.d.client()
        c.start_batch([{"id": "k", "name": "w_kill"}], batch="kb")
        wait_log(self.d, "tool w_kill: stderr: testworker: sleeping")
        os.kill(t["pid"], signal.SIGKILL)
        evs = c.finish_batch("kb")
        done = [e for e in evs if e["event"] == "tool_execution_completed"][0]
        self.assertIn("warm template died", done["result"]["tool_error"]["message"], done)
        t2 = wait_ready(self.d, "w_kill", other_than=t["pid"])
        self.assertGreaterEqual(t2["restarts"], 1)

    @needs_python_lib
    def test_template_with_threads_refuses_to_fork(self):
        wait_ready(self.d, "py_thread")
        te = tool_error(self.run1("py_thread"))
        self.assertIn("threads: forking it is unsafe", te["message"], te)

    def test_max_forks_replaces_the_template(self):
        first = wait_ready(self.d, "w_max")
        pids = set()
        for _ in range(3):
            t = wait_ready(self.d, "w_max")
            pids.add(t["pid"])
            res = self.run1("w_max")
            self.assertEqual(res.result("a"), {"ok": {}})
        deadline_wait(lambda: template(self.d, "w_max")["restarts"] >= 1,
                      what="a template retired after max_forks")
        pids.add(wait_ready(self.d, "w_max")["pid"])
        self.assertGreaterEqual(len(pids), 2, pids)
        self.assertIn(first["pid"], pids)

    def test_a_spare_pid_1_serves_the_next_call_and_goes_with_its_template(self):
        """Where P1 shares the template's memory, the template makes the
        next call's P1 ahead, in a PID namespace of its own, while it idles;
        that P1 serves the next call, and goes when its template is retired
        (max_forks) or killed. Under the sanitizers P1 is a copy and none is
        made ahead (a copy made ahead would give the call a past template)."""
        want = 0 if harness.SANITIZED else 1

        def spares(tpid):
            def cond():
                kids = [k for k in children(tpid) if not gone(k)]
                return (kids,) if len(kids) == want else None
            return deadline_wait(cond, what="%d spare PID 1 of template %d" % (want, tpid))[0]

        t = wait_ready(self.d, "w_spare")
        self.assertEqual(children(t["pid"]), [])  # none before the first call
        self.warm1("w_spare", {"mode": "isolation"})
        kids = spares(t["pid"])
        if not want:
            return
        spare = kids[0]
        ns = os.readlink("/proc/%d/ns/pid" % spare)
        self.assertNotEqual(ns, os.readlink("/proc/%d/ns/pid" % t["pid"]))
        second = self.warm1("w_spare", {"mode": "isolation"}).result("a")["ok"]
        self.assertEqual(second["pidns"], ns)  # the spare's namespace served it
        self.assertEqual(second["pid"], 2)
        # and it was the call's PID 1: gone with the call, another made
        deadline_wait(lambda: gone(spare), what="the spare that served a call to be gone")
        (spare2,) = spares(t["pid"])
        self.assertNotEqual(spare2, spare)
        # the third call is its last (max_forks 3): retired, its spare goes
        self.warm1("w_spare", {"mode": "isolation"})
        t2 = wait_ready(self.d, "w_spare", other_than=t["pid"])
        deadline_wait(lambda: gone(spare2) and gone(t["pid"]),
                      what="the retired template and its spare to be gone")
        # killed: its spare goes with it
        self.warm1("w_spare", {"mode": "echo"})
        (spare3,) = spares(t2["pid"])
        os.kill(t2["pid"], signal.SIGKILL)
        deadline_wait(lambda: gone(spare3), what="a killed template's spare to be gone")
        wait_ready(self.d, "w_spare", other_than=t2["pid"])

    def test_a_spare_pid_1_serves_a_tool_without_a_view(self):
        """"filesystem": "host": no view in the fork requests, the same for
        every call, so the spare made after one call serves the next."""
        if harness.SANITIZED:
            self.skipTest("no spare under the sanitizers (P1 is a copy)")
        t = wait_ready(self.d, "w_spare_host")
        self.warm1("w_spare_host", {"mode": "isolation"})

        def one_spare():
            kids = [k for k in children(t["pid"]) if not gone(k)]
            return kids if len(kids) == 1 else None
        spare = deadline_wait(one_spare, what="the spare PID 1 of w_spare_host")[0]
        ns = os.readlink("/proc/%d/ns/pid" % spare)
        second = self.warm1("w_spare_host", {"mode": "isolation"}).result("a")["ok"]
        self.assertEqual(second["pidns"], ns)


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


PF_EXITING = 0x4


def gone(pid):
    """No such process, or one on its way out: its zombie (its parent has yet
    to reap it), or exiting (a call's PID 1 that has reported, while the
    kernel tears its namespaces down)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return True
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0] == "Z" or int(fields[6]) & PF_EXITING != 0


class ProcessLimit(unittest.TestCase):
    """"processes": a warm call may have as many processes of its own as a
    cold one. Where RLIMIT_NPROC enforces it (no cgroup), it counts every
    process of the uid, so this daemon's calls and templates get uids no
    other test's daemon hands out (--call-uids, picked by our pid)."""

    def test_process_limit_as_cold(self):
        """The template, its spare PID 1 and the call's PID 1 are not the
        call's (one more while the template has no spare: before it has made
        the next one, or under the sanitizers, where it makes none)."""
        harness.require_env()
        base = 1900000000 + (os.getpid() % 100000) * 256
        tools = [worker_tool("w_forks", "fork-many", start="warm", limits={"processes": 8}),
                 worker_tool("c_forks", "fork-many", limits={"processes": 8})]
        args = ["--call-uids", "%d-%d" % (base, base + 255)] if os.geteuid() == 0 else []
        with Daemon(tools=tools, args=args) as d:
            wait_ready(d, "w_forks")
            res = d.client().run([{"id": "a", "name": "w_forks", "arguments": {"n": 40}}])
            self.assertEqual(completed(res).get("start"), "warm", completed(res))
            warm = res.result("a")["ok"]
            res = d.client().run([{"id": "a", "name": "c_forks", "arguments": {"n": 40}}])
            cold = res.result("a")["ok"]
        self.assertEqual(cold["errno"], "EAGAIN", cold)
        self.assertEqual(warm["errno"], "EAGAIN", warm)
        self.assertIn(warm["forked"], (cold["forked"], cold["forked"] + 1), (warm, cold))


class Reload(unittest.TestCase):

    def test_reload_replaces_a_changed_template_only(self):
        harness.require_env()
        with Daemon(tools=[worker_tool("a", "echo", start="warm"),
                           worker_tool("b", "echo", start="warm")]) as d:
            a, b = wait_ready(d, "a"), wait_ready(d, "b")
            d.add_tool(worker_tool("a", "echo", start="warm", env={"CHANGED": "1"}), "a.json")
            d.proc.send_signal(signal.SIGHUP)
            a2 = wait_ready(d, "a", other_than=a["pid"])
            self.assertNotEqual(a2["pid"], a["pid"])
            self.assertEqual(wait_ready(d, "b")["pid"], b["pid"])
            res = d.client().run([{"id": "x", "name": "a", "arguments": {}}])
            self.assertEqual(res.result("x"), {"ok": {}})

    def test_bad_start_key_is_refused(self):
        harness.require_env()
        with Daemon(tools=[worker_tool("a", "echo")]) as d:
            d.add_tool(worker_tool("bad", "echo", start="hot"), "bad.json")
            d.proc.send_signal(signal.SIGHUP)
            wait_log(d, 'bad.json: start: expected "cold" or "warm"')
            d.add_tool(worker_tool("bad", "echo", max_forks=3), "bad.json")
            d.proc.send_signal(signal.SIGHUP)
            wait_log(d, 'bad.json: max_forks: only for a tool with "start": "warm"')


NobodyDaemon = harness.NobodyDaemon


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class Unprivileged(WarmCase):
    """The same warm calls from a daemon running as nobody (its calls' PID
    namespaces inside user namespaces of its own)."""

    @classmethod
    def make_daemon(cls):
        nobody = pwd.getpwnam("nobody")
        d = NobodyDaemon(tools=[worker_tool("w", None, start="warm", timeout_ms=30000),
                                worker_tool("c", None, timeout_ms=30000),
                                worker_tool("w_spare", None, start="warm", max_forks=3),
                                py_tool("py", "warm_state.py", start="warm")], start=False)
        d.gid = nobody.pw_gid
        harness.give_work_dir(d)
        return harness.started(d)

    test_isolation_as_cold = Warm.test_isolation_as_cold
    test_environment_as_cold = Warm.test_environment_as_cold
    test_nothing_passes_between_c_calls = Warm.test_nothing_passes_between_c_calls
    test_nothing_passes_between_python_calls = Warm.test_nothing_passes_between_python_calls
    test_setsid_grandchild_gone_after_cancel = Warm.test_setsid_grandchild_gone_after_cancel
    test_a_spare_pid_1_serves_the_next_call_and_goes_with_its_template = \
        Warm.test_a_spare_pid_1_serves_the_next_call_and_goes_with_its_template

    def test_identity_is_the_daemons(self):
        ident = self.warm1("w", {"mode": "identity"}).result("a")["ok"]
        uid = pwd.getpwnam("nobody").pw_uid
        self.assertEqual((ident["uid"], ident["euid"]), (uid, uid))


if __name__ == "__main__":
    unittest.main()
