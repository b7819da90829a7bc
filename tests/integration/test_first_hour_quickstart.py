"""contrib/quickstart.sh as an ordinary user without XDG_RUNTIME_DIR (su -,
ssh without pam_systemd, containers) used to build everything and then stop;
the fallback it suggested failed too. It now picks a directory of the user's
own before building, and the daemon it starts answers calls on the socket it
names and streams events on its events socket (what the README's tail
commands use).

Runs the real script as nobody (setpriv), with the tree as built
(QUICKSTART_NO_BUILD=1: nobody may not write the build directory)."""

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import unittest

import harness
from harness import Client, deadline_wait, WAIT

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "contrib", "quickstart.sh")


class Quickstart(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root and setpriv to run the script as nobody")
        self.build = os.path.dirname(os.path.dirname(harness.TOOLEXECD))
        if not os.path.isdir(os.path.join(self.build, "contrib", "tools.d")):
            self.skipTest("no contrib/tools.d in " + self.build)
        self.nobody = pwd.getpwnam("nobody")
        self.tmp = tempfile.mkdtemp(prefix="te-qs-", dir="/tmp")
        os.chmod(self.tmp, 0o755)
        self.home = os.path.join(self.tmp, "tmp")  # the user's TMPDIR
        os.mkdir(self.home)
        os.chown(self.home, self.nobody.pw_uid, self.nobody.pw_gid)
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_without_xdg_runtime_dir(self):
        env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
        # relative, as its default ("build") is: the script runs from the tree's top
        build = os.path.relpath(self.build, ROOT)
        env.update(TMPDIR=self.home, QUICKSTART_NO_BUILD="1", BUILD_DIR=build,
                   HOME="/nonexistent")
        out_path = os.path.join(self.tmp, "out")
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(
                ["setpriv", "--reuid=%d" % self.nobody.pw_uid, "--regid=%d" % self.nobody.pw_gid,
                 "--clear-groups", "sh", SCRIPT],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                start_new_session=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())

        def said():
            with open(out_path) as f:
                text = f.read()
            if proc.poll() is not None:
                raise AssertionError("quickstart ended (%s):\n%s" % (proc.returncode, text))
            m = re.search(r"toolexecd is starting on (\S+)\.", text)
            return m and "listening on" in text and (m.group(1), text)

        sock, text = deadline_wait(said, what="the quickstart daemon to listen")
        rundir = os.path.join(self.home, "toolexecd-%d" % self.nobody.pw_uid)
        self.assertEqual(os.path.dirname(sock), rundir, text)
        self.assertEqual(os.stat(rundir).st_mode & 0o777, 0o700)
        # the events socket it prints is there, and tails what the socket runs
        m = re.search(r"SOCK=(\S+) EVENTS=(\S+events\.sock)", text)
        self.assertTrue(m, text)
        self.assertEqual(m.group(1), sock)
        # the toolexec it prints runs from anywhere, not only the tree's top
        m = re.search(r"^ *(\S+/toolexec) --socket", text, re.M)
        self.assertTrue(m and os.path.isabs(m.group(1)), text)
        p = subprocess.run([m.group(1), "--socket", sock, "call", "calc", '{"expression": "6*7"}'],
                           cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("42", p.stdout.decode())
        m = re.search(r"SOCK=(\S+) EVENTS=(\S+events\.sock)", text)
        tail = Client(m.group(2))
        self.addCleanup(tail.close)
        c = Client(sock)
        self.addCleanup(c.close)
        res = c.run([{"id": "c0", "name": "echo", "arguments": {"x": 1}},
                     {"id": "c1", "name": "calc", "arguments": {"expression": "6*7"}}],
                    batch="qs")
        self.assertEqual(res.result("c0"), {"ok": {"x": 1}}, res.events)
        self.assertEqual(res.result("c1"), {"ok": 42}, res.events)
        ev = tail.recv_for(lambda e: e.get("event") == "batch_completed" and e["batch"] == "qs")
        self.assertEqual(len(ev["messages"]), 2)
        # the script exec'd the daemon: SIGTERM stops it cleanly
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=WAIT), 0)

    def test_the_daemon_alone_without_xdg_runtime_dir(self):
        """toolexecd itself, no --socket: it listens in the same
        ${TMPDIR}/toolexecd-UID as its work directory, where toolexec looks
        (it used to set up, then exit asking for --socket)."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("XDG_RUNTIME_DIR", "TOOLEXECD_SOCKET", "RUNTIME_DIRECTORY")}
        env.update(TMPDIR=self.home, HOME="/nonexistent")
        as_nobody = ["setpriv", "--reuid=%d" % self.nobody.pw_uid,
                     "--regid=%d" % self.nobody.pw_gid, "--clear-groups"]
        err_path = os.path.join(self.tmp, "err")
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                as_nobody + [harness.TOOLEXECD, "--tools",
                             os.path.join(self.build, "contrib", "tools.d")],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        sock = os.path.join(self.home, "toolexecd-%d" % self.nobody.pw_uid, "toolexecd.sock")

        def listening():
            with open(err_path) as f:
                text = f.read()
            if proc.poll() is not None:
                raise AssertionError("toolexecd ended (%s):\n%s" % (proc.returncode, text))
            return "listening on" in text and text

        text = deadline_wait(listening, what="toolexecd to listen")
        self.assertIn(sock, text)
        self.assertEqual(os.stat(os.path.dirname(sock)).st_mode & 0o777, 0o700)
        toolexec = os.environ.get("TOOLEXEC") or os.path.join(self.build, "daemon", "cli",
                                                                "toolexec")
        p = subprocess.run(as_nobody + [toolexec, "call", "calc", '{"expression": "6*7"}'],
                           capture_output=True, text=True, env=env, timeout=WAIT)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "42"), p.stderr)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=WAIT), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
