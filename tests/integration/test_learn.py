"""Learn mode. A tool with "learn": true runs its calls permissively (the
host's file system, any host through the egress proxy, the filter's refusals
let through) while the daemon records what they touch; each call's
tool_execution_completed carries "learned" (its proposal), {"op": "learned",
"tool": NAME} the proposal of all its calls since load and the definition
with it applied.

The tool reads a config file the default view hides (under the test's
directory in /tmp, which each call sees as a /tmp of its own), writes into
an output directory there, fetches from a local HTTP server through the
proxy and makes a system call the default filter refuses (syslog). The
proposal is applied (the definition with "learn" removed, in a new
daemon): the same calls succeed with no denials; a call that contacts
another port is refused and reported in "denied", one that reads another
hidden file finds nothing. Against a root daemon and an unprivileged one."""

import json
import os
import shutil
import subprocess
import sys
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness
from harness import Daemon

TOOLEXEC = os.environ.get("TOOLEXEC", "")

TOOL = r'''
import ctypes, json, os, sys, urllib.request
a = json.loads(sys.stdin.readline())
out = {}
with open(a["config"]) as f:
    out["config"] = f.read().strip()
os.makedirs(os.path.join(a["out"], a["sub"]), exist_ok=True)
with open(os.path.join(a["out"], a["sub"], "result.txt"), "w") as f:
    f.write("written\n")
try:
    out["fetched"] = urllib.request.urlopen(a["url"], timeout=20).read().decode()
except OSError as e:
    out["fetched"] = "error: %s" % e
if a.get("syslog"):
    libc = ctypes.CDLL(None, use_errno=True)
    # SYSLOG_ACTION_SIZE_BUFFER: whatever the kernel says, the filter's
    # refusal would be EPERM with a denial
    libc.syscall(103, 10, 0, 0)
if a.get("other"):
    try:
        with open(a["other"]) as f:
            out["other"] = f.read()
    except OSError as e:
        out["other"] = type(e).__name__
print(json.dumps(out))
'''



def denied_but_userdb(ev):
    """A call's denials but the C library's look-up of its uid (no passwd
    entry) in systemd's userdb, which the view hides with /run: refused,
    harmless, and not something learn mode proposes."""
    return [e for e in ev.get("denied", [])
            if not e.get("path", "").startswith("/run/systemd/userdb")]

class Server(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b"hello from the host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def start_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def definition(**fields):
    d = {"name": "learner", "description": "learn mode test tool",
         "schema": {"type": "object"}, "command": ["/usr/bin/python3", "-I", "-c", TOOL],
         "protocol": "plain", "timeout_ms": 60000, "learn": True,
         # said, so that the harness adds no view of its own
         "filesystem": {"read": harness.tree_reads()} if harness.tree_reads() else {}}
    d.update(fields)
    return d


class LearnCases:
    unprivileged = False

    def make_daemon(self, tools):
        if self.unprivileged:
            return harness.nobody_daemon(tools)
        return Daemon(tools)

    def setUp(self):
        harness.require_env()
        self.srv = start_server()
        self.other_srv = start_server()
        self.addCleanup(self.srv.shutdown)
        self.addCleanup(self.other_srv.shutdown)
        self.data = os.path.realpath(__import__("tempfile").mkdtemp(prefix="te-learn-"))
        self.addCleanup(shutil.rmtree, self.data, True)
        os.chmod(self.data, 0o755)
        os.mkdir(os.path.join(self.data, "conf"), 0o755)
        self.config = os.path.join(self.data, "conf", "tool.conf")
        with open(self.config, "w") as f:
            f.write("setting=1\n")
        os.chmod(self.config, 0o644)
        self.secret = os.path.join(self.data, "secret.txt")
        with open(self.secret, "w") as f:
            f.write("not for the tool\n")
        os.chmod(self.secret, 0o644)
        self.out = os.path.join(self.data, "out")
        os.mkdir(self.out)
        os.chmod(self.out, 0o1777)
        self.url = "http://127.0.0.1:%d/x" % self.srv.server_address[1]

    def args(self, **more):
        # a directory of each call's own: a root daemon's calls each run as a
        # uid of their own
        self.n = getattr(self, "n", 0) + 1
        a = {"config": self.config, "out": self.out, "url": self.url, "syslog": True,
             "sub": "call%d" % self.n}
        a.update(more)
        return a

    def completed(self, d, calls):
        c = d.client()
        r = c.run(calls, timeout=60 * harness.SCALE)
        if r.terminal["event"] == "error":
            self.fail(r.terminal)
        return [r.completed(call["id"]) for call in calls]

    def test_learn_apply_deny(self):
        d = self.make_daemon([definition()])
        self.addCleanup(d.stop)
        self.assertIn("learn mode", d.stderr())
        evs = self.completed(d, [{"id": "c1", "name": "learner", "arguments": self.args()}])
        ev = evs[0]
        self.assertEqual(ev["result"]["ok"]["config"], "setting=1", ev)
        self.assertEqual(ev["result"]["ok"]["fetched"], "hello from the host", ev)
        self.assertNotIn("denied", ev)
        learned = ev["learned"]
        target = "127.0.0.1:%d" % self.srv.server_address[1]
        self.assertEqual(learned["network"], {"allow": [target]}, learned)
        self.assertIn(self.config, learned["filesystem"].get("read", []), learned)
        self.assertEqual(learned["filesystem"].get("write"), [self.out], learned)
        self.assertEqual(learned.get("syscalls"), "off", learned)
        self.assertNotIn("syslog", learned["deny_syscalls"])
        self.assertIn("ptrace", learned["deny_syscalls"])
        # the op: all calls since load, and the definition to apply
        c = d.client()
        c.send({"op": "learned", "tool": "learner"})
        got = c.recv()
        self.assertEqual(got["event"], "learned", got)
        self.assertEqual(got["calls"], 1)
        self.assertEqual(got["learned"], learned)
        applied = got["definition"]
        self.assertNotIn("learn", applied)
        self.assertEqual(applied["network"], learned["network"])
        # toolexec learn: the proposal printed, the definition written
        cli = [TOOLEXEC, "--socket", d.sock, "learn", "learner"]
        out = subprocess.run(cli, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout), learned)
        path = os.path.join(self.data, "learner.json")
        out = subprocess.run(cli + [path], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(path) as f:
            self.assertEqual(json.load(f), applied)
        d.stop()

        # applied, in a new daemon: the same call, no denials
        d2 = self.make_daemon([applied])
        self.addCleanup(d2.stop)
        ev = self.completed(d2, [{"id": "c1", "name": "learner", "arguments": self.args()}])[0]
        self.assertEqual(ev["result"]["ok"]["config"], "setting=1", ev)
        self.assertEqual(ev["result"]["ok"]["fetched"], "hello from the host", ev)
        self.assertEqual(denied_but_userdb(ev), [], ev)
        self.assertNotIn("learned", ev)
        with open(os.path.join(self.out, "call2", "result.txt")) as f:
            self.assertEqual(f.read(), "written\n")
        # something else: another port is refused and reported; another
        # hidden file is not there
        other_url = "http://127.0.0.1:%d/x" % self.other_srv.server_address[1]
        ev = self.completed(d2, [{"id": "c2", "name": "learner",
                                  "arguments": self.args(url=other_url, other=self.secret)}])[0]
        self.assertTrue(ev["result"]["ok"]["fetched"].startswith("error"), ev)
        self.assertEqual(ev["result"]["ok"]["other"], "FileNotFoundError", ev)
        self.assertIn({"kind": "network", "host": "127.0.0.1",
                       "port": self.other_srv.server_address[1]}, ev["denied"])
        # and the filter's default set is back but for what was learned
        ev = self.completed(d2, [{"id": "c3", "name": "learner", "arguments": self.args()}])[0]
        self.assertEqual(denied_but_userdb(ev), [], ev)


class TestLearnRoot(LearnCases, unittest.TestCase):
    def test_check_names_the_key(self):
        """--check --tools: a learn that is not a boolean is a problem; a
        learning tool loads, with the warning."""
        tools = os.path.realpath(__import__("tempfile").mkdtemp(prefix="te-learn-check-"))
        self.addCleanup(shutil.rmtree, tools, True)
        for name, learn in (("good", True), ("bad", 1)):
            with open(os.path.join(tools, name + ".json"), "w") as f:
                json.dump(definition(name=name, learn=learn), f)
        r = subprocess.run([harness.TOOLEXECD, "--check", "--tools", tools],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("bad.json: learn: expected true, false or \"refused\"", r.stdout + r.stderr)
        self.assertNotIn("good.json:", r.stdout)
        self.assertIn("tool good: learn mode", r.stderr)


class TestLearnUnprivileged(LearnCases, unittest.TestCase):
    unprivileged = True


if __name__ == "__main__":
    unittest.main()
