"""A call cannot reach another call, the daemon or the operator's terminal.

A hostile tool runs beside a victim call (a secret in its environment and in
a file of its call directory, found from outside by a token in its command
line) and tries to read the victim's /proc/PID/environ, open its
/proc/PID/mem, SIGKILL it, read its secret file, list the work dir, connect
to the daemon's sockets and raise the daemon's oom_score_adj. Everything
fails and the victim's result arrives intact, under a root daemon (a uid of
its own per call, a PID and a mount namespace per call) and an unprivileged
one (setpriv --reuid=nobody). A worker of a daemon started on a terminal
cannot open /dev/tty."""

import fcntl
import json
import os
import pty
import pwd
import shutil
import subprocess
import sys
import termios
import unittest

import harness
from harness import Daemon, deadline_wait, new_token, pids_with_token, worker_tool

SECRET = "te-victim-secret-4b1d"
CALL_UIDS = (1879048192, 1879113727)  # TD_CALL_UIDS_DEFAULT


def hard_tools(token):
    return [worker_tool("victim", "victim", token, env={"VICTIM_SECRET": SECRET},
                        timeout_ms=60000),
            worker_tool("hostile", "hostile", timeout_ms=30000),
            worker_tool("who", "identity"),
            worker_tool("spilling", "ok-string", max_content_bytes=100, spill=True),
            worker_tool("conc", "victim", "c" + token, env={"VICTIM_SECRET": "c"},
                        timeout_ms=60000)]


def tool_pids(token):
    """The tool processes with token in their command line, not the init
    of their PID namespace (whose command line holds the tool's)."""
    def argv0(pid):
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[0]
    return [p for p in pids_with_token(token) if not argv0(p).endswith(b"toolexecd-init")]


def errno_name(v):
    """An attempt failed: the worker reports its errno's name."""
    return isinstance(v, str) and not v.startswith("ok:")


NobodyDaemon = harness.NobodyDaemon


class VictimMixin:
    DAEMON = Daemon
    ARGS = []

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.token = new_token("victim")
        d = cls.DAEMON(hard_tools(cls.token), start=False)
        d.args = ["--events-socket", d.path("ev.sock")] + cls.ARGS
        # an unprivileged daemon must be able to make its sockets and
        # call directories there
        harness.give_work_dir(d)
        harness.started(d)
        cls.d = d

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def start_victim(self, batch):
        """A running victim call: its host pid and its call directory."""
        shared = self.d.shared_dir("sync-" + batch)
        ready, release = os.path.join(shared, "ready"), os.path.join(shared, "release")
        c = self.d.client()
        c.start_batch([{"id": "v", "name": "victim",
                        "arguments": {"ready": ready, "release": release, "answer": "genuine"}}],
                      batch=batch)
        deadline_wait(lambda: os.path.exists(ready), what="the victim to be ready")
        pids = tool_pids(self.token)
        self.assertEqual(len(pids), 1, pids)
        with open(ready) as f:
            calldir = f.read()  # its working directory
        self.assertTrue(os.path.exists(os.path.join(calldir, "secret.txt")), calldir)
        return c, pids[0], calldir, release

    def finish_victim(self, c, batch, release):
        open(release, "w").close()
        evs = c.finish_batch(batch)
        done = [e for e in evs if e.get("event") == "tool_execution_completed"]
        self.assertEqual(len(done), 1, evs)
        return done[0]["result"]


class HardMixin(VictimMixin):
    """The attacks, against whichever daemon the class starts."""

    def test_hostile_call_cannot_reach_a_running_victim(self):
        c, vpid, calldir, release = self.start_victim("vict")
        self.addCleanup(lambda: os.path.exists(release) or open(release, "w").close())
        args = {"environ": [vpid], "mem": [vpid], "kill": [vpid],
                "read": [os.path.join(calldir, "secret.txt")],
                "list": [self.d.work_dir, os.path.join(self.d.work_dir, "results")],
                "connect": [self.d.sock, self.d.path("ev.sock")]}
        h = self.d.client().run([{"id": "h", "name": "hostile", "arguments": args}])
        r = h.result("h")["ok"]
        for key in ("environ", "mem", "kill", "read", "connect"):
            for v in r[key]:
                self.assertTrue(errno_name(v), "%s succeeded: %s" % (key, r))
        self.assertNotIn(SECRET, str(r))
        # the work dir the call sees holds its own directory only (a root
        # daemon's call may not even list it)
        own = r["list"][0]
        self.assertTrue(own == "EACCES" or (own.startswith("ok:") and len(own[3:].split()) == 1),
                        r)
        self.assertTrue(errno_name(r["list"][1]), r)
        # the victim lived on, and its answer and file are its own
        self.assertEqual(tool_pids(self.token), [vpid])
        res = self.finish_victim(c, "vict", release)
        self.assertEqual(res["ok"]["answer"], "genuine", res)
        self.assertTrue(res["ok"]["secret_file"].startswith(SECRET + " "), res)

    def test_hostile_call_cannot_read_a_spill_file(self):
        full = SECRET + "".join(" line %d" % i for i in range(100))
        res = self.d.client().run([{"id": "s", "name": "spilling", "arguments": {"s": full}}])
        path = res.completed("s")["truncated"]["spill_path"]
        with open(path) as f:
            self.assertEqual(f.read(), full)
        h = self.d.client().run([{"id": "h", "name": "hostile", "arguments": {
            "read": [path], "list": [os.path.dirname(path)]}}])
        r = h.result("h")["ok"]
        self.assertTrue(errno_name(r["read"][0]) and errno_name(r["list"][0]), r)

    def test_worker_sees_only_its_own_processes(self):
        c, vpid, calldir, release = self.start_victim("procs")
        self.addCleanup(lambda: os.path.exists(release) or open(release, "w").close())
        h = self.d.client().run([{"id": "h", "name": "hostile", "arguments": {}}])
        procs = h.result("h")["ok"]["procs"]
        # its init (1) and itself (2): not the victim, the daemon or the host
        self.assertEqual(sorted(procs), [1, 2], procs)
        self.finish_victim(c, "procs", release)

    def test_worker_cannot_raise_the_daemons_oom_score_adj(self):
        with open("/proc/%d/oom_score_adj" % self.d.proc.pid) as f:
            before = f.read()
        h = self.d.client().run([{"id": "h", "name": "hostile",
                                  "arguments": {"oom": [self.d.proc.pid]}}])
        r = h.result("h")["ok"]
        self.assertTrue(errno_name(r["oom"][0]), r)
        with open("/proc/%d/oom_score_adj" % self.d.proc.pid) as f:
            self.assertEqual(f.read(), before)


@unittest.skipUnless(os.geteuid() == 0, "needs root (a root daemon)")
class RootDaemon(HardMixin, unittest.TestCase):

    def test_concurrent_calls_run_as_different_uids(self):
        a, b = self.d.shared_dir("conc-a"), self.d.shared_dir("conc-b")
        rel = self.d.shared_dir("conc-rel")
        release = os.path.join(rel, "go")
        self.addCleanup(lambda: os.path.exists(release) or open(release, "w").close())
        c = self.d.client()
        calls = [{"id": x, "name": "conc",
                  "arguments": {"ready": os.path.join(d, "ready"), "release": release}}
                 for x, d in (("a", a), ("b", b))]
        c.start_batch(calls, batch="two", max_concurrency=2)
        for d in (a, b):
            deadline_wait(lambda: os.path.exists(os.path.join(d, "ready")),
                          what="both calls to run")
        pids = tool_pids("c" + self.token)
        self.assertEqual(len(pids), 2, pids)
        uids = [os.stat("/proc/%d" % p).st_uid for p in pids]
        gids = [os.stat("/proc/%d" % p).st_gid for p in pids]
        open(release, "w").close()
        c.finish_batch("two")
        self.assertNotEqual(uids[0], uids[1], uids)
        self.assertNotEqual(gids[0], gids[1], gids)
        for u in uids:
            self.assertTrue(CALL_UIDS[0] <= u <= CALL_UIDS[1], uids)

    def test_call_directory_is_owned_by_the_calls_uid(self):
        c, vpid, calldir, release = self.start_victim("owner")
        self.addCleanup(lambda: os.path.exists(release) or open(release, "w").close())
        st = os.stat(calldir)
        self.assertEqual((st.st_uid, st.st_gid), (os.stat("/proc/%d" % vpid).st_uid,
                                                  os.stat("/proc/%d" % vpid).st_gid))
        self.assertEqual(st.st_mode & 0o777, 0o700)
        self.finish_victim(c, "owner", release)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(HardMixin, unittest.TestCase):
    DAEMON = NobodyDaemon


@unittest.skipUnless(os.geteuid() == 0, "needs root (a root daemon)")
class RootPgroup(VictimMixin, unittest.TestCase):
    """Under --containment pgroup (no namespaces: the host's /proc)
    a call of a root daemon still cannot signal or read another: they run as
    different uids."""
    ARGS = ["--containment", "pgroup"]

    def test_start_up_log_says_what_calls_share(self):
        self.assertIn("calls share the host's /proc, mounts and System V IPC (--containment pgroup)",
                      self.d.stderr())

    def test_hostile_call_cannot_kill_or_read_a_running_victim(self):
        c, vpid, calldir, release = self.start_victim("pg")
        self.addCleanup(lambda: os.path.exists(release) or open(release, "w").close())
        args = {"environ": [vpid], "mem": [vpid], "kill": [vpid],
                "read": [os.path.join(calldir, "secret.txt")]}
        r = self.d.client().run([{"id": "h", "name": "hostile", "arguments": args}]).result("h")
        r = r["ok"]
        # the victim is visible here, so the attempts are refused, not missed
        self.assertIn(vpid, r["procs"])
        self.assertEqual((r["environ"], r["mem"], r["kill"], r["read"]),
                         (["EACCES"], ["EACCES"], ["EPERM"], ["EACCES"]), r)
        self.assertEqual(tool_pids(self.token), [vpid])
        res = self.finish_victim(c, "pg", release)
        self.assertEqual(res["ok"]["answer"], "genuine", res)


@unittest.skipUnless(os.geteuid() == 0, "needs root (a root daemon)")
class CallUidsOption(unittest.TestCase):
    """--call-uids: a range holding a user of the system, or no range, is
    refused with a message naming what is wrong."""

    def start_fails(self, value):
        return self.start_fails_with(["--call-uids", value])

    def start_fails_with(self, args):
        harness.require_env()
        d = Daemon([], args, start=False)
        try:
            d.spawn()
            rc = d.proc.wait(timeout=harness.WAIT)
            self.assertNotEqual(rc, 0)
            return d.stderr()
        finally:
            d.stop(check=False)

    def test_range_holding_a_user_is_refused(self):
        nobody = pwd.getpwnam("nobody").pw_uid
        err = self.start_fails("%d-%d" % (nobody - 20, nobody + 20))
        self.assertIn("--call-uids %d-%d: holds user nobody" % (nobody - 20, nobody + 20), err)

    def test_range_smaller_than_twice_max_workers_is_refused(self):
        err = self.start_fails_with(["--call-uids", "1879048192-1879048194", "--max-workers", "2"])
        self.assertIn("--call-uids 1879048192-1879048194: 3 uids, fewer than twice "
                      "--max-workers (2)", err)

    def test_uids_come_back_to_the_pool(self):
        # two uids, one call at a time: the third call can only run with one
        # given back. Which one depends on when each is: a call's uid comes
        # back once its process is reaped, which the spawner may report
        # after the batch has completed (worker.c): A when the first call's
        # reaping came first, else B (CI saw [A, B, B] once)
        # No spares: each holds a uid of the pool, taken ahead of its call
        # (spares.c), which would change the order looked at here.
        harness.require_env()
        with Daemon([worker_tool("who", "identity")],
                    ["--call-uids", "1879048192-1879048193", "--max-workers", "1",
                     "--spares", "0"]) as d:
            uids = [d.client().run([{"id": "w", "name": "who"}]).result("w")["ok"]["uid"]
                    for _ in range(3)]
        self.assertEqual(uids[:2], [1879048192, 1879048193])
        self.assertIn(uids[2], (1879048192, 1879048193))

    def test_malformed_range_is_refused(self):
        for bad in ("5", "9-3", "0-10", "1-2147483648", "a-b", "1-5x"):
            self.assertIn("--call-uids: \"%s\": expected FIRST-LAST" % bad, self.start_fails(bad))


OTHER_UID = 64125  # a client uid no test runs anything else as


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody and to another uid) and setpriv")
class SpillToAnotherUid(unittest.TestCase):
    """fchown: an unprivileged daemon cannot give a spill file to a
    client of another uid; the spill then fails, says so in the log and
    leaves no file (it used to stay the daemon's, where every worker of the
    daemon's uid could read it), and the result still arrives."""

    def test_spill_for_another_uid_fails_cleanly(self):
        harness.require_env()
        d = NobodyDaemon([worker_tool("spilling", "ok-string", max_content_bytes=100,
                                      spill=True)], start=False)
        d.args = ["--socket-mode", "0666"]
        harness.give_work_dir(d)
        try:
            d.start()
            full = "".join(" line %d" % i for i in range(100))
            script = ("import json, sys; sys.path.insert(0, %r); import harness; "
                      "r = harness.Client(%r).run([{'id': 's', 'name': 'spilling', "
                      "'arguments': {'s': %r}}]); print(json.dumps(r.completed('s')))"
                      % (os.path.dirname(os.path.abspath(__file__)), d.sock, full))
            out = subprocess.run(["setpriv", "--reuid=%d" % OTHER_UID, "--regid=%d" % OTHER_UID,
                                  "--clear-groups", sys.executable, "-c", script],
                                 capture_output=True, text=True, timeout=harness.WAIT,
                                 env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            self.assertEqual(out.returncode, 0, out.stderr)
            done = json.loads(out.stdout)
            self.assertNotIn("spill_path", done["truncated"], done)
            self.assertIn("cannot spill to", d.stderr())
            self.assertIn("Operation not permitted", d.stderr())
            results = os.path.join(d.work_dir, "results")
            self.assertEqual(os.listdir(results) if os.path.isdir(results) else [], [])
        finally:
            d.stop(check=False)


class TtyDaemon(Daemon):
    """A daemon whose controlling terminal is a pty, as when an operator runs
    it in the foreground."""

    def spawn(self):
        self.master, slave = pty.openpty()
        self._stderr_f = open(self.stderr_path, "wb")

        def take_tty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        self.proc = subprocess.Popen(self.command(), stdin=slave, stdout=self._stderr_f,
                                     stderr=self._stderr_f, start_new_session=True,
                                     preexec_fn=take_tty)
        os.close(slave)
        return self.proc

    def stop(self, check=True):
        try:
            super().stop(check)
        finally:
            os.close(self.master)


class Terminal(unittest.TestCase):
    """Workers have no controlling terminal (a session of their own)."""

    def test_worker_cannot_open_the_daemons_terminal(self):
        harness.require_env()
        # the host's /dev: a call's own /dev has no tty at all;
        # this is about the session, which must hold even where it has one
        d = TtyDaemon([worker_tool("hostile", "hostile", filesystem="host")], start=False)
        try:
            d.start()
            # the daemon does have the terminal
            with open("/proc/%d/stat" % d.proc.pid) as f:
                tty_nr = int(f.read().rsplit(")", 1)[1].split()[4])
            self.assertNotEqual(tty_nr, 0, "the daemon has no controlling terminal")
            r = d.client().run([{"id": "h", "name": "hostile", "arguments": {"tty": True}}])
            v = r.result("h")["ok"]
            self.assertEqual(v["tty"], "ENXIO", v)
            self.assertNotIn("tiocsti", v)
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
