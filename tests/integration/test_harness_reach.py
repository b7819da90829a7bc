"""The harness's way through a directory closed to other users
(harness_paths.reach_trees): a tree in a `mktemp -d` (mode 0700), as
package builders and CI clone into, and a program in it that the user
nobody cannot run from the host; in a process that opened the way, nobody
runs it, the test still sees all the directory held (an entry beside the
tree, a file, a symbolic link), nobody gets no further into those than
their own modes let it, nothing new can be written there, and once that
process is gone nothing of it is left (no mount, the directory as it
was)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness
from harness import WAIT

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]

CHILD = r"""
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import harness_paths
tree, prog, nobody = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
out = {"covered": harness_paths.reach_trees([tree])}
p = subprocess.run(nobody + [prog], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
out["run"] = [p.returncode, p.stdout.decode()]
top = os.path.dirname(tree)
out["listed"] = sorted(os.listdir(top))
out["mode"] = os.stat(top).st_mode & 0o7777
secret = os.path.join(top, "beside", "secret")
out["secret"] = open(secret).read()
out["secret_nobody"] = subprocess.run(nobody + ["cat", secret], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL).returncode
out["note"] = open(os.path.join(top, "note")).read()
out["link"] = os.readlink(os.path.join(top, "link"))
try:
    open(os.path.join(top, "planted"), "w").close()
    out["write"] = "written"
except OSError as e:
    out["write"] = e.strerror
print(json.dumps(out))
"""


def mounts_at(path):
    with open("/proc/self/mountinfo") as f:
        return [l for l in f if l.split()[4] == path or l.split()[4].startswith(path + "/")]


class ClosedDirectory(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("the tools run as the tests' own user when not root")
        if not shutil.which("setpriv"):
            raise unittest.SkipTest("no setpriv")

    def setUp(self):
        self.top = os.path.realpath(tempfile.mkdtemp(prefix="te-reach-", dir="/var/tmp"))
        self.addCleanup(shutil.rmtree, self.top, True)
        self.tree = os.path.join(self.top, "tree")
        os.mkdir(self.tree, 0o755)
        os.mkdir(os.path.join(self.top, "beside"), 0o700)
        with open(os.path.join(self.top, "beside", "secret"), "w") as f:
            f.write("s3cret")
        with open(os.path.join(self.top, "note"), "w") as f:
            f.write("a note")
        os.symlink("tree/prog", os.path.join(self.top, "link"))
        self.listed = ["beside", "link", "note", "tree"]
        self.prog = os.path.join(self.tree, "prog")
        with open(self.prog, "w") as f:
            f.write("#!/bin/sh\necho reached\n")
        os.chmod(self.prog, 0o755)
        self.assertEqual(os.stat(self.top).st_mode & 0o777, 0o700)

    def as_nobody(self):
        return subprocess.run(AS_NOBODY + [self.prog], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=WAIT)

    def test_nobody_runs_a_program_below_it_and_nothing_is_left(self):
        p = self.as_nobody()
        self.assertNotEqual(p.returncode, 0, "the premise: the closed directory keeps nobody out")
        self.assertIn(b"Permission denied", p.stdout)
        c = subprocess.run([sys.executable, "-c", CHILD, harness.HERE, self.tree, self.prog,
                            json.dumps(AS_NOBODY)], stdout=subprocess.PIPE, timeout=WAIT)
        self.assertEqual(c.returncode, 0)
        out = json.loads(c.stdout)
        self.assertEqual(out["covered"], [self.top])
        self.assertEqual(out["run"], [0, "reached\n"])
        self.assertEqual(out["listed"], self.listed)
        self.assertEqual(out["mode"], 0o755)
        self.assertEqual((out["secret"], out["note"], out["link"]), ("s3cret", "a note", "tree/prog"))
        self.assertNotEqual(out["secret_nobody"], 0, "nobody read a 0700 directory's file")
        self.assertEqual(out["write"], os.strerror(30))  # EROFS
        # the host's: as it was
        self.assertEqual(mounts_at(self.top), [])
        self.assertEqual(os.stat(self.top).st_mode & 0o777, 0o700)
        self.assertEqual(sorted(os.listdir(self.top)), self.listed)
        self.assertNotEqual(self.as_nobody().returncode, 0)


if __name__ == "__main__":
    harness.main()
