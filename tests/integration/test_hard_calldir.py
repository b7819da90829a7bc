"""Call directories under attack.

Hostile tools build deep and wide trees, take their own permissions away,
and a sibling call swaps a subdirectory for a symlink to a root-only
directory while the daemon removes the tree: nothing outside the call's
directory may go. Names of call directories are random and the work
directory cannot be listed by workers. A daemon SIGKILLed with calls in
flight is followed by one on the same work directory: the leftovers go at
start and calls run. The default work directory lives in a runtime
directory, not /tmp, and a dead daemon's one is removed by the next."""

import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import unittest

import harness
from harness import Daemon, DaemonTestCase, worker_tool, deadline_wait, WAIT

HEX32 = re.compile(r"^[0-9a-f]{32}$")
NOBODY = pwd.getpwnam("nobody")
ROOT = os.geteuid() == 0
HAVE_SETPRIV = shutil.which("setpriv") is not None


def read_report(path):
    deadline_wait(lambda: os.path.exists(path), what="the tool to report its directory")
    with open(path) as f:
        return f.read()


NobodyDaemon = harness.NobodyDaemon


def nobody_daemon(tools, work_dir_owner=True, env=None, args=()):
    d = NobodyDaemon(tools=tools, start=False, env=env, args=args)
    os.chmod(d.tmp, 0o777)  # nobody creates its socket there
    if work_dir_owner:
        os.chown(d.work_dir, NOBODY.pw_uid, NOBODY.pw_gid)
    return d


start = harness.started


TREE_TOOLS = [worker_tool("env", "env"),
              worker_tool("tree", "make-tree", timeout_ms=120000),
              worker_tool("probe", "probe-dir"),
              worker_tool("racer", "swap-race", timeout_ms=120000)]


class Checks:
    """Shared by the root and the unprivileged daemon."""

    def test_names_are_random_hex_and_distinct(self):
        calls = [{"id": "e%d" % i, "name": "env"} for i in range(8)]
        res = self.c.run(calls)
        work = os.path.realpath(self.daemon.work_dir)
        names = []
        for c in calls:
            cwd = self.assertOk(res, c["id"])["cwd"]
            self.assertEqual(os.path.dirname(os.path.realpath(cwd)), work)
            names.append(os.path.basename(cwd))
        for n in names:
            self.assertRegex(n, HEX32, "call directory names: %s" % names)
        self.assertEqual(len(set(names)), len(names), names)
        values = sorted(int(n, 16) for n in names)
        self.assertTrue(all(b - a > 1 << 64 for a, b in zip(values, values[1:])),
                        "call directory names look sequential: %s" % names)

    def test_deep_and_wide_trees_are_removed(self):
        # 3,000 levels: a path of 6,000 bytes, beyond PATH_MAX (4,096); 20,000
        # entries in one directory; a directory whose owner took all its
        # permissions away. (Each level costs its making a walk to the root
        # under Landlock: 10,000 levels took an unprivileged daemon's call
        # minutes on a loaded 2-CPU VM.)
        res = self.c.run([{"id": "t", "name": "tree",
                           "arguments": {"deep": 3000, "wide": 20000, "locked": True}}],
                         timeout=120)
        cwd = self.assertOk(res, "t")["cwd"]
        deadline_wait(lambda: not os.path.lexists(cwd), timeout=max(WAIT, 60),
                      what="the tree in %s to be removed" % cwd)
        # none left but the empty ones of spares (spares.c), made for calls
        # to come
        left = [n for n in os.listdir(self.daemon.work_dir) if HEX32.match(n)]
        self.assertLessEqual(set(left), harness.spare_dirs(self.daemon.proc.pid))
        for n in left:
            self.assertEqual(os.listdir(os.path.join(self.daemon.work_dir, n)), [], n)
        self.assertOk(self.c.run([{"id": "e", "name": "env"}]), "e")


@unittest.skipUnless(ROOT, "needs root (a root daemon; a root-only victim)")
class RootDaemon(Checks, DaemonTestCase):
    TOOLS = TREE_TOOLS + [worker_tool("probe_daemon_user", "probe-dir", user="daemon")]

    def test_call_dir_is_0700_of_the_worker_user_and_work_dir_not_listable(self):
        report, go = self.tmpfile("report"), self.tmpfile("go")
        holder = self.daemon.client()
        holder.start_batch([{"id": "a", "name": "tree", "arguments": {
            "report": report, "go": go, "secret": "s3cret"}}], batch="A")
        cwd = read_report(report)
        try:
            st = os.lstat(cwd)
            self.assertTrue(stat.S_ISDIR(st.st_mode))
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o700)
            # a uid and gid of the call's own (--call-uids), not a shared user
            self.assertGreaterEqual(st.st_uid, 1879048192)
            self.assertEqual(st.st_gid, st.st_uid)
            wst = os.stat(self.daemon.work_dir)
            self.assertEqual(stat.S_IMODE(wst.st_mode), 0o711)
            res = self.c.run([
                {"id": "p", "name": "probe",
                 "arguments": {"work": self.daemon.work_dir, "other": cwd}},
                {"id": "q", "name": "probe_daemon_user",
                 "arguments": {"work": self.daemon.work_dir, "other": cwd}}])
            p, q = self.assertOk(res, "p"), self.assertOk(res, "q")
            # Neither can find the other calls by listing the work directory:
            # in its mount namespace the work directory is an empty tmpfs
            # holding only its own call directory.
            for r in (p, q):
                self.assertIn(r["list_work"], ("EACCES", None), r)
            # Another call, even given the path, finds nothing there.
            self.assertEqual((q["list_other"], q["read_other"], q["write_other"]),
                             ("ENOENT", "ENOENT", "ENOENT"))
        finally:
            with open(go, "w"):
                pass
        self.assertOk(harness.BatchResult([{"id": "a", "name": "tree"}],
                                          holder.finish_batch("A")), "a")

@unittest.skipUnless(ROOT, "needs root (a root daemon; a root-only victim)")
class RootSharedIdentity(DaemonTestCase):
    """The one set-up where a sibling call can still reach another call's
    directory: the operator chose a shared user for both tools and no
    namespaces (--containment pgroup). Removal must stay safe there: it
    never follows a link, whoever swaps one in."""
    TOOLS = [worker_tool("tree", "make-tree", timeout_ms=120000, user="nobody"),
             worker_tool("racer", "swap-race", timeout_ms=120000, user="nobody")]
    ARGS = ["--containment", "pgroup"]

    def test_symlink_swap_during_removal_deletes_nothing_outside(self):
        # A root-only directory holding the victim; a sibling call swaps the
        # hostile call's a/ for a symlink to it once the daemon's removal of
        # a/ has begun (a/ holds a file named like the victim). Before the
        # fix root followed the symlink: 5 of 5 rounds lost the victim.
        vault = self.daemon.path("vault")
        os.mkdir(vault, 0o700)
        victim = os.path.join(vault, "victim")
        with open(victim, "w") as f:
            f.write("precious")
        os.chmod(victim, 0o600)
        # The swap needs the racer to be scheduled while the daemon is inside
        # a/: likely with 20,000 fillers, never certain on a loaded machine
        # (CI once saw round 0 miss it). So rounds go on until the race has
        # happened twice (at most 10), and at least once is required; the
        # victim must survive every round, raced or not.
        swaps = 0
        for rnd in range(10):
            report, ready = self.tmpfile("report%d" % rnd), self.tmpfile("ready%d" % rnd)
            res = self.c.run([
                {"id": "x", "name": "tree", "arguments": {
                    "bait": "victim", "fillers": 20000, "deep": 64, "report": report,
                    "go": ready}},
                {"id": "y", "name": "racer", "arguments": {
                    "target": report, "ready": ready, "link": vault, "seconds": 20}}],
                timeout=60)
            self.assertOk(res, "x")
            swaps += bool(self.assertOk(res, "y")["swapped"])
            self.assertTrue(os.path.exists(victim),
                            "round %d: root deleted a file through a symlink" % rnd)
            cwd = read_report(report)
            deadline_wait(lambda: not os.path.lexists(cwd),
                          what="the raced directory %s to be removed" % cwd)
            self.assertTrue(os.path.exists(victim), "round %d: victim gone" % rnd)
            if swaps >= 2:
                break
        self.assertGreaterEqual(swaps, 1, "the race did not happen in %d rounds" % (rnd + 1))
        self.assertEqual(os.listdir(vault), ["victim"])


@unittest.skipUnless(ROOT and HAVE_SETPRIV, "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Checks, unittest.TestCase):
    """The same checks against a daemon running as nobody. Its workers keep
    its uid, so they can list its work directory: hiding calls from each
    other there is the per-call mount namespace's work."""

    @classmethod
    def setUpClass(cls):
        cls.daemon = start(nobody_daemon(TREE_TOOLS))

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def setUp(self):
        self.c = self.daemon.client()

    def tearDown(self):
        self.c.close()
        self.daemon.clients.remove(self.c)

    assertOk = DaemonTestCase.assertOk


class WorkDirRules(unittest.TestCase):

    def refused(self, d, message):
        d.spawn()
        try:
            rc = d.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            d.kill()
            d.stop(check=False)
            self.fail("the daemon started; stderr:\n" + d.stderr())
        self.assertNotEqual(rc, 0)
        self.assertIn(message, d.stderr())
        d.proc = None
        d._stderr_f.close()

    @unittest.skipUnless(ROOT, "needs root to give the directory away")
    def test_work_dir_of_another_user_is_refused(self):
        d = Daemon([worker_tool("env", "env")], start=False)
        try:
            os.chown(d.work_dir, NOBODY.pw_uid, NOBODY.pw_gid)
            self.refused(d, "%s: owned by uid %d, not by uid 0" % (d.work_dir, NOBODY.pw_uid))
        finally:
            d.stop(check=False)

    def test_work_dir_writable_by_others_is_refused(self):
        d = Daemon([worker_tool("env", "env")], start=False)
        try:
            os.chmod(d.work_dir, 0o777)
            self.refused(d, "%s: writable by group or others (mode 0777)" % d.work_dir)
        finally:
            d.stop(check=False)

    def test_work_dir_is_tightened_to_0711(self):
        with Daemon([worker_tool("env", "env")], start=False) as d:
            os.chmod(d.work_dir, 0o755)
            d.start()
            # The socket listens before the work dir is set up (a second
            # daemon should hear "already listening" first); an answered
            # request means start-up is over and the loop runs.
            d.client().tools()
            self.assertEqual(stat.S_IMODE(os.stat(d.work_dir).st_mode), 0o711)

    def test_a_second_daemon_on_the_same_work_dir_is_refused(self):
        with Daemon([worker_tool("env", "env")]) as first:
            second = Daemon([worker_tool("env", "env")], start=False)
            try:
                second.work_dir = first.work_dir
                self.refused(second, "--work-dir %s: in use by another toolexecd"
                             % first.work_dir)
            finally:
                second.stop(check=False)
            # the first one's calls are untouched
            res = first.client().run([{"id": "e", "name": "env"}])
            self.assertEqual(set(res.result("e")), {"ok"})


class Restart(unittest.TestCase):
    """A daemon SIGKILLed with a call in flight, then another on the
    same --work-dir."""

    def run_restart(self, make):
        first = make()
        second = None
        try:
            report = os.path.join(first.shared_dir("share"), "report")
            c = first.client()
            c.start_batch([{"id": "t", "name": "tree", "arguments": {
                "deep": 50, "wide": 100, "secret": "s", "report": report,
                "then": "sleep"}}], batch="B")
            left = read_report(report)
            first.kill()  # SIGKILL: no clean-up; its workers die with it
            self.assertTrue(os.path.exists(os.path.join(left, "secret.txt")))
            results = os.path.join(first.work_dir, "results")
            os.makedirs(results, exist_ok=True)
            spill = os.path.join(results, "B-1.txt")
            with open(spill, "w") as f:
                f.write("an earlier run's spill")
            owner = os.stat(first.work_dir)  # as the daemon would have made them
            for p in (results, spill):
                os.chown(p, owner.st_uid, owner.st_gid)
            second = make(start=False)
            second.work_dir = first.work_dir
            start(second)
            c2 = second.client()
            res = c2.run([{"id": "e%d" % i, "name": "env"} for i in range(3)])
            for i in range(3):
                r = res.result("e%d" % i)
                self.assertEqual(set(r), {"ok"}, "call after the restart: %s" % r)
            self.assertFalse(os.path.lexists(left), "leftover %s still there" % left)
            self.assertFalse(os.path.lexists(results), "leftover spill files still there")
            self.assertIn("left in %s by an earlier run" % first.work_dir, second.stderr())
        finally:
            if second:
                second.stop()
            first.stop(check=False)

    @unittest.skipUnless(ROOT, "needs root")
    def test_root_daemon_restarts_on_the_same_work_dir(self):
        self.run_restart(lambda start=True: Daemon(
            [worker_tool("tree", "make-tree", timeout_ms=60000), worker_tool("env", "env")],
            start=start))

    @unittest.skipUnless(ROOT and HAVE_SETPRIV, "needs root (to drop to nobody) and setpriv")
    def test_unprivileged_daemon_restarts_on_the_same_work_dir(self):
        def make(start=True):
            d = nobody_daemon([worker_tool("tree", "make-tree", timeout_ms=60000),
                               worker_tool("env", "env")])
            return globals()["start"](d) if start else d
        self.run_restart(make)


def without_work_dir(cmd):
    i = cmd.index("--work-dir")
    return cmd[:i] + cmd[i + 2:]


class NoWorkDir(Daemon):
    def command(self):
        return without_work_dir(super().command())


class NoWorkDirNobody(NobodyDaemon):
    def command(self):
        return without_work_dir(super().command())


DEFAULT_TOOLS = [worker_tool("tree", "make-tree", timeout_ms=60000), worker_tool("env", "env")]


class DefaultWorkDir(unittest.TestCase):
    """Without --work-dir the work directory is made in a runtime
    directory ($RUNTIME_DIRECTORY, /run/toolexecd for root,
    $XDG_RUNTIME_DIR/toolexecd otherwise), never in $TMPDIR; the next daemon
    removes a killed one's; a clean exit removes its own."""

    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="te-it-rt-", dir="/tmp")
        os.chmod(self.base, 0o755)
        self.tmpdir = os.path.join(self.base, "tmpdir")
        os.mkdir(self.tmpdir)
        os.chmod(self.tmpdir, 0o1777)

    def tearDown(self):
        shutil.rmtree(self.base, ignore_errors=True)

    def check(self, make, runtime, in_tmpdir=False):
        d1 = make()
        d2 = None
        try:
            report = os.path.join(d1.shared_dir("share"), "report")
            d1.client().start_batch([{"id": "t", "name": "tree", "arguments": {
                "secret": "s", "report": report, "then": "sleep"}}], batch="B")
            left = read_report(report)
            stale = os.path.dirname(left)
            self.assertEqual(os.path.dirname(stale), runtime)
            self.assertRegex(os.path.basename(stale), r"^work\.")
            if not in_tmpdir:
                self.assertEqual(os.listdir(self.tmpdir), [], "call data in $TMPDIR")
            d1.kill()
            self.assertTrue(os.path.exists(os.path.join(left, "secret.txt")))
            d2 = make()
            res = d2.client().run([{"id": "e", "name": "env"}])
            mine = os.path.dirname(res.result("e")["ok"]["cwd"])
            self.assertEqual(os.path.dirname(mine), runtime)
            self.assertFalse(os.path.lexists(stale), "a killed daemon's %s is left" % stale)
            self.assertEqual(os.listdir(runtime), [os.path.basename(mine)])
            self.assertEqual(stat.S_IMODE(os.stat(mine).st_mode), 0o711)
            if not in_tmpdir:
                self.assertEqual(os.listdir(self.tmpdir), [], "call data in $TMPDIR")
            d2.stop()
            d2 = None
            self.assertEqual(os.listdir(runtime), [], "the work directory is left at exit")
        finally:
            if d2:
                d2.stop(check=False)
            d1.stop(check=False)

    @unittest.skipUnless(ROOT, "needs root")
    def test_root_daemon_under_systemd_runtime_directory(self):
        rt = os.path.join(self.base, "runtime")
        os.mkdir(rt, 0o755)
        env = {"RUNTIME_DIRECTORY": rt, "TMPDIR": self.tmpdir}
        self.check(lambda: start(NoWorkDir(DEFAULT_TOOLS, start=False, env=env)), rt)

    @unittest.skipUnless(ROOT, "needs root")
    def test_a_live_daemons_work_dir_is_left_alone(self):
        # two daemons on one runtime directory: the second one to start must
        # not take the first one's work directory for a dead daemon's
        rt = os.path.join(self.base, "runtime")
        os.mkdir(rt, 0o755)
        env = {"RUNTIME_DIRECTORY": rt, "TMPDIR": self.tmpdir}
        first = start(NoWorkDir(DEFAULT_TOOLS, start=False, env=env))
        self.addCleanup(first.stop, check=False)
        report, go = os.path.join(first.shared_dir("share"), "report"), first.path("share", "go")
        c = first.client()
        c.start_batch([{"id": "t", "name": "tree", "arguments": {
            "secret": "s", "report": report, "go": go}}], batch="B")
        cwd = read_report(report)
        second = start(NoWorkDir(DEFAULT_TOOLS, start=False, env=env))
        self.addCleanup(second.stop, check=False)
        self.assertEqual(set(second.client().run([{"id": "e", "name": "env"}]).result("e")),
                         {"ok"})
        self.assertTrue(os.path.exists(os.path.join(cwd, "secret.txt")),
                        "the second daemon removed the first one's call directory")
        self.assertEqual(len(os.listdir(rt)), 2)
        with open(go, "w"):
            pass
        res = harness.BatchResult([{"id": "t", "name": "tree"}], c.finish_batch("B"))
        self.assertEqual(res.result("t"), {"ok": {"cwd": cwd}})
        second.stop()
        first.stop()
        self.assertEqual(os.listdir(rt), [])

    @unittest.skipUnless(ROOT and HAVE_SETPRIV, "needs root (to drop to nobody) and setpriv")
    def test_unprivileged_daemon_under_xdg_runtime_dir(self):
        xdg = os.path.join(self.base, "xdg")
        os.mkdir(xdg, 0o700)
        os.chown(xdg, NOBODY.pw_uid, NOBODY.pw_gid)
        env = {"XDG_RUNTIME_DIR": xdg, "TMPDIR": self.tmpdir, "RUNTIME_DIRECTORY": ""}

        def make():
            d = NoWorkDirNobody(DEFAULT_TOOLS, start=False, env=env)
            os.chmod(d.tmp, 0o777)
            return start(d)

        self.check(make, os.path.join(xdg, "toolexecd"))

    @unittest.skipUnless(ROOT and HAVE_SETPRIV, "needs root (to drop to nobody) and setpriv")
    def test_unprivileged_daemon_without_a_runtime_dir(self):
        # the last resort: a directory of its own in $TMPDIR, refused when
        # someone else made it first
        env = {"XDG_RUNTIME_DIR": "", "TMPDIR": self.tmpdir, "RUNTIME_DIRECTORY": ""}

        def make():
            d = NoWorkDirNobody(DEFAULT_TOOLS, start=False, env=env)
            os.chmod(d.tmp, 0o777)
            return start(d)

        own = os.path.join(self.tmpdir, "toolexecd-%d" % NOBODY.pw_uid)
        os.mkdir(own, 0o711)  # made by root: not the daemon's
        d = NoWorkDirNobody(DEFAULT_TOOLS, start=False, env=env)
        os.chmod(d.tmp, 0o777)
        WorkDirRules.refused(self, d, "%s: owned by uid 0, not by uid %d"
                             % (own, NOBODY.pw_uid))
        d.stop()
        os.rmdir(own)
        self.check(make, own, in_tmpdir=True)
        self.assertEqual(stat.S_IMODE(os.stat(own).st_mode), 0o711)


if __name__ == "__main__":
    unittest.main(verbosity=2)
