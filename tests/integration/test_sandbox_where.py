"""toolexec sandbox where the caller stands: the command starts in the
caller's working directory (shown read-only, writable where --write says,
even inside a hidden tree such as /home), relative paths name what is
there, HOME is the call's private directory, and a directory the command's
user cannot use is said before it runs. Real processes, as the caller and
as nobody (test_sandbox_cmd's Runner)."""

import os
import shutil
import tempfile
import unittest

import test_sandbox_cmd as cmd
from test_sandbox_cmd import PY, TOOLEXEC

SCRIPT = """import os, sys
os.makedirs("out", exist_ok=True)
with open("out/result.txt", "w") as f:
    f.write(sys.stdin.read().upper())
print("ran in", os.getcwd())
"""


class Where(cmd.Runner):
    def project(self, parent=None):
        """A directory holding script.py and an out/ the command's user may
        write, which the caller and nobody may enter."""
        d = tempfile.mkdtemp(prefix="proj-", dir=parent or self.tmp)
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        with open(os.path.join(d, "script.py"), "w") as f:
            f.write(SCRIPT)
        os.chmod(os.path.join(d, "script.py"), 0o644)
        os.mkdir(os.path.join(d, "out"))
        os.chmod(os.path.join(d, "out"), 0o777)
        return d

    def check_script_runs(self, d):
        rc, out, err = self.sandbox("--write", "out", "--", PY, "script.py", stdin=b"hello\n",
                                    cwd=d)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "ran in %s\n" % d)
        with open(os.path.join(d, "out", "result.txt")) as f:
            self.assertEqual(f.read(), "HELLO\n")

    def test_relative_script_and_write_dir(self):
        self.check_script_runs(self.project())

    def test_in_a_hidden_tree(self):
        if not os.path.isdir("/home"):
            self.skipTest("no /home")
        self.check_script_runs(self.project("/home"))

    def test_the_directory_is_read_only_unless_written(self):
        d = self.project()
        os.chmod(d, 0o777)
        rc, out, err = self.sandbox("--", "/bin/sh", "-c", "touch here && echo touched", cwd=d)
        self.assertNotEqual(rc, 0)
        self.assertNotIn("touched", out)
        self.assertFalse(os.path.exists(os.path.join(d, "here")))
        rc, out, err = self.sandbox("--write", ".", "--", "/bin/sh", "-c",
                                    "touch here && echo touched", cwd=d)
        self.assertEqual((rc, out), (0, "touched\n"), err)

    def test_hide_over_it_starts_in_the_private_directory(self):
        d = self.project()
        rc, out, err = self.sandbox("--hide", ".", "--", "/bin/sh", "-c",
                                    'pwd; test "$(pwd)" = "$HOME" && echo home', cwd=d)
        self.assertEqual(rc, 0, err)
        self.assertNotIn(d, out)
        self.assertIn("home", out)

    def test_home_is_the_private_directory(self):
        rc, out, err = self.sandbox("--", "/bin/sh", "-c",
                                    'echo "$HOME"; touch "$HOME/x" && echo writable',
                                    cwd=self.project())
        self.assertEqual(rc, 0, err)
        home, said = out.splitlines()
        self.assertNotEqual(home, os.environ.get("HOME"))
        self.assertEqual(said, "writable")

    def test_in_tmp_itself(self):
        # the command's /tmp is its own: it starts there, without the host's
        with tempfile.NamedTemporaryFile(prefix="host-only-", dir="/tmp") as f:
            rc, out, err = self.sandbox("--", "/bin/sh", "-c", "pwd; ls -A", cwd="/tmp")
            self.assertEqual(rc, 0, err)
            self.assertEqual(out.splitlines()[0], "/tmp")
            self.assertNotIn(os.path.basename(f.name), out)

    def test_verbose_says_no_daemon_only_lines(self):
        rc, out, err = self.sandbox("-v", "--", "/bin/true", cwd=self.project())
        self.assertEqual(rc, 0, err)
        self.assertIn("confinement:", err)  # how the sandbox is built
        self.assertNotIn("the daemon", err)

    def test_write_dir_the_user_cannot_write_is_said_first(self):
        d = self.project()
        os.chmod(os.path.join(d, "out"), 0o755)  # root's, not the command's user's
        rc, out, err = self.sandbox("--write", "out", "--", "/bin/sh", "-c", "echo ran", cwd=d)
        self.assertEqual(rc, 125, err)
        self.assertEqual(out, "")
        self.assertRegex(err, r"--write %s/out: not writable by \S+ \(uid \d+\)" % d)
        self.assertIn("chown", err)
        self.assertIn("--user", err)

    def test_directory_the_user_cannot_enter_is_said_first(self):
        if self.as_nobody or os.geteuid() != 0:
            self.skipTest("root's command runs as another user")
        d = self.project()
        os.chmod(d, 0o700)
        rc, out, err = self.sandbox("--", "/bin/sh", "-c", "echo ran", cwd=d)
        self.assertEqual(rc, 125, err)
        self.assertEqual(out, "")
        self.assertRegex(err, r"current directory %s cannot be entered by \S+ \(uid \d+\)" % d)
        # its own mode is fine, but not the way down to it (outside a hidden tree)
        locked = tempfile.mkdtemp(prefix="locked-", dir=self.tmp)
        self.addCleanup(shutil.rmtree, locked, True)
        d = self.project(locked)
        for learn in ([], ["--learn", os.path.join(self.tmp, "learned.json")]):
            rc, out, err = self.sandbox(*learn, "--", "/bin/sh", "-c", "echo ran", cwd=d)
            self.assertEqual((rc, out), (125, ""), err)
            self.assertIn("current directory %s cannot be entered" % d, err)


@unittest.skipUnless(TOOLEXEC, "TOOLEXEC not set")
class AsCaller(Where, unittest.TestCase):
    pass


@unittest.skipUnless(TOOLEXEC and os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class AsNobody(Where, unittest.TestCase):
    as_nobody = True


if __name__ == "__main__":
    cmd.harness.main()
