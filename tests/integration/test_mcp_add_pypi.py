"""`toolexec mcp-add NAME --pypi PACKAGE`: an MCP server installed with pip
into a virtual environment of its own, PREFIX/NAME, and a definition written
for it that the daemon's --check takes, then loaded by the real daemon, root
and unprivileged, its tool called.

PyPI cannot be reached from the machines these tests run on, so the package
is a wheel of our own (tests/mcp_servers/tinypy, packed here by pip wheel
offline, PIP_NO_INDEX set for mcp-add's pip), installed as a PyPI name would
be; the real PyPI servers are tests/integration/test_mcp_server_pypi.py's
(skipped where PyPI is out of reach).

- installed where --prefix says, its definition runs the distribution's
  console script from the environment (the server says which interpreter
  and file run it), the server's arguments after --; --module runs python
  -m MODULE instead;
- refusals that write nothing: --node or --scripts with --pypi, --module
  with --npm, pip failing (no such wheel), a console script that is not
  there (--bin).

No /usr/bin/python3 with venv, pip and setuptools: SKIP (77)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness
from test_mcp_add import WORK, call, mcp_add, prefix_for

PY = "/usr/bin/python3"
TINYPY = os.path.realpath(os.path.join(harness.HERE, "..", "mcp_servers", "tinypy"))
WHEEL = None


def setUpModule():
    global WHEEL
    os.makedirs(WORK, exist_ok=True)
    out = tempfile.mkdtemp(prefix="tinypy-", dir=WORK)
    src = os.path.join(out, "src")
    shutil.copytree(TINYPY, src)  # setuptools builds in the tree: not in ours
    p = subprocess.run([PY, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "--no-index", "--disable-pip-version-check", "-w", out, src],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError("pip wheel: " + p.stdout + p.stderr)
    WHEEL = os.path.join(out, "mcp_server_tinypy-1.0-py3-none-any.whl")


def pip_add(*args):
    os.environ["PIP_NO_INDEX"] = "1"  # PyPI is never asked: the wheel is all
    return mcp_add(*args)


class Wheel:
    def test_installed_and_called(self):
        d = self.daemon(start=False)
        try:
            prefix = prefix_for(d)
            p = pip_add("tinypy", "--pypi", WHEEL, "--prefix", prefix, "--dir", d.tools_dir,
                        "--", "an-argument")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("1 definition in", p.stdout + p.stderr)  # the daemon's --check
            root = os.path.join(prefix, "tinypy")
            script = os.path.join(root, "bin", "mcp-server-tinypy")
            with open(os.path.join(d.tools_dir, "tinypy.json")) as f:
                definition = json.load(f)
            self.assertEqual(definition["mcp_server"]["command"], [script, "an-argument"])
            self.assertIn(root, definition["filesystem"]["read"])
            p = pip_add("tinym", "--pypi", WHEEL, "--module", "mcp_server_tinypy", "--prefix",
                        prefix, "--dir", d.tools_dir)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(os.path.join(d.tools_dir, "tinym.json")) as f:
                definition = json.load(f)
            self.assertEqual(definition["mcp_server"]["command"],
                             [os.path.join(prefix, "tinym", "bin", "python"), "-m",
                              "mcp_server_tinypy"])
            harness.started(d)
            where = json.loads(call(d, "tinypy.where", {})["ok"]["content"][0]["text"])
            self.assertEqual(where["prefix"], root)
            self.assertTrue(where["file"].startswith(root + "/lib/"), where)
            self.assertEqual(where["args"], ["an-argument"])
            where = json.loads(call(d, "tinym.where", {})["ok"]["content"][0]["text"])
            self.assertEqual(where["prefix"], os.path.join(prefix, "tinym"))
        finally:
            d.stop()


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Wheel)


class Refused(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tools-", dir=WORK)
        self.prefix = tempfile.mkdtemp(prefix="opt-", dir=WORK)
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.addCleanup(shutil.rmtree, self.prefix, ignore_errors=True)

    def test_refusals_write_nothing(self):
        where = ("--prefix", self.prefix, "--dir", self.dir)
        for args, says in ((("p1", "--pypi", WHEEL, "--node", "/usr/bin/node"), "go with --npm"),
                           (("p2", "--npm", "x.tgz", "--module", "m"), "go with --pypi"),
                           (("p3", "--pypi", WHEEL, "--npm", "x.tgz"), "expected one of --npm"),
                           (("p4", "--pypi", os.path.join(self.dir, "none.whl")), "pip install"),
                           (("p5", "--pypi", WHEEL, "--bin", "nosuch"), "no such console")):
            p = pip_add(*args, *where)
            self.assertEqual(p.returncode, 2, (args, p.stdout, p.stderr))
            self.assertIn(says, p.stderr, args)
        self.assertEqual(os.listdir(self.dir), [])


if __name__ == "__main__":
    harness.require_env()
    probe = subprocess.run([PY, "-c", "import setuptools, wheel, venv, ensurepip, pip"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or not os.environ.get("TOOLEXEC"):
        print("SKIP: %s lacks venv, pip or setuptools, or TOOLEXEC is not set: %s"
              % (PY, probe.stderr))
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")],
                  verbosity=2)
