"""Calls are started by the spawner (daemon/run/spawner.c, spawnproc.c), a
process of their own, off the daemon's loop.

- A call's process is the spawner's child, and the spawner the daemon's.
- The spawner holds few descriptors whatever runs: a start copies its table,
  not the daemon's, which grows with the calls in flight.
- A spawner that dies (SIGKILL) takes its running calls with it: each ends
  with a typed error (handler_exit, cause.spawner_error); a new spawner is
  started, and the next calls run.
- No spawner outlives the daemon (SIGKILL of the daemon).
- "--spawner no": the loop starts calls itself, as before.
- A call that took a spare and cannot start (no descriptor), or whose
  request the socket refuses for good (too big for its buffer), ends with a
  typed error; the spare is dropped, and the calls behind it run.
- A root spawner empties its bounding set once, not in each call: a call
  (and a spare) is born with it empty, while a tool run as root by the
  operator's choice ("user": "root"), cold or from a spare, keeps the full
  set and its capabilities.
Root and unprivileged daemon (the failures: root).
"""

import os
import resource
import shutil
import signal
import sys
import unittest

import harness
from harness import Daemon, DaemonTestCase, worker_tool

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
WHO = r"""
import json, os, sys
sys.stdin.readline()
print(json.dumps({"uid": os.getuid(), "cwd": os.getcwd(), "tmp": os.listdir("/tmp")}))
open("/tmp/mine", "w").write("x")
"""
FDS = r"""
import json, os, sys
sys.stdin.readline()
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = os.readlink("/proc/self/fd/" + fd)
    except OSError:
        pass
with open("/proc/1/comm") as f:
    init = f.read().strip()
print(json.dumps({"fds": fds, "tool": os.environ.get("TOOLEXEC_TOOL"), "init": init,
                  "cwd": os.getcwd()}))
"""
TOOLS = [worker_tool("echo", "echo"),
         # denies what a waiting init takes its call with (init.c)
         worker_tool("denier", "echo", deny_syscalls=["recvmsg", "dup3"]),
         {"name": "fds", "description": "my descriptors", "schema": {"type": "object"},
          "command": [PYTHON, "-c", FDS], "protocol": "plain"},
         worker_tool("sleep", "sleep", timeout_ms=60000),
         worker_tool("late", "echo"),
         # an environment larger than a waiting init takes (report.h)
         worker_tool("bigenv", "echo", env={"BIG": "x" * 40000}),
         {"name": "who", "description": "who am I", "schema": {"type": "object"},
          "command": [PYTHON, "-c", WHO], "protocol": "plain"}]


def stat_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    return s[s.index("(") + 1:s.rindex(")")], s[s.rindex(")") + 2:].split()


def children(pid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                comm, fields = stat_of(int(name))
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append((int(name), comm))
    return out


def calls_of(sp):
    """The spawner's children that run a call: its init (a spare that has
    not been taken has not exec'd: toolexecd-spare, or for a moment the
    spawner's own name)."""
    return [p for p, comm in children(sp) if comm not in ("toolexecd-spare", "toolexecd-spawn")]


def spares_of(sp):
    return [p for p, comm in children(sp) if comm == "toolexecd-spare"]


def spare_like(sp):
    """The spawner's children that are spares, waiting or still being made
    (forked, not exec'd yet: the spawner's own name)."""
    return [p for p, comm in children(sp) if comm in ("toolexecd-spare", "toolexecd-spawn")]


def spawner_of(daemon_pid):
    found = [p for p, comm in children(daemon_pid) if comm == "toolexecd-spawn"]
    return found[0] if len(found) == 1 else None


def alive(pid):
    try:
        return stat_of(pid)[1][0] != "Z"
    except OSError:
        return False


class Checks:
    def spawner(self):
        return harness.deadline_wait(lambda: spawner_of(self.daemon.proc.pid),
                                     what="the daemon's one spawner")

    def test_calls_are_the_spawners_children(self):
        sp = self.spawner()
        c = self.daemon.client()
        calls = [{"id": "s%d" % i, "name": "sleep"} for i in range(6)]
        c.start_batch(calls, batch="hold", max_concurrency=6)
        kids = harness.deadline_wait(
            lambda: (lambda k: k if len(k) == 6 else None)(calls_of(sp)),
            what="six calls under the spawner")
        # each call's process is the spawner's, none the daemon's own
        self.assertEqual([p for p, comm in children(self.daemon.proc.pid)
                          if comm != "toolexecd-spawn" and p in kids], [])
        c.send({"op": "cancel", "batch": "hold"})
        c.finish_batch("hold")

    def test_a_spawner_that_dies_ends_its_calls_and_is_replaced(self):
        sp = self.spawner()
        c = self.daemon.client()
        calls = [{"id": "s", "name": "sleep"}]
        before = self.daemon.stderr().count("testworker: sleeping")
        c.start_batch(calls, batch="victim")
        harness.deadline_wait(
            lambda: self.daemon.stderr().count("testworker: sleeping") > before,
            what="the call to run")
        os.kill(sp, signal.SIGKILL)
        res = harness.BatchResult(calls, c.finish_batch("victim"))
        te = res.result("s")["tool_error"]
        self.assertEqual(te["reason"], "handler_exit", te)
        self.assertIn("spawner", te["cause"].get("spawner_error", ""), te)
        new = harness.deadline_wait(
            lambda: (lambda p: p if p and p != sp else None)(spawner_of(self.daemon.proc.pid)),
            what="a new spawner")
        self.assertNotEqual(new, sp)
        self.assertIn("the spawner exited", self.daemon.stderr())
        c.send({"op": "stats"})
        st = c.recv_for(lambda e: e.get("event") == "stats")["spawner"]
        self.assertEqual((st["pid"], st["calls"]), (new, 0), st)
        self.assertGreaterEqual(st["restarts"], 1, st)
        res = c.run([{"id": "e", "name": "echo", "arguments": {"n": 1}}],
                    batch=harness.new_token("after"))
        self.assertEqual(res.result("e"), {"ok": {"n": 1}})
        self.assertEqual(self.daemon.proc.poll(), None)


class SpareChecks:
    """Sandboxes prepared ahead (daemon/run/spares.c): made after a call of a
    tool, each taken by one call, with its own uid and directory."""

    def spares(self, sp, n=2):
        return harness.deadline_wait(lambda: (lambda s: s if len(s) >= n else None)(spares_of(sp)),
                                     what="%d spares" % n)

    def spare_dirs(self, sp):
        out = {}
        for p in spares_of(sp):
            try:
                out[os.readlink("/proc/%d/cwd" % p)] = p
            except OSError:
                pass
        return out

    def test_each_call_takes_a_spare_of_its_own(self):
        sp = self.spawner()
        c = self.daemon.client()
        c.run([{"id": "w", "name": "who"}], batch=harness.new_token("first"))
        seen = set()
        for i in range(4):
            # the spares ready now (of any tool), by the directory each has
            # entered: the directory of the call that takes it; two of who's
            # among them (made once the spawner holds no call: spares.c)
            harness.deadline_wait(
                lambda: self.daemon.stats()["spawner"]["spares"].get("who", 0) >= 2,
                what="two ready spares of who")
            harness.deadline_wait(lambda: len(self.spare_dirs(sp)) >= 2, what="spares")
            dirs = self.spare_dirs(sp)
            res = c.run([{"id": "a", "name": "who"}, {"id": "b", "name": "who"}],
                        batch=harness.new_token("pair"), max_concurrency=2)
            a, b = res.result("a")["ok"], res.result("b")["ok"]
            # one call's directory and /tmp are never another's
            self.assertNotEqual(a["cwd"], b["cwd"])
            self.assertNotIn("mine", a["tmp"] + b["tmp"])  # another call's /tmp file
            self.assertFalse({a["cwd"], b["cwd"]} & seen)
            seen |= {a["cwd"], b["cwd"]}
            if os.geteuid() == 0 and self.ROOT:
                self.assertNotEqual(a["uid"], b["uid"])  # each its own uid
            # at least one of the two ran in a spare made before it (a call
            # that finds none ready starts afresh), and that spare is gone
            taken = [dirs[x["cwd"]] for x in (a, b) if x["cwd"] in dirs]
            self.assertTrue(taken, "no call took a spare: %s, %s not in %s"
                            % (a["cwd"], b["cwd"], sorted(dirs)))
            for p in taken:
                harness.deadline_wait(lambda: not alive(p), what="a taken spare's call to end")

    def test_a_spare_waits_in_its_init_and_its_call_gets_its_own(self):
        # a spare execs its call's init ahead and waits there (sandbox.h):
        # a call that takes it pays for a message and a fork, not an exec
        sp = self.spawner()
        c = self.daemon.client()
        c.run([{"id": "f", "name": "fds"}], batch=harness.new_token("first"))
        init = os.path.realpath(os.path.join(os.path.dirname(harness.TOOLEXECD), "toolexecd-init"))
        for p in self.spares(sp, 1):
            try:
                exe, fds = os.path.realpath(os.readlink("/proc/%d/exe" % p)), sorted(
                    int(f) for f in os.listdir("/proc/%d/fd" % p))
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    args = f.read().split(b"\0")[1:]
            except OSError:
                continue  # taken and gone meanwhile
            self.assertEqual(exe, init, "spare %d" % p)
            # no tool's command line until it has a call: it takes it then
            self.assertEqual(args, [b""], "spare %d" % p)
            # the call's standard descriptors, its report pipe and the
            # spawner's socket: nothing else waits with it
            self.assertEqual(fds, [0, 1, 2, 3, 4], "spare %d" % p)
        harness.deadline_wait(lambda: len(self.spare_dirs(sp)) >= 1, what="a spare")
        dirs = self.spare_dirs(sp)
        got = None
        for i in range(5):  # a call that finds none ready starts afresh
            got = c.run([{"id": "f", "name": "fds"}], batch=harness.new_token("f"))
            got = got.result("f")["ok"]
            if got["cwd"] in dirs:
                break
            harness.deadline_wait(lambda: len(self.spare_dirs(sp)) >= 1, what="a spare")
            dirs = self.spare_dirs(sp)
        self.assertIn(got["cwd"], dirs, "no call took a spare")
        self.assertEqual((got["tool"], got["init"]), ("fds", "toolexecd-init"), got)
        # none of the spare's descriptors (socket, report pipe) reached the tool
        others = {fd: t for fd, t in got["fds"].items()
                  if int(fd) > 2 and (t.startswith("socket:") or t.startswith("pipe:"))}
        self.assertEqual(others, {}, got)

    def test_a_tool_that_denies_what_an_init_takes_its_call_with_still_gets_spares(self):
        # its spares wait before their exec, as before: a waiting init
        # would find its recvmsg denied (spares.c: init_waits)
        sp = self.spawner()
        c = self.daemon.client()
        c.run([{"id": "d", "name": "denier", "arguments": {"n": 0}}],
              batch=harness.new_token("first"))
        harness.deadline_wait(
            lambda: self.daemon.stats()["spawner"]["spares"].get("denier", 0) >= 1,
            what="a ready spare of denier")
        for i in range(3):
            res = c.run([{"id": "d", "name": "denier", "arguments": {"n": i}}],
                        batch=harness.new_token("d"))
            self.assertEqual(res.result("d"), {"ok": {"n": i}})
        self.assertNotIn("died before their call", self.daemon.stderr())

    def test_spares_are_made_once_no_call_is_in_flight(self):
        # made while a call runs, a spare's set-up competes with it for the
        # loop, the spawner and the CPUs: a refill waits (spares.c)
        sp = self.spawner()
        c = self.daemon.client()
        before = self.daemon.stderr().count("testworker: sleeping")
        c.start_batch([{"id": "s", "name": "sleep"}], batch="inflight")
        harness.deadline_wait(
            lambda: self.daemon.stderr().count("testworker: sleeping") > before,
            what="the call to run")
        # every request sent before the sleep's start is done with by now
        # (the spawner takes them in order): its spares are stable. Spares
        # only, by name: the late call's own init may still be exiting
        # after its result (a child of the spawner too, toolexecd-init)
        kids = set(spare_like(sp))
        res = self.daemon.client().run([{"id": "l", "name": "late", "arguments": {"n": 1}}],
                                       batch=harness.new_token("late"))
        self.assertEqual(res.result("l"), {"ok": {"n": 1}})
        self.assertEqual(set(spare_like(sp)) - kids, set(), "a spare made while a call runs")
        self.assertEqual(self.daemon.stats()["spawner"]["spares"].get("late", 0), 0)
        c.send({"op": "cancel", "batch": "inflight"})
        c.finish_batch("inflight")
        harness.deadline_wait(
            lambda: self.daemon.stats()["spawner"]["spares"].get("late", 0) >= 1,
            what="late's spares, once no call runs")

    def test_a_call_larger_than_a_spare_takes_starts_afresh(self):
        c = self.daemon.client()
        c.run([{"id": "b", "name": "bigenv", "arguments": {"n": 0}}],
              batch=harness.new_token("first"))
        harness.deadline_wait(
            lambda: self.daemon.stats()["spawner"]["spares"].get("bigenv", 0) >= 1,
            what="a ready spare of bigenv")
        for i in range(2):
            res = c.run([{"id": "b", "name": "bigenv", "arguments": {"n": i}}],
                        batch=harness.new_token("b"))
            self.assertEqual(res.result("b"), {"ok": {"n": i}})

    def test_a_reload_drops_the_spares(self):
        sp = self.spawner()
        c = self.daemon.client()
        c.run([{"id": "w", "name": "who"}], batch=harness.new_token("first"))
        old = self.spares(sp)
        os.kill(self.daemon.proc.pid, signal.SIGHUP)
        harness.deadline_wait(lambda: not any(alive(p) for p in old),
                              what="the spares made before the reload to go")
        res = c.run([{"id": "w", "name": "who"}], batch=harness.new_token("after"))
        self.assertIn("ok", res.result("w"))
        self.assertFalse(set(self.spares(sp)) & set(old))


# spares are off by default (daemon/run/spares.c says why)
ARGS = ["--spares", "2"]


class RootDaemon(Checks, SpareChecks, DaemonTestCase):
    ROOT = True
    ARGS = ARGS
    TOOLS = TOOLS


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Checks, SpareChecks, unittest.TestCase):
    ROOT = False

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.daemon = harness.nobody_daemon(TOOLS, args=ARGS)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()


CAPS = r"""
import json, sys
sys.stdin.readline()
with open("/proc/self/status") as f:
    st = dict(l.split(":", 1) for l in f if l.startswith("Cap"))
print(json.dumps({k: v.strip() for k, v in st.items()}))
"""


def caps_tool(name, **fields):
    d = {"name": name, "description": "capabilities", "schema": {"type": "object"},
         "command": [PYTHON, "-c", CAPS], "protocol": "plain"}
    d.update(fields)
    return d


def status_caps(pid):
    with open("/proc/%d/status" % pid) as f:
        return {k: v.strip() for k, v in (l.split(":", 1) for l in f if l.startswith("Cap"))}


@unittest.skipUnless(os.geteuid() == 0 and status_caps(os.getpid())["CapBnd"] != "0" * 16,
                     "needs root with a bounding set")
class BoundingSetOnce(DaemonTestCase):
    """The spawner's thread that starts calls has an empty bounding set
    (daemon/confine/sandbox_bset.c); what a call is born with must still be
    what step 9b gives it."""
    ARGS = ["--spares", "1"]
    TOOLS = [caps_tool("caps"), caps_tool("asroot", user="root")]

    def test_calls_and_root_calls_get_their_own_sets(self):
        full = status_caps(os.getpid())["CapBnd"]
        sp = harness.deadline_wait(lambda: spawner_of(self.daemon.proc.pid),
                                   what="the daemon's one spawner")
        # emptied once, in the spawner itself (as it starts: it is named
        # first, which is how it was found)
        harness.deadline_wait(lambda: status_caps(sp)["CapBnd"] == "0" * 16,
                              what="the spawner's bounding set emptied")
        self.assertEqual(status_caps(sp)["CapEff"], status_caps(self.daemon.proc.pid)["CapEff"])
        c = self.daemon.client()
        for name in ("caps", "asroot"):
            # the first call cold, the next ones from a spare made after it
            for i in range(3):
                if i:
                    harness.deadline_wait(
                        lambda: self.daemon.stats()["spawner"]["spares"].get(name, 0) == 1,
                        what="a ready spare of " + name)
                got = c.run([{"id": "c", "name": name}], batch=harness.new_token(name))
                got = got.result("c")["ok"]
                if name == "caps":
                    self.assertEqual(got["CapBnd"], "0" * 16, got)
                    self.assertEqual(got["CapEff"], "0" * 16, got)
                else:
                    self.assertEqual(got["CapBnd"], full, got)
                    self.assertNotEqual(got["CapEff"], "0" * 16, got)


class FewDescriptors(DaemonTestCase):
    """The spawner's table is 0-2, its socket and its signalfd, however many
    calls run: a start copies it, not the daemon's (without spares, which
    hold three each)."""
    TOOLS = TOOLS
    ARGS = ["--spares", "0"]

    def test_the_spawners_table_does_not_grow_with_the_calls(self):
        sp = harness.deadline_wait(lambda: spawner_of(self.daemon.proc.pid), what="the spawner")
        self.assertEqual(len(os.listdir("/proc/%d/fd" % sp)), 5)
        calls = [{"id": "s%d" % i, "name": "sleep"} for i in range(12)]
        self.c.start_batch(calls, batch="hold", max_concurrency=12)
        harness.deadline_wait(lambda: len(calls_of(sp)) == 12, what="twelve calls under the spawner")
        self.assertEqual(sorted(os.listdir("/proc/%d/fd" % sp), key=int),
                         ["0", "1", "2", "3", "4"])
        daemon_fds = len(os.listdir("/proc/%d/fd" % self.daemon.proc.pid))
        self.assertGreater(daemon_fds, 12 * 4)  # the daemon's, by contrast, grew
        self.c.send({"op": "cancel", "batch": "hold"})
        self.c.finish_batch("hold")


def lowest_free_fd(pid):
    used = {int(x) for x in os.listdir("/proc/%d/fd" % pid)}
    return next(n for n in range(len(used) + 1) if n not in used)


# Root only: the unprivileged daemon's limit cannot be lowered from here
# (prlimit: EPERM).
class SpareOfAFailedStart(DaemonTestCase):
    """A call takes the spare, then cannot start (no descriptor left for its
    pipes): the call ends with a typed error, and the spare, which the
    spawner still holds, is dropped (it used to be freed on the daemon's
    side while its process lived, its uid and cgroup back in the pools,
    and the spawner's later word of it landed on freed memory)."""
    TOOLS = TOOLS
    ARGS = ["--spares", "1"]

    def ready_spares(self):
        return self.daemon.stats()["spawner"]["spares"].get("who", 0)

    def test_a_spare_taken_by_a_start_that_fails_is_dropped(self):
        c = self.daemon.client()
        pid = self.daemon.proc.pid
        sp = harness.deadline_wait(lambda: spawner_of(pid), what="the spawner")
        c.run([{"id": "w", "name": "who"}], batch=harness.new_token("first"))
        harness.deadline_wait(lambda: self.ready_spares() == 1, what="a ready spare")
        spare = harness.deadline_wait(lambda: (lambda s: s[0] if len(s) == 1 else None)(
            spares_of(sp)), what="the spare's process")
        # no descriptor free below the limit: the call's pipes cannot be made
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free_fd(pid), hard))
        try:
            res = c.run([{"id": "f", "name": "who"}], batch=harness.new_token("fails"))
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        te = res.tool_error("f")
        self.assertEqual(te["reason"], "handler_exit", te)
        self.assertIn("Too many open files", te["cause"].get("spawn_error", ""), te)
        harness.deadline_wait(lambda: not alive(spare), what="the spare of the failed start to go")
        res = c.run([{"id": "w", "name": "who"}], batch=harness.new_token("after"))
        self.assertIn("ok", res.result("w"))
        harness.deadline_wait(lambda: self.ready_spares() == 1, what="a new spare")
        self.assertEqual(self.daemon.proc.poll(), None)


class RequestTooBigForTheSocket(DaemonTestCase):
    """A request the spawner's socket can never take (EMSGSIZE here: a
    send buffer made small for the test, a description larger than it)
    fails its call with a typed error; the calls queued behind it run. It
    used to stay at the head of the queue, every later call waiting behind
    it and the loop logging the error at every turn."""
    SNDBUF = 64 * 1024  # the kernel doubles it: 128 KiB
    TOOLS = [worker_tool("echo", "echo", timeout_ms=10000),
             worker_tool("big", "echo", timeout_ms=10000, env={"BIG": "x" * (150 * 1024)})]

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.daemon = Daemon(cls.TOOLS, cls.ARGS, env={"TOOLEXECD_TEST_SPAWNER_SNDBUF": str(cls.SNDBUF)})

    def test_a_request_that_cannot_be_sent_fails_and_the_queue_goes_on(self):
        calls = [{"id": "b", "name": "big", "arguments": {"n": 0}}] + \
            [{"id": "e%d" % i, "name": "echo", "arguments": {"n": i}} for i in range(3)]
        res = self.c.run(calls, batch=harness.new_token("q"), max_concurrency=4)
        te = res.tool_error("b")
        self.assertEqual(te["reason"], "handler_exit", te)
        self.assertIn("Message too long", te["cause"].get("spawn_error", ""), te)
        for i in range(3):
            self.assertEqual(res.result("e%d" % i), {"ok": {"n": i}})
        res = self.c.run([{"id": "a", "name": "echo", "arguments": {"n": 9}}],
                         batch=harness.new_token("after"))
        self.assertEqual(res.result("a"), {"ok": {"n": 9}})
        self.assertEqual(self.daemon.stderr().count("spawner: send"), 1, self.daemon.stderr())
        # nothing left held for the call that failed (a call's result may
        # come a moment before the spawner's word of its end)
        harness.deadline_wait(lambda: self.daemon.stats()["spawner"]["calls"] == 0,
                              what="no call in flight")


class SpareOfARequestTooBig(DaemonTestCase):
    """A call that took a spare and whose request the socket then refuses
    (as above): the spare, never told of its call, is dropped; it used to
    live on in the spawner, its uid back in the pool with the call's."""
    TOOLS = RequestTooBigForTheSocket.TOOLS
    ARGS = ["--spares", "1"]
    setUpClass = RequestTooBigForTheSocket.__dict__["setUpClass"]
    SNDBUF = RequestTooBigForTheSocket.SNDBUF

    def test_the_spare_of_a_request_too_big_is_dropped(self):
        sp = harness.deadline_wait(lambda: spawner_of(self.daemon.proc.pid), what="the spawner")
        big = [{"id": "b", "name": "big", "arguments": {"n": 0}}]
        # the first call is refused too, but its tool gets a spare (a spare's
        # description carries no environment: it fits)
        res = self.c.run(big, batch=harness.new_token("first"))
        self.assertEqual(res.tool_error("b")["reason"], "handler_exit")
        harness.deadline_wait(
            lambda: self.daemon.stats()["spawner"]["spares"].get("big", 0) == 1, what="a spare")
        spare = harness.deadline_wait(lambda: (lambda s: s[0] if len(s) == 1 else None)(
            spares_of(sp)), what="the spare's process")
        res = self.c.run(big, batch=harness.new_token("takes"))
        te = res.tool_error("b")
        self.assertIn("Message too long", te["cause"].get("spawn_error", ""), te)
        harness.deadline_wait(lambda: not alive(spare), what="the spare of the refused call to go")
        res = self.c.run([{"id": "e", "name": "echo", "arguments": {"n": 1}}],
                         batch=harness.new_token("after"))
        self.assertEqual(res.result("e"), {"ok": {"n": 1}})


class Lifetime(unittest.TestCase):
    def test_no_spawner_or_spare_outlives_the_daemon(self):
        d = Daemon(TOOLS, ARGS)
        try:
            sp = harness.deadline_wait(lambda: spawner_of(d.proc.pid), what="the spawner")
            d.client().run([{"id": "w", "name": "who"}])
            spares = harness.deadline_wait(lambda: spares_of(sp), what="spares")
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            harness.deadline_wait(lambda: not alive(sp) and not any(alive(p) for p in spares),
                                  what="the spawner and its spares to die with the daemon")
        finally:
            d.kill()
            d.stop(check=False)

    def test_spawner_no_starts_calls_on_the_loop(self):
        d = Daemon(TOOLS, ["--spawner", "no"])
        try:
            self.assertIsNone(spawner_of(d.proc.pid))
            res = d.client().run([{"id": "e", "name": "echo", "arguments": {"n": 2}}])
            self.assertEqual(res.result("e"), {"ok": {"n": 2}})
        finally:
            d.stop()


if __name__ == "__main__":
    harness.main()
