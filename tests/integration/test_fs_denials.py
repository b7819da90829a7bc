"""A call's file-system refusals are data on its tool_execution_completed
event: entries {"kind": "filesystem", "path", "access", "rule"} in its
"denied", and their count in "denied_filesystem" (daemon/confine/fswatch.c).

A hostile tool (tests/workers/fs_denials.py) reads a hidden tree and a
tree its definition hides, writes and removes read-only files, creates
outside its write list and executes from a directory the view makes
noexec: each refusal is on that call's event with its path, access and
rule. Cold, warm and spare-started calls; 100 calls at once, each with
paths of its own, see only their own; a call that makes 100,000 refused
opens gets one entry for them and their count, and the daemon's memory
does not grow with them. An unprivileged daemon cannot load the BPF
program that sees them (CAP_BPF, CAP_PERFMON) and has no uid per call to
tell calls apart: it says so at start and reports none."""

import json
import os
import pwd
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import uuid

import harness
from test_warm import python_loads_lib
from harness import Daemon, deadline_wait

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PYSDK = os.path.normpath(os.path.join(os.path.dirname(harness.WORKERS_SRC), "..", "contrib",
                                      "python"))
TOKEN = uuid.uuid4().hex[:10]
# hidden by every default view (td_fs_hidden); made by the test
SECRET_DIR = "/var/lib/te-fsd-%s" % TOKEN
# hidden by the definition's "hide"
HIDE_DIR = "/var/cache/te-fsd-hide-%s" % TOKEN
# on the host's read-only root in the view; anyone's to write on the host
RO_FILE = "/usr/share/te-fsd-%s-ro" % TOKEN


def py_tool(name, **fields):
    d = {"name": name, "description": "python fs_denials.py", "schema": {"type": "object"},
         "command": [PYTHON, os.path.join(harness.WORKERS_SRC, "fs_denials.py")],
         "env": {"PYTHONPATH": PYSDK, "PYTHONDONTWRITEBYTECODE": "1"}, "timeout_ms": 120000}
    d.update(fields)
    return d


def fs_entries(done, token=TOKEN):
    """The filesystem entries of a completed event whose path has token."""
    return sorted((e["path"], e["access"], e["rule"]) for e in done.get("denied", [])
                  if e.get("kind") == "filesystem" and token in e["path"])


def fifo_wait(path, proc):
    """Until a writer has written to the FIFO path and closed it; fails
    when proc is gone or after harness.WAIT."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        deadline_wait(lambda: proc.poll() is None and select.select([fd], [], [], 0)[0] and
                      not os.read(fd, 64), what="a write to " + path)
    finally:
        os.close(fd)


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class RootChecks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (a root daemon, /var/lib paths)")
        os.makedirs(SECRET_DIR, 0o755)
        os.makedirs(HIDE_DIR, 0o755)
        for d in (SECRET_DIR, HIDE_DIR):
            with open(os.path.join(d, "secret.txt"), "w") as f:
                f.write("secret")
        with open(RO_FILE, "w") as f:
            f.write("read-only in the view")
        os.chmod(RO_FILE, 0o666)
        fs = harness.with_tree({"hide": [HIDE_DIR]})
        cls.daemon = Daemon([py_tool("fsd", filesystem=fs),
                             py_tool("fsd_warm", start="warm", filesystem="host")],
                            ["--spares", "2"])
        # where the kernel refuses the BPF program, the daemon says why
        why = [l for l in cls.daemon.stderr().splitlines()
               if "file-system refusals are not reported: BPF" in l]
        if why:
            cls.daemon.stop()
            cls.cleanup()
            raise unittest.SkipTest("this kernel gives a root daemon nothing: %s" % why[0])

    @classmethod
    def cleanup(cls):
        shutil.rmtree(SECRET_DIR, ignore_errors=True)
        shutil.rmtree(HIDE_DIR, ignore_errors=True)
        if os.path.exists(RO_FILE):
            os.unlink(RO_FILE)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        cls.cleanup()

    def hostile(self, tok):
        """What a call with paths of its own (tok) tries, and the entries
        its event must have for them."""
        tries = [["read", "%s/secret.txt" % SECRET_DIR],
                 ["read", "%s/secret.txt" % HIDE_DIR],
                 ["read", "%s/%s-absent" % (SECRET_DIR, tok)],
                 ["create", "/usr/share/te-fsd-%s-%s" % (TOKEN, tok)],
                 ["mkdir", "/var/cache/te-fsd-%s-%s" % (TOKEN, tok)],
                 ["exec", "/dev/shm/te-fsd-%s-%s" % (TOKEN, tok)]]
        want = [("%s/secret.txt" % SECRET_DIR, "read", "hidden by the view"),
                ("%s/secret.txt" % HIDE_DIR, "read", "hide"),
                ("%s/%s-absent" % (SECRET_DIR, tok), "read", "hidden by the view"),
                ("/usr/share/te-fsd-%s-%s" % (TOKEN, tok), "create", "read-only in the view"),
                ("/var/cache/te-fsd-%s-%s" % (TOKEN, tok), "create", "read-only in the view"),
                ("/dev/shm/te-fsd-%s-%s" % (TOKEN, tok), "execute",
                 "not executable in the view")]
        return tries, sorted(want)

    def test_each_refusal_on_its_call(self):
        self.assertIn("file-system refusals: reported", self.daemon.stderr())
        c = self.daemon.client()
        tries, want = self.hostile("one")
        tries += [["write", RO_FILE], ["remove", RO_FILE]]
        res = c.run([{"id": "a", "name": "fsd", "arguments": {"try": tries}}])
        tried = res.result("a")["ok"]["tried"]
        self.assertNotIn("ok", tried, tried)  # every one refused, really
        done = res.completed("a")
        self.assertEqual([e for e in fs_entries(done) if e[0] != RO_FILE], want,
                         done.get("denied"))
        self.assertEqual(fs_entries(done, RO_FILE), [(RO_FILE, "remove", "read-only in the view"),
                                                     (RO_FILE, "write", "read-only in the view")])
        self.assertGreaterEqual(done["denied_filesystem"], 8, done)

    def test_a_call_that_tries_nothing_lists_nothing(self):
        # the C library looks the call's uid up in systemd's userdb (hidden
        # with /run) in every call: no tool asked for it, none is listed
        res = self.daemon.client().run([{"id": "a", "name": "fsd", "arguments": {"try": []}}])
        done = res.completed("a")
        self.assertEqual([e for e in done.get("denied", []) if e["kind"] == "filesystem"], [],
                         done)

    def test_spare_started_call(self):
        c = self.daemon.client()
        c.run([{"id": "first", "name": "fsd", "arguments": {}}], batch=harness.new_token("f"))
        pid = self.daemon.proc.pid

        def spares():
            dirs = {}
            for p in harness.spare_pids(pid):
                try:
                    dirs[os.readlink("/proc/%d/cwd" % p)] = p
                except OSError:
                    pass
            return dirs or None
        dirs = deadline_wait(spares, what="a spare")
        tries, want = self.hostile("spare")
        res = c.run([{"id": "s", "name": "fsd", "arguments": {"try": tries}}])
        self.assertIn(res.result("s")["ok"]["cwd"], dirs, "the call took no spare")
        self.assertEqual(fs_entries(res.completed("s")), want)

    def test_warm_call(self):
        if not python_loads_lib():
            self.skipTest("python cannot load this build's libtoolexec (a sanitizer build): "
                          "no Python warm template")
        c = self.daemon.client()
        harness.wait_template(self.daemon, "fsd_warm")
        # the host's view (a warm tool's so far): the host's own refusals,
        # the call running as a uid of its own
        path = "/usr/share/te-fsd-%s-warm" % TOKEN
        res = c.run([{"id": "w", "name": "fsd_warm",
                      "arguments": {"try": [["create", path], ["read", "/etc/shadow"]]}}])
        done = res.completed("w")
        self.assertEqual(done.get("start"), "warm", done)
        self.assertEqual(res.result("w")["ok"]["tried"], ["EACCES", "EACCES"])
        got = [(e["path"], e["access"], e["rule"]) for e in done.get("denied", [])
               if e.get("kind") == "filesystem"]
        self.assertIn((path, "create", "permissions"), got)
        self.assertIn(("/etc/shadow", "read", "permissions"), got)

    def test_hundred_at_once_each_its_own(self):
        c = self.daemon.client()
        calls, wants = [], {}
        for i in range(100):
            tok = "c%03d" % i
            tries, want = self.hostile(tok)
            # only its own: the entries naming another call's paths
            tries = [t for t in tries if tok in t[1]]
            calls.append({"id": tok, "name": "fsd", "arguments": {"try": tries}})
            wants[tok] = [w for w in want if tok in w[0]]
        res = c.run(calls, max_concurrency=100, timeout=harness.WAIT * 6)
        for tok, want in wants.items():
            done = res.completed(tok)
            self.assertEqual(fs_entries(done, TOKEN), want, (tok, done.get("denied")))

    def test_flood_is_bounded(self):
        c = self.daemon.client()
        pid = self.daemon.proc.pid
        path = "/usr/te-fsd-%s-flood" % TOKEN
        before = rss_kb(pid)
        res = c.run([{"id": "f", "name": "fsd",
                      "arguments": {"flood": {"path": path, "n": 100000},
                                    "try": [["create", "/usr/te-fsd-%s-after" % TOKEN]]}}],
                    timeout=harness.WAIT * 6)
        self.assertEqual(res.result("f")["ok"]["flood_refused"], 100000)
        done = res.completed("f")
        self.assertEqual(fs_entries(done), [
            ("/usr/te-fsd-%s-after" % TOKEN, "create", "read-only in the view"),
            (path, "create", "read-only in the view")])
        self.assertGreaterEqual(done["denied_filesystem"], 100001, done)
        self.assertLessEqual(len(done["denied"]), 32)
        # 100,000 refusals, a ring of 1 MiB and 512 records at most a call:
        # the daemon's memory does not follow the flood
        self.assertLess(rss_kb(pid) - before, 8 * 1024, "daemon RSS grew with the flood")


class TwoDaemonsChecks(unittest.TestCase):
    """Two root daemons whose calls take the same uids (the same
    --call-uids, as tests side by side have): each reports its own calls'
    refusals only, told apart by who the process descends from."""

    def test_same_uid_other_daemon(self):
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (root daemons)")
        # the harness's view: its directory writable
        x = Daemon([py_tool("fsd")])
        try:
            y = Daemon([py_tool("fsd")])
        except BaseException:
            x.stop()
            raise
        try:
            if "file-system refusals: reported" not in x.stderr():
                self.skipTest("not reported here: %s" % x.stderr())
            shared = x.shared_dir("sync")
            flag, started = os.path.join(shared, "flag"), os.path.join(shared, "started")
            xpath, ypath = ("/usr/te-fsd-%s-%s" % (TOKEN, n) for n in "xy")
            cx, cy = x.client(), y.client()
            # each daemon's first call: the first uid of the same range
            xcalls = [{"id": "x", "name": "fsd",
                       "arguments": {"refuse_until": [xpath, flag, started]}}]
            bx = cx.start_batch(xcalls)
            deadline_wait(lambda: os.path.exists(started), what="x's call refusing")
            ry = cy.run([{"id": "y", "name": "fsd",
                          "arguments": {"try": [["create", ypath]]}}])
            with open(flag, "w"):
                pass
            rx = harness.BatchResult(xcalls, cx.recv_batch(bx))
            self.assertEqual(rx.completed("x")["enforced"]["uid"],
                             ry.completed("y")["enforced"]["uid"])
            self.assertEqual(fs_entries(rx.completed("x")),
                             [(xpath, "create", "read-only in the view")])
            self.assertEqual(fs_entries(ry.completed("y")),
                             [(ypath, "create", "read-only in the view")])
        finally:
            x.stop()
            y.stop()


class SandboxChecks(unittest.TestCase):
    """toolexec sandbox lists its command's refusals on stderr and in its
    --json summary: as root (the command runs as toolexec or nobody, the
    uid watched); run by another user it cannot see them (no BPF)."""

    def sandbox(self, *args, prefix=()):
        p = subprocess.run(list(prefix) + [os.environ["TOOLEXEC"], "sandbox"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                           env=harness.sandbox_env(), timeout=60 * harness.SCALE)
        err = p.stderr.decode()
        lines = [l for l in err.splitlines() if l.startswith("{")]
        self.assertTrue(lines, err)
        return err, json.loads(lines[-1])

    def test_as_root(self):
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root")
        err, summary = self.sandbox("-v", "--json", "--", "sh", "-c",
                                    "ls /home; echo x > /usr/x; cat /root/.bashrc")
        # where the kernel refuses the BPF program, -v says why
        why = [l for l in err.splitlines() if "file-system refusals are not reported: BPF" in l]
        if why:
            self.skipTest("this kernel gives toolexec sandbox nothing: %s" % why[0])
        for e in ({"kind": "filesystem", "path": "/home", "access": "read",
                   "rule": "hidden by the view"},
                  {"kind": "filesystem", "path": "/usr/x", "access": "create",
                   "rule": "read-only in the view"},
                  {"kind": "filesystem", "path": "/root/.bashrc", "access": "read",
                   "rule": "hidden by the view"}):
            self.assertIn(e, summary["denied"], err)
        self.assertGreaterEqual(summary["denied_filesystem"], 3)
        self.assertIn("toolexec sandbox: denied: create /usr/x (read-only in the view)", err)
        # a --hide is named as such
        err, summary = self.sandbox("--hide", "/etc/hostname", "--json", "--", "cat",
                                    "/etc/hostname")
        self.assertIn({"kind": "filesystem", "path": "/etc/hostname", "access": "read",
                       "rule": "hide"}, summary["denied"], err)

    def test_not_its_users_other_processes(self):
        """Its user's other processes (the command runs as toolexec or
        nobody, which others may run as too) are not its own."""
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root")
        try:
            user = pwd.getpwnam("toolexec")
        except KeyError:
            user = pwd.getpwnam("nobody")
        other = "/usr/te-fsd-%s-other" % TOKEN
        # refused all along as the same user, before and after the command
        loop = subprocess.Popen(["setpriv", "--reuid=%d" % user.pw_uid,
                                 "--regid=%d" % user.pw_gid, "--clear-groups", "sh", "-c",
                                 "while :; do true > %s; done 2>/dev/null" % other])
        try:
            deadline_wait(lambda: os.path.exists("/proc/%d" % loop.pid), what="the loop")
            err, summary = self.sandbox("--json", "--", "sh", "-c",
                                        "sleep 0.2; : > /usr/te-fsd-%s-mine" % TOKEN)
        finally:
            loop.kill()
            loop.wait()
        paths = [e["path"] for e in summary["denied"] if e["kind"] == "filesystem"]
        self.assertIn("/usr/te-fsd-%s-mine" % TOKEN, paths, err)
        self.assertNotIn(other, paths, err)

    def test_flood_while_its_ring_is_unread(self):
        """A flood of one refusal while toolexec sandbox reads nothing (it
        is stopped): the repeats take no room in its ring (a quarter of the
        daemon's), so the refusal after them is listed all the same."""
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root")
        d = tempfile.mkdtemp(prefix="te-fsd-flood-", dir="/var/cache")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        os.chmod(d, 0o777)  # a --write the command's user may write to
        for f in ("ready", "go", "done"):
            os.mkfifo(os.path.join(d, f), 0o666)
            os.chmod(os.path.join(d, f), 0o666)
        flood, after = "/usr/te-fsd-%s-flood" % TOKEN, "/usr/te-fsd-%s-after" % TOKEN
        # true, not ":" (a special builtin: a failed redirection would end sh)
        script = ("echo > {d}/ready; read x < {d}/go; i=0; while [ $i -lt 20000 ]; do "
                  "true 2>/dev/null > {f}; i=$((i+1)); done; true 2>/dev/null > {a}; "
                  "echo > {d}/done").format(d=d, f=flood, a=after)
        p = subprocess.Popen([os.environ["TOOLEXEC"], "sandbox", "--write", d, "--json", "--",
                              "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                             env=harness.sandbox_env())
        try:
            fifo_wait(os.path.join(d, "ready"), p)  # its command runs, watched
            os.kill(p.pid, signal.SIGSTOP)  # toolexec execs the engine: the reader
            deadline_wait(lambda: proc_state(p.pid) == "T", what="the engine stopped")
            with open(os.path.join(d, "go"), "w") as f:
                f.write("\n")
            fifo_wait(os.path.join(d, "done"), p)  # 20,001 refusals made, none read
        finally:
            os.kill(p.pid, signal.SIGCONT)
            try:
                out, err = p.communicate(timeout=60 * harness.SCALE)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise
        err = err.decode()
        lines = [l for l in err.splitlines() if l.startswith("{")]
        self.assertTrue(lines, err)
        summary = json.loads(lines[-1])
        paths = [e["path"] for e in summary["denied"] if e["kind"] == "filesystem"]
        self.assertIn(flood, paths, err)
        self.assertIn(after, paths, err)
        self.assertGreaterEqual(summary["denied_filesystem"], 20001, err)

    def test_as_a_user(self):
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (to run it as nobody)")
        nb = pwd.getpwnam("nobody")
        err, summary = self.sandbox(
            "--json", "--", "sh", "-c", "echo x > /usr/x",
            prefix=("setpriv", "--reuid=%d" % nb.pw_uid, "--regid=%d" % nb.pw_gid,
                    "--clear-groups"))
        self.assertIn("Read-only file system", err)
        self.assertEqual([e for e in summary["denied"] if e["kind"] == "filesystem"], [], err)


class OptedOutChecks(unittest.TestCase):
    """--fs-refusals no: a root daemon loads no BPF program (the host's
    system calls keep their cost), lists none, and says so."""

    def test_no_program_none_listed(self):
        harness.require_env()
        if os.geteuid() != 0:
            self.skipTest("needs root (a root daemon)")
        d = Daemon([py_tool("fsd", filesystem=harness.with_tree({}))], ["--fs-refusals", "no"])
        self.addCleanup(d.stop)
        res = d.client().run([{"id": "a", "name": "fsd", "arguments": {
            "try": [["create", "/usr/te-fsd-%s-optout" % TOKEN]]}}])
        self.assertIn(res.result("a").get("ok", res.result("a"))["tried"][0], ("EROFS", "EACCES"))
        done = res.completed("a")
        self.assertFalse([e for e in done.get("denied", []) if e["kind"] == "filesystem"])
        self.assertNotIn("denied_filesystem", done)
        self.assertIn("file-system refusals are not reported: --fs-refusals no", d.stderr())
        links = []
        for fd in os.listdir("/proc/%d/fd" % d.proc.pid):
            try:  # one the daemon closed since the listing (a call's end) held nothing
                links.append(os.readlink("/proc/%d/fd/%s" % (d.proc.pid, fd)))
            except FileNotFoundError:
                pass
        self.assertFalse([l for l in links if "bpf" in l], links)


class UnprivilegedChecks(unittest.TestCase):
    """An unprivileged daemon: the kernel gives it nothing to see them by
    (BPF needs CAP_BPF and CAP_PERFMON; Landlock's audit records need
    CAP_AUDIT_READ and the host's audit on), and its calls share its uid."""

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (to drop the daemon to nobody)")
        cls.daemon = harness.nobody_daemon([py_tool("fsd", filesystem=harness.with_tree({}))])

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def test_says_so_and_lists_none(self):
        res = self.daemon.client().run([{"id": "a", "name": "fsd", "arguments": {
            "try": [["create", "/usr/te-fsd-%s-nobody" % TOKEN]]}}])
        self.assertIn(res.result("a").get("ok", res.result("a"))["tried"][0], ("EROFS", "EACCES"))
        done = res.completed("a")
        self.assertFalse([e for e in done.get("denied", []) if e["kind"] == "filesystem"])
        self.assertNotIn("denied_filesystem", done)
        self.assertIn("file-system refusals are not reported: calls are told apart by a uid "
                      "of their own each, a root daemon's", self.daemon.stderr())

    def test_refusals_reported(self):
        self.skipTest("an unprivileged daemon gets no file-system refusals from the kernel: "
                      "BPF needs CAP_BPF and CAP_PERFMON, Landlock's audit records "
                      "CAP_AUDIT_READ and the host's audit on, and its calls share its uid")


if __name__ == "__main__":
    unittest.main()
