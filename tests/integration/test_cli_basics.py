"""What a new user meets first in the CLI and the daemon:
toolexec --version and the MCP server's serverInfo carry the project's
version (not "unknown"); each --help lists each option once; with
XDG_RUNTIME_DIR unset, toolexec finds the quickstart's socket in
${TMPDIR:-/tmp}/toolexecd-UID (only in a directory of the user's own);
--metrics-listen starts without a libmicrohttpd warning."""

import json
import os
import pwd
import re
import subprocess
import unittest

import harness
from harness import Daemon, NobodyDaemon, give_work_dir, started

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
TOOLEXEC = os.environ.get("TOOLEXEC")


def project_version():
    with open(os.path.join(SRC, "meson.build")) as f:
        return re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)


def options_listed(text):
    return re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]*)", text, re.M)


@unittest.skipUnless(TOOLEXEC, "TOOLEXEC not set")
class CliBasics(unittest.TestCase):

    def test_version_is_the_project_version(self):
        out = subprocess.run([TOOLEXEC, "--version"], capture_output=True, text=True).stdout
        self.assertEqual(out.split()[:2], ["toolexec", project_version()], out)

    def test_mcp_server_version(self):
        with Daemon([]) as d:
            p = subprocess.run(
                [TOOLEXEC, "--socket", d.sock, "mcp"], capture_output=True, text=True,
                timeout=harness.WAIT,
                input=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                  "params": {"protocolVersion": "2025-06-18",
                                             "capabilities": {}}}) + "\n")
            r = json.loads(p.stdout.splitlines()[0])
            self.assertEqual(r["result"]["serverInfo"]["version"], project_version(), r)

    def test_help_lists_each_option_once(self):
        for cmd in ([harness.TOOLEXECD, "--help"], [TOOLEXEC, "--help"]):
            out = subprocess.run(cmd, capture_output=True, text=True).stdout
            opts = options_listed(out)
            self.assertIn("--help", opts, out)
            dups = sorted({o for o in opts if opts.count(o) > 1})
            self.assertEqual(dups, [], "%s lists these more than once" % cmd[0])

    def test_metrics_listen_starts_without_a_warning(self):
        with Daemon([], ["--metrics-listen", "127.0.0.1:0"]) as d:
            # the main socket listens before /metrics does: "listening on"
            # is the start-up's last line, the whole start-up logged
            log = harness.deadline_wait(lambda: "listening on" in d.stderr() and d.stderr(),
                                        what="the start-up's last line")
            self.assertIn("metrics on http://127.0.0.1:", log)
            self.assertNotIn("metrics listener:", log)
            self.assertNotIn("MHD_OPTION", log)


@unittest.skipUnless(TOOLEXEC, "TOOLEXEC not set")
class QuickstartSocket(unittest.TestCase):
    """The daemon as nobody on contrib/quickstart.sh's socket; toolexec as
    nobody with XDG_RUNTIME_DIR unset and TMPDIR pointing at its parent."""

    def setUp(self):
        harness.require_env(self)
        self.nobody = pwd.getpwnam("nobody")
        self.d = NobodyDaemon([harness.worker_tool("echo", "echo")], start=False)
        give_work_dir(self.d)
        self.rundir = self.d.path("toolexecd-%d" % self.nobody.pw_uid)
        os.mkdir(self.rundir, 0o700)
        os.chown(self.rundir, self.nobody.pw_uid, self.nobody.pw_gid)
        self.d.sock = os.path.join(self.rundir, "toolexecd.sock")
        started(self.d)

    def tearDown(self):
        self.d.stop()

    def toolexec(self, *args):
        env = {k: v for k, v in os.environ.items()
               if k not in ("XDG_RUNTIME_DIR", "TOOLEXECD_SOCKET")}
        env["TMPDIR"] = self.d.tmp
        return subprocess.run(
            ["setpriv", "--reuid=%d" % self.nobody.pw_uid, "--regid=%d" % self.nobody.pw_gid,
             "--clear-groups", TOOLEXEC] + list(args),
            env=env, capture_output=True, text=True, timeout=harness.WAIT)

    def test_finds_the_quickstart_socket(self):
        self.assertFalse(os.path.exists("/run/user/%d/toolexecd.sock" % self.nobody.pw_uid))
        r = self.toolexec("tools", "-j")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([t["name"] for t in json.loads(r.stdout)], ["echo"])

    def test_not_in_a_directory_others_may_write(self):
        os.chmod(self.rundir, 0o777)
        r = self.toolexec("tools", "-j")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("toolexecd-%d/toolexecd.sock" % self.nobody.pw_uid, r.stderr)


if __name__ == "__main__":
    harness.main()
