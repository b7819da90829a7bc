"""Learning from file-system refusals (toolexecd.tools(5), LEARN MODE), and
the sentence each refusal carries to an MCP client.

A root daemon's tool with "learn": "refused" runs confined as written; a
hostile tool (tests/workers/fs_denials.py) reads a file in a tree the
default view hides, creates a file in a directory the view shows
read-only, writes a read-only file, reads a file its definition hides,
executes from /dev/shm and creates a file right in /etc. Its event's
"learned" proposes the first three, each as narrow as it was refused (the
file, the file, the directory the entry was made in), reports the hidden
one as hidden on purpose and says why the last two are not proposed. The
definition it writes, loaded, lets the same calls through with no refusal.
toolexec sandbox --learn-refused does the same for a command as root. Through
toolexec mcp (stdio), a refused write reaches the model as a sentence naming
the definition key that allows it."""

import json
import os
import shutil
import subprocess
import unittest
import uuid

import harness
from harness import Daemon
from test_fs_denials import py_tool
from test_mcp import Session

TOOLEXEC = os.environ.get("TOOLEXEC", "")
TOKEN = uuid.uuid4().hex[:10]
SECRET_DIR = "/var/lib/te-lrf-%s" % TOKEN          # hidden by every default view
CONF = os.path.join(SECRET_DIR, "conf", "tool.conf")
OUT_DIR = "/var/cache/te-lrf-out-%s" % TOKEN       # read-only in the view
HIDE_DIR = "/var/cache/te-lrf-hide-%s" % TOKEN     # the definition's "hide"
RO_FILE = "/usr/share/te-lrf-%s-ro" % TOKEN        # read-only in the view


def fs_entries(done):
    """Its file-system refusals but the C library's userdb look-up."""
    return [e for e in done.get("denied", []) if e.get("kind") == "filesystem" and
            not e["path"].startswith("/run/systemd/userdb/")]


class Root(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root: only a root daemon sees file-system refusals")
        os.makedirs(os.path.dirname(CONF), 0o755)
        with open(CONF, "w") as f:
            f.write("setting=1\n")
        os.chmod(CONF, 0o644)
        os.makedirs(OUT_DIR)
        os.chmod(OUT_DIR, 0o777)  # the call's own uid may write there on the host
        os.makedirs(HIDE_DIR, 0o755)
        with open(os.path.join(HIDE_DIR, "secret.txt"), "w") as f:
            f.write("secret")
        with open(RO_FILE, "w") as f:
            f.write("x")
        os.chmod(RO_FILE, 0o666)

    @classmethod
    def tearDownClass(cls):
        for d in (SECRET_DIR, OUT_DIR, HIDE_DIR):
            shutil.rmtree(d, ignore_errors=True)
        if os.path.exists(RO_FILE):
            os.unlink(RO_FILE)

    def daemon(self, tools):
        d = Daemon(tools)
        self.addCleanup(d.stop)
        if "file-system refusals are not reported: BPF" in d.stderr():
            self.skipTest("this kernel gives a root daemon no file-system refusals")
        return d

    def tries(self, tok):
        return [["read", CONF], ["create", os.path.join(OUT_DIR, tok)], ["write", RO_FILE]]

    def test_learned_definition_runs_without_the_refusals(self):
        fs = harness.with_tree({"hide": [HIDE_DIR]})
        d = self.daemon([py_tool("learner", filesystem=fs, learn="refused")])
        c = d.client()
        extra = [["read", os.path.join(HIDE_DIR, "secret.txt")],
                 ["exec", "/dev/shm/te-lrf-%s" % TOKEN],
                 ["create", "/etc/te-lrf-%s" % TOKEN]]
        res = c.run([{"id": "a", "name": "learner",
                      "arguments": {"try": self.tries("a") + extra}}])
        tried = res.result("a")["ok"]["tried"]
        self.assertNotIn("ok", tried, tried)  # confined as written: each refused
        done = res.completed("a")
        learned = done["learned"]
        self.assertEqual(learned["filesystem"]["read"], [CONF], learned)
        self.assertEqual(sorted(learned["filesystem"]["write"]), sorted([OUT_DIR, RO_FILE]),
                         learned)
        self.assertEqual(learned["hidden_on_purpose"], [os.path.join(HIDE_DIR, "secret.txt")])
        notes = {(n["path"], n["access"]) for n in learned["not_proposed"]}
        self.assertEqual(notes, {("/dev/shm/te-lrf-%s" % TOKEN, "execute"),
                                 ("/etc/te-lrf-%s" % TOKEN, "create")}, learned)
        # nothing else is learned while refusals are: no network, no filter
        for key in ("network", "syscalls", "deny_syscalls"):
            self.assertNotIn(key, learned)
        c.send({"op": "learned", "tool": "learner"})
        got = c.recv()
        self.assertEqual(got["event"], "learned", got)
        definition = got["definition"]
        self.assertNotIn("learn", definition)
        self.assertIn(CONF, definition["filesystem"]["read"])
        self.assertEqual(sorted(definition["filesystem"]["write"]), sorted([OUT_DIR, RO_FILE]))
        self.assertEqual(definition["filesystem"]["hide"], [HIDE_DIR])  # kept, not widened
        # the definition loaded: the same calls go through, nothing refused
        d2 = self.daemon([definition])
        res = d2.client().run([{"id": "b", "name": "learner",
                                "arguments": {"try": self.tries("b")}}])
        self.assertEqual(res.result("b")["ok"]["tried"], ["ok", "ok", "ok"])
        self.assertEqual(fs_entries(res.completed("b")), [])

    def test_sandbox_learn_refused(self):
        if not TOOLEXEC:
            self.skipTest("TOOLEXEC not set")
        out = os.path.join(OUT_DIR, "sbx-learned.json")
        script = "cat %s; echo x > %s/sbx; echo y >> %s" % (CONF, OUT_DIR, RO_FILE)

        def sandbox(*args):
            p = subprocess.run([TOOLEXEC, "sandbox"] + list(args) + ["--json", "--", "sh", "-c",
                                                                     script],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                               env=harness.sandbox_env(), timeout=60 * harness.SCALE)
            err = p.stderr.decode()
            if "file-system refusals are not reported: BPF" in err:
                self.skipTest("this kernel gives toolexec sandbox nothing")
            lines = [l for l in err.splitlines() if l.startswith("{")]
            self.assertTrue(lines, err)
            return p.returncode, err, json.loads(lines[-1])

        code, err, summary = sandbox("-v", "--learn-refused", out)
        self.assertNotEqual(code, 0, err)  # refused, really
        self.assertIn({"kind": "filesystem", "path": CONF, "access": "read",
                       "rule": "hidden by the view"}, summary["denied"], err)
        with open(out) as f:
            definition = json.load(f)
        self.assertNotIn("learn", definition)
        self.assertEqual(definition["filesystem"]["read"], [CONF], definition)
        # a shell's >> of a file that is there: the file, not its directory
        self.assertEqual(sorted(definition["filesystem"]["write"]), sorted([OUT_DIR, RO_FILE]),
                         definition)
        # the same command with what was written: no refusal
        opts = [o for p in definition["filesystem"]["read"] for o in ("--read", p)]
        opts += [o for p in definition["filesystem"]["write"] for o in ("--write", p)]
        code, err, summary = sandbox(*opts)
        self.assertEqual(code, 0, err)
        self.assertEqual(fs_entries(summary), [], err)

    def test_mcp_says_why(self):
        if not TOOLEXEC:
            self.skipTest("TOOLEXEC not set")
        d = self.daemon([py_tool("writer", filesystem=harness.with_tree({}))])
        s = Session(self, d.sock)
        s.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test_learn_refused", "version": "1"}})
        self.assertIn("result", s.recv())
        s.notify("notifications/initialized")
        target = os.path.join(OUT_DIR, "mcp")
        s.request(2, "tools/call", {"name": "writer", "arguments": {
            "try": [["create", target], ["write", RO_FILE]]}})
        r = s.response(2)["result"]
        create = ("Creating %s was refused: the tool's view shows it read-only; only the "
                  "tool's definition (\"filesystem\": {\"write\": [\"%s\"]}) allows it, within "
                  "what a run request's \"policy\" leaves." % (target, OUT_DIR))
        write = ("Writing %s was refused: the tool's view shows it read-only; only the tool's "
                 "definition (\"filesystem\": {\"write\": [\"%s\"]}) allows it, within what a "
                 "run request's \"policy\" leaves." % (RO_FILE, RO_FILE))
        text = r["content"][0]["text"]
        self.assertIn("\n- " + create, text)
        self.assertIn("\n- " + write, text)
        denied = r["_meta"]["toolexecd/denied"]
        self.assertIn({"kind": "filesystem", "path": target, "access": "create",
                       "rule": "read-only in the view", "why": create}, denied)
        self.assertIn({"kind": "filesystem", "path": RO_FILE, "access": "write",
                       "rule": "read-only in the view", "why": write}, denied)


class Unprivileged(unittest.TestCase):
    def test_says_nothing_can_be_learned(self):
        """An unprivileged daemon sees no refusals: its empty proposal says
        so rather than passing for a run that was refused nothing."""
        harness.require_env()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (to drop the daemon to nobody)")
        d = harness.nobody_daemon([py_tool("learner", filesystem=harness.with_tree({}),
                                           learn="refused")])
        self.addCleanup(d.stop)
        res = d.client().run([{"id": "a", "name": "learner", "arguments": {
            "try": [["create", "/usr/te-lrf-%s-nobody" % TOKEN]]}}])
        self.assertIn(res.result("a")["ok"]["tried"][0], ("EROFS", "EACCES"))
        learned = res.completed("a")["learned"]
        self.assertIn("sees no file-system refusals", learned.get("refusals_unseen", ""), learned)
        self.assertEqual(learned["filesystem"], {}, learned)


if __name__ == "__main__":
    unittest.main()
