"""toolexec sandbox --learn FILE -- CMD: the command
runs permissively while what it touches is recorded, and FILE gets the
proposed definition (toolexecd.tools(5)). The command reads a config file
the default view hides (in /tmp, which a sandbox sees as its own), writes
into an output directory and fetches from a local HTTP server. Applied,
as toolexec sandbox options and as a daemon's tool: the same command runs
with no denials; one that contacts another port is refused and reported.
As the user running the suite (root in CI) and as nobody."""

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import unittest

import harness
from harness import Daemon
from test_sandbox_cmd import http_server

TOOLEXEC = os.environ.get("TOOLEXEC", "")
PY = "/usr/bin/python3"

SCRIPT = r'''
import os, sys, urllib.request
conf, out, url = sys.argv[1:4]
with open(conf) as f:
    setting = f.read().strip()
os.makedirs(os.path.join(out, "sub"), exist_ok=True)
with open(os.path.join(out, "sub", "result.txt"), "w") as f:
    f.write(setting + "\n")
body = urllib.request.urlopen(url, timeout=20).read().decode().strip()
print(setting, body)
'''


class Base:
    as_nobody = False

    def setUp(self):
        harness.require_env()
        self.srv, self.other = http_server(), http_server()
        self.addCleanup(self.srv.shutdown)
        self.addCleanup(self.other.shutdown)
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix="sbx-learn-"))
        self.addCleanup(shutil.rmtree, self.dir, True)
        os.chmod(self.dir, 0o755)
        os.mkdir(os.path.join(self.dir, "conf"), 0o755)
        self.conf = os.path.join(self.dir, "conf", "tool.conf")
        with open(self.conf, "w") as f:
            f.write("setting=1\n")
        os.chmod(self.conf, 0o644)
        self.out = os.path.join(self.dir, "out")
        os.mkdir(self.out)
        os.chmod(self.out, 0o1777)
        self.runtime = tempfile.mkdtemp(prefix="sbx-learn-rt-")
        self.addCleanup(shutil.rmtree, self.runtime, True)
        if self.as_nobody:
            nb = pwd.getpwnam("nobody")
            os.chown(self.runtime, nb.pw_uid, nb.pw_gid)
        self.file = os.path.join(self.dir, "learned.json")
        os.chmod(self.dir, 0o777)  # nobody writes the proposal there

    def url(self, srv):
        return "http://127.0.0.1:%d/x" % srv.server_address[1]

    def command(self, url):
        return [PY, "-I", "-c", SCRIPT, self.conf, self.out, url]

    def sandbox(self, *args):
        pre = []
        if self.as_nobody:
            nb = pwd.getpwnam("nobody")
            pre = ["setpriv", "--reuid=%d" % nb.pw_uid, "--regid=%d" % nb.pw_gid,
                   "--clear-groups"]
        p = subprocess.run(pre + [TOOLEXEC, "sandbox"] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60 * harness.SCALE,
                           env=harness.sandbox_env(XDG_RUNTIME_DIR=self.runtime))
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def learn(self):
        rc, out, err = self.sandbox("--learn", self.file, "--", *self.command(self.url(self.srv)))
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "setting=1 hello from the host", err)
        with open(self.file) as f:
            d = json.load(f)
        self.assertNotIn("learn", d)
        return d

    def test_learned_definition_runs_without_denials(self):
        d = self.learn()
        target = "127.0.0.1:%d" % self.srv.server_address[1]
        self.assertEqual(d["network"], {"allow": [target]}, d)
        self.assertIn(self.conf, d["filesystem"]["read"], d)
        self.assertEqual(d["filesystem"]["write"], [self.out], d)
        self.assertEqual(d["command"], self.command(self.url(self.srv)))
        # without the proposal, the default sandbox refuses it all
        rc, _, err = self.sandbox("--json", "--", *self.command(self.url(self.srv)))
        self.assertNotEqual(rc, 0, err)
        # applied as options: the same command, no denials
        opts = ["--json"]
        for p in d["filesystem"].get("read", []):
            opts += ["--read", p]
        for p in d["filesystem"].get("write", []):
            opts += ["--write", p]
        opts += ["--net", ",".join(d["network"]["allow"])]
        rc, out, err = self.sandbox(*opts, "--", *self.command(self.url(self.srv)))
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "setting=1 hello from the host")
        summary = json.loads([l for l in err.splitlines() if l.startswith("{")][-1])
        self.assertEqual(summary["denied"], [], summary)
        # something else: another port is refused and reported
        rc, out, err = self.sandbox(*opts, "--", *self.command(self.url(self.other)))
        self.assertNotEqual(rc, 0, err)
        summary = json.loads([l for l in err.splitlines() if l.startswith("{")][-1])
        self.assertIn({"kind": "network", "host": "127.0.0.1",
                       "port": self.other.server_address[1]},
                      [{k: x.get(k) for k in ("kind", "host", "port")} for x in summary["denied"]],
                      summary)

    def test_learned_definition_loads_in_the_daemon(self):
        d = self.learn()
        d["name"] = "learned"
        d["timeout_ms"] = 60000
        d["schema"] = {"type": "object"}
        if harness.tree_reads():  # the build tree, where the harness runs it from
            d["filesystem"]["read"] = d["filesystem"].get("read", []) + harness.tree_reads()
        # the learning run's output: a root daemon's call runs as a uid of its own
        shutil.rmtree(os.path.join(self.out, "sub"))
        daemon = harness.nobody_daemon([d]) if self.as_nobody else Daemon([d])
        self.addCleanup(daemon.stop)
        r = daemon.client().run([{"id": "a", "name": "learned", "arguments": {}}],
                                timeout=60 * harness.SCALE)
        ev = r.completed("a")
        self.assertIn("ok", ev["result"], ev)
        self.assertIn("setting=1 hello from the host", json.dumps(ev["result"]["ok"]))
        # only the C library's look-up of the call's uid (no passwd entry)
        # in systemd's userdb, which the view hides with /run: refused,
        # harmless, and not something learn mode proposes
        self.assertEqual([e for e in ev.get("denied", [])
                          if not e.get("path", "").startswith("/run/systemd/userdb")], [], ev)


@unittest.skipUnless(TOOLEXEC, "TOOLEXEC not set")
class AsCaller(Base, unittest.TestCase):
    pass


@unittest.skipUnless(TOOLEXEC and os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class AsNobody(Base, unittest.TestCase):
    as_nobody = True


if __name__ == "__main__":
    unittest.main()
