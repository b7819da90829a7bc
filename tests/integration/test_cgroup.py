"""cgroup v2 per call: --containment cgroup with --cgroup DIR or a
delegated cgroup of the daemon's own, cgroup.kill reaching setsid() strays,
the calls' cgroups removed once empty, leftovers of a SIGKILLed daemon killed
at the next start, --check, and memory_mb / processes as memory.max /
pids.max where those controllers are available, with an OOM kill named in
the cause (else RLIMIT_AS / RLIMIT_NPROC, which are tested here too).

Each class makes its own cgroup under the test's own (a fresh child of the
cgroup2 mount) and removes it afterwards; without a writable cgroup v2 the
classes are skipped, saying why.
"""

import os
import re
import signal
import subprocess
import sys
import unittest
import uuid

import harness
from harness import (Daemon, DaemonTestCase, SCALE, WAIT, assert_token_gone, deadline_wait,
                     new_token, wait_token_present, worker_tool)
import test_isolation
from test_isolation import IsoCase, kill_token, wait_log

GONE = 1.0 * SCALE


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"] and left.split()[3] == "/":
                return left.split()[4]
    return None


def own_cgroup():
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def make_test_cgroup():
    """A fresh cgroup for one test class (its path), or SkipTest saying why."""
    harness.require_env()
    mnt, own = cgroup2_mount(), own_cgroup()
    if not mnt or own is None:
        raise unittest.SkipTest("no cgroup v2 on this host")
    path = os.path.join(mnt + own, "toolexecd-test-" + uuid.uuid4().hex[:12])
    try:
        os.mkdir(path)
    except OSError as e:
        raise unittest.SkipTest("cannot make a cgroup under %s: %s" % (mnt + own, e))
    if not os.path.exists(os.path.join(path, "cgroup.kill")):
        os.rmdir(path)
        raise unittest.SkipTest("no cgroup.kill (Linux 5.14 or later)")
    return path


def controllers(path):
    with open(os.path.join(path, "cgroup.controllers")) as f:
        return f.read().split()


def remove_cgroup(path):
    """Kill what is left in path's tree and remove it, deepest first."""
    if not os.path.isdir(path):
        return
    for root, dirs, _ in os.walk(path, topdown=False):
        for d in dirs:
            sub = os.path.join(root, d)
            try:
                with open(os.path.join(sub, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                pass
            deadline_wait(lambda: _rmdir(sub), what="cgroup %s to empty" % sub)
    deadline_wait(lambda: _rmdir(path), what="cgroup %s to empty" % path)


def _rmdir(p):
    try:
        os.rmdir(p)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def call_cgroups(path):
    return sorted(d for d in os.listdir(path) if d.startswith("call-"))


def start_fails(d):
    """Start d (made with start=False), which must exit 1 at once; its stderr."""
    try:
        d.spawn()
        rc = d.proc.wait(timeout=WAIT)
        err = d.stderr()
    finally:
        d.stop(check=False)
    if rc != 1:
        raise AssertionError("toolexecd exited %s, not 1; stderr:\n%s" % (rc, err))
    return err


def cgroup_empty(path):
    try:
        with open(os.path.join(path, "cgroup.events")) as f:
            return "populated 0" in f.read()
    except FileNotFoundError:
        return True


def check_output(*args):
    p = subprocess.run([harness.TOOLEXECD, "--check"] + list(args), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


class CgroupCase(IsoCase):
    """A daemon whose calls' cgroups go under a fresh test cgroup."""

    CONTAINMENT = "cgroup"

    @classmethod
    def setUpClass(cls):
        cls.cg = make_test_cgroup()
        cls.ARGS = ["--containment", cls.CONTAINMENT, "--cgroup", cls.cg] + cls.EXTRA
        try:
            super().setUpClass()
        except BaseException:
            remove_cgroup(cls.cg)
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            remove_cgroup(cls.cg)

    EXTRA = []

    def assertCallCgroupsEmpty(self):
        """Every call's cgroup is empty (they are kept for reuse), but those
        that hold a spare (daemon/run/spares.c: made for a call to come)."""
        def spare_only(path):
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids = [int(x) for x in f.read().split()]
            except FileNotFoundError:
                return True
            return set(pids) <= set(harness.spare_pids(self.daemon.proc.pid))

        deadline_wait(lambda: all(cgroup_empty(os.path.join(self.cg, d)) or
                                  spare_only(os.path.join(self.cg, d))
                                  for d in call_cgroups(self.cg)),
                      what="the calls' cgroups under %s to be empty" % self.cg)


# -- containment by cgroup.kill -------------------------------------------------

class CgroupContainment(test_isolation.Containment, CgroupCase):
    """The setsid() tests of test_isolation.Containment again, with a cgroup
    per call and no PID namespace: cgroup.kill must reach the stray."""

    @classmethod
    def setUpClass(cls):
        CgroupCase.setUpClass.__func__(cls)

    @classmethod
    def tearDownClass(cls):
        CgroupCase.tearDownClass.__func__(cls)

    @classmethod
    def tools(cls):
        return super().tools() + [
            {"name": "whereami", "description": "its own cgroup", "protocol": "plain",
             "schema": {"type": "object"}, "command": ["/bin/cat", "/proc/self/cgroup"]},
            {"name": "mypid", "description": "its pid as seen by itself", "protocol": "plain",
             "schema": {"type": "object"}, "command": ["/bin/sh", "-c", "echo $$"]}]

    LOGGED = "containment: a cgroup per call under "

    def test_worker_runs_in_its_own_call_cgroup(self):
        res = self.c.run([{"id": "a", "name": "whereami"}, {"id": "b", "name": "whereami"}])
        rel = self.cg[len(cgroup2_mount()):]
        seen = set()
        for cid in ("a", "b"):
            text = self.assertOk(res, cid)
            m = re.search(r"^0::(.*)$", text, re.M)
            self.assertIsNotNone(m, text)
            self.assertRegex(m.group(1), "^" + re.escape(rel) + r"/call-\d+$")
            seen.add(m.group(1))
        self.assertEqual(len(seen), 2, "two calls shared a cgroup: %s" % seen)

    def test_pid_namespace_in_cgroup_mode_too(self):
        # every call gets a PID namespace of its own where the kernel allows
        # one (its init is PID 1, the tool PID 2), whatever ends its processes
        pid = self.assertOk(self.c.run([{"id": "p", "name": "mypid"}]), "p")
        self.assertEqual(int(pid), 2)

    def test_call_cgroups_are_emptied_reused_and_removed_at_stop(self):
        tok = new_token("cg-rm")
        self.addCleanup(kill_token, tok)
        res = self.c.run([{"id": "g", "name": "sg", "arguments": {"token": tok, "then": "ok"}},
                          {"id": "w", "name": "whereami"}])
        self.assertOk(res, "g", {"token": tok})
        assert_token_gone(tok, timeout=GONE, what="setsid grandchild")
        self.assertCallCgroupsEmpty()
        # one call at a time reuses an emptied cgroup rather than making one
        before = call_cgroups(self.cg)
        for i in range(5):
            self.assertOk(self.c.run([{"id": "w", "name": "whereami"}]), "w")
            self.assertCallCgroupsEmpty()
        self.assertEqual(call_cgroups(self.cg), before)

    def test_daemon_stop_removes_the_call_cgroups(self):
        cg = make_test_cgroup()
        self.addCleanup(remove_cgroup, cg)
        d = Daemon(self.tools(), ["--containment", "cgroup", "--cgroup", cg])
        try:
            res = d.client().run([{"id": str(i), "name": "whereami"} for i in range(4)])
            self.assertEqual(len(res.order("tool_execution_completed")), 4)
            self.assertTrue(call_cgroups(cg))
        finally:
            d.stop()
        self.assertEqual(call_cgroups(cg), [])


class StaleCgroups(unittest.TestCase):
    """A daemon SIGKILLed in cgroup mode leaves its calls' cgroups behind.
    Each call's PID namespace takes its setsid() strays down with the daemon;
    where the kernel gives no PID namespace, strays would stay in those
    cgroups (nothing but a service manager could kill them then): one is put
    there by hand. The next daemon on the same cgroup kills it and removes
    the cgroups."""

    def setUp(self):
        self.cg = make_test_cgroup()
        self.addCleanup(remove_cgroup, self.cg)

    def test_next_start_kills_what_a_killed_daemon_left(self):
        tok = new_token("cg-stale")
        self.addCleanup(kill_token, tok)
        args = ["--containment", "cgroup", "--cgroup", self.cg]
        d = Daemon([worker_tool("sg", "setsid-grandchild", timeout_ms=60000)], args)
        try:
            c = d.client()
            c.start_batch([{"id": "g", "name": "sg",
                            "arguments": {"token": tok, "then": "sleep"}}], batch="s")
            wait_token_present(tok)
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait(timeout=WAIT)
        finally:
            d.stop(check=False)
        # the worker's init died with the daemon (PR_SET_PDEATHSIG), and the
        # stray with the init's PID namespace; the call's cgroup is left
        assert_token_gone(tok, timeout=GONE, what="the stray of the killed daemon's call")
        left = call_cgroups(self.cg)
        self.assertTrue(left)
        # a stray as a kernel without PID namespaces would leave it
        stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", tok])
        self.addCleanup(stray.wait)
        with open(os.path.join(self.cg, left[0], "cgroup.procs"), "w") as f:
            f.write(str(stray.pid))
        self.assertTrue(wait_token_present(tok))
        with Daemon([], args) as d2:
            assert_token_gone(tok, timeout=GONE, what="the stray of the killed daemon")
            self.assertEqual(call_cgroups(self.cg), [])
            self.assertIn("left by an earlier run; killed and removed", d2.stderr())


# -- a delegated cgroup found by the daemon itself -------------------------------

def in_cgroup(cg):
    """A command prefix that runs the rest of the command inside cgroup cg."""
    return ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cg]


class InCgroupDaemon(Daemon):
    """A daemon started inside cgroup DIR (marked delegated, as systemd's
    Delegate=yes marks it)."""

    def __init__(self, cg, *a, **kw):
        self.cg = cg
        super().__init__(*a, **kw)

    def command(self):
        return in_cgroup(self.cg) + super().command()


class DelegatedCgroup(unittest.TestCase):
    def setUp(self):
        self.cg = make_test_cgroup()
        self.addCleanup(remove_cgroup, self.cg)

    def mark_delegated(self):
        try:
            os.setxattr(self.cg, "trusted.delegate", b"1")
        except OSError as e:
            self.skipTest("cannot set trusted.delegate on %s: %s" % (self.cg, e))

    def test_delegated_cgroup_is_found_and_the_daemon_moves_out_of_it(self):
        self.mark_delegated()
        tools = [{"name": "whereami", "description": "its own cgroup", "protocol": "plain",
                  "schema": {"type": "object"}, "command": ["/bin/cat", "/proc/self/cgroup"]}]
        with InCgroupDaemon(self.cg, tools, ["--containment", "cgroup"]) as d:
            wait_log(d, "containment: a cgroup per call under %s" % self.cg)
            # the daemon left the base for a leaf of its own, so that the
            # base may hand controllers to the calls
            with open("/proc/%d/cgroup" % d.proc.pid) as f:
                mine = f.read()
            rel = self.cg[len(cgroup2_mount()):]
            self.assertIn("0::%s/supervisor\n" % rel, mine)
            c = d.client()
            text = c.run([{"id": "w", "name": "whereami"}]).result("w")["ok"]
            self.assertRegex(text, r"0::" + re.escape(rel) + r"/call-\d+$")

    def test_auto_takes_cgroup_containment_in_a_delegated_cgroup(self):
        # systemd kills a delegated unit's cgroup if the daemon dies, so the
        # cheapest mode holds there even against a SIGKILL
        self.mark_delegated()
        with InCgroupDaemon(self.cg, [], []) as d:
            wait_log(d, "containment: a cgroup per call under %s" % self.cg)

    def test_auto_with_cgroup_dir_keeps_pid_namespaces(self):
        # no service manager behind --cgroup DIR: a PID namespace per call,
        # the cgroups only for limits
        if test_isolation.host_containment() != "pidns":
            self.skipTest("no PID namespaces here")
        with Daemon([], ["--cgroup", self.cg]) as d:
            wait_log(d, "containment: a PID namespace per call")
            wait_log(d, "cgroups: a cgroup per call under %s" % self.cg)

    def test_started_in_the_supervisor_subgroup(self):
        # systemd's DelegateSubgroup=supervisor starts the daemon there
        self.mark_delegated()
        sub = os.path.join(self.cg, "supervisor")
        os.mkdir(sub)
        with InCgroupDaemon(sub, [], []) as d:
            wait_log(d, "containment: a cgroup per call under %s, " % self.cg)

    def test_undelegated_cgroup_is_not_used(self):
        err = start_fails(InCgroupDaemon(self.cg, [], ["--containment", "cgroup"], start=False))
        self.assertIn("--containment cgroup: no cgroup to manage", err)
        self.assertIn("not delegated", err)

    def test_check_reports_the_delegated_cgroup(self):
        self.mark_delegated()
        p = subprocess.run(in_cgroup(self.cg) + [harness.TOOLEXECD, "--check"],
                           stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=WAIT)
        out = p.stdout.decode()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(out, r"base:\s+%s\n" % re.escape(self.cg))
        self.assertRegex(out, r"delegated:\s+yes\n")
        self.assertRegex(out, r"per-call cgroups:\s+yes\n")
        self.assertRegex(out, r"containment:\s+cgroup ")


# -- options and --check ----------------------------------------------------------

class Options(unittest.TestCase):
    def test_check_with_cgroup_dir(self):
        cg = make_test_cgroup()
        self.addCleanup(remove_cgroup, cg)
        rc, out, err = check_output("--cgroup", cg)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"base:\s+%s\n" % re.escape(cg))
        self.assertRegex(out, r"delegated:\s+yes \(--cgroup\)\n")
        self.assertRegex(out, r"cgroup\.kill:\s+yes\n")
        self.assertRegex(out, r"per-call cgroups:\s+yes\n")
        want_mem = "memory.max" if "memory" in controllers(cg) else "RLIMIT_AS"
        self.assertRegex(out, r"memory_mb:\s+%s\n" % re.escape(want_mem))
        self.assertEqual([d for d in os.listdir(cg) if d.startswith("probe-")], [],
                         "--check left its probe cgroup behind")

    def test_check_names_why_there_are_no_per_call_cgroups(self):
        harness.require_env()
        rc, out, err = check_output()
        self.assertEqual(rc, 0, err)
        if "cgroup v2:           no" not in out:
            self.assertRegex(out, r"per-call cgroups:\s+(yes|no \(.+\))\n")

    def test_bad_cgroup_dir_is_refused(self):
        err = start_fails(Daemon([], ["--cgroup", "/nonexistent/cg"], start=False))
        self.assertIn("--cgroup /nonexistent/cg: not a cgroup v2 directory", err)

    def test_plain_directory_is_not_a_cgroup(self):
        d = Daemon([], start=False)
        d.args = ["--cgroup", d.tmp]
        self.assertIn("--cgroup %s: not a cgroup v2 directory" % d.tmp, start_fails(d))


# -- memory_mb and processes ----------------------------------------------------

# RLIMIT_NPROC counts every process of the worker's uid on the host, so the
# process limit is tested under a uid no other test runs workers as.
# The memory hog is built without sanitizers (an ASan build cannot start
# under RLIMIT_AS at all).
MEMHOG = os.environ.get("TE_MEMHOG", "")
LIMIT_TOOLS = [
    {"name": "alloc64", "description": "allocates and touches memory", "protocol": "plain",
     "schema": {"type": "object"}, "command": [MEMHOG], "limits": {"memory_mb": 64},
     "timeout_ms": 30000},
    worker_tool("forks8", "fork-many", limits={"processes": 8}, timeout_ms=30000,
                user="games"),
]


class LimitsMixin:
    """memory_mb and processes hold however they are enforced."""

    def test_memory_within_limit(self):
        res = self.c.run([{"id": "m", "name": "alloc64", "arguments": {"mb": 8}}])
        self.assertOk(res, "m", {"allocated_mb": 8})

    def test_processes_limit(self):
        res = self.c.run([{"id": "f", "name": "forks8", "arguments": {"n": 40}}])
        v = self.assertOk(res, "f")
        self.assertEqual(v["errno"], "EAGAIN", v)
        self.assertLess(v["forked"], 8, v)


class RlimitLimits(LimitsMixin, IsoCase):
    """Without cgroups: RLIMIT_AS fails the allocation inside the tool, and
    RLIMIT_NPROC the fork (the workers run as an unprivileged user)."""

    TOOLS = LIMIT_TOOLS

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("RLIMIT_NPROC binds only a dedicated worker uid (root daemon)")
        super().setUpClass()

    def test_memory_over_rlimit_as_fails_inside_the_tool(self):
        res = self.c.run([{"id": "m", "name": "alloc64", "arguments": {"mb": 256}}])
        self.assertEqual(res.result("m"), {"ok": {"errno": "ENOMEM"}})


class CgroupLimits(LimitsMixin, CgroupCase):
    """With a cgroup per call: memory.max and pids.max where the controllers
    are available to the test's cgroup, RLIMIT_AS / RLIMIT_NPROC where not;
    the start-up log says which."""

    TOOLS = LIMIT_TOOLS
    CONTAINMENT = "auto"  # a PID namespace, with cgroups for the limits

    def test_log_says_how_limits_are_enforced(self):
        mem = "memory.max" if "memory" in controllers(self.cg) else "RLIMIT_AS"
        pids = "pids.max" if "pids" in controllers(self.cg) else "RLIMIT_NPROC"
        wait_log(self.daemon, "memory_mb as %s, processes as %s" % (mem, pids))

    def test_oom_kill_is_named_in_the_cause(self):
        if "memory" not in controllers(self.cg):
            self.skipTest("the memory controller is not available to %s (cgroup.controllers: "
                          "%s)" % (self.cg, " ".join(controllers(self.cg)) or "none"))
        res = self.c.run([{"id": "m", "name": "alloc64", "arguments": {"mb": 256}}])
        te = self.assertToolError(res, "m", "handler_exit")
        self.assertEqual(te["cause"].get("signal"), "SIGKILL", te)
        self.assertEqual(te["cause"]["oom_kill"]["limit_mb"], 64, te)
        self.assertIn("out of memory at its limit of 64 MiB", te["message"])
        self.assertCallCgroupsEmpty()

    def test_memory_over_limit_fails(self):
        res = self.c.run([{"id": "m", "name": "alloc64", "arguments": {"mb": 256}}])
        r = res.result("m")
        if "memory" in controllers(self.cg):
            self.assertIn("oom_kill", r["tool_error"]["cause"], r)
        else:
            self.assertEqual(r, {"ok": {"errno": "ENOMEM"}})


if __name__ == "__main__":
    harness.main()
