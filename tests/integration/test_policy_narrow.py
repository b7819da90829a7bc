"""Per-batch narrowing: a run request's "policy", at the
batch level and in a call object, narrows a tool's confinement for that
batch or call (a subset of its allow-list, "network": false, fewer writable
paths, a lower timeout or limit) and never widens it: a widening is refused
with a request error naming the key. Root and unprivileged daemons.

The tool is one python3 program on two local HTTP servers (hosts A and B,
both on its allow-list) and two writable directories."""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness
from harness import Daemon

TOOL = r'''
import json, os, socket, sys, time, urllib.request, urllib.error
a = json.loads(sys.stdin.readline())
out = {}
for url in a.get("get", []):
    try:
        out[url] = urllib.request.urlopen(url, timeout=20).status
    except urllib.error.HTTPError as e:
        out[url] = e.code
    except OSError as e:
        out[url] = type(e).__name__
for p in a.get("write", []):
    try:
        with open(p, "w") as f:
            f.write("x")
        out[p] = "written"
    except OSError as e:
        out[p] = os.strerror(e.errno)
if a.get("sleep"):
    time.sleep(a["sleep"])
print(json.dumps(out))
'''


class Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def serve():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


class NarrowCases:
    @classmethod
    def new_daemon(cls):
        return Daemon(start=False)

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.srv = [serve(), serve()]
        cls.hosts = ["127.0.0.1:%d" % s.server_address[1] for s in cls.srv]
        cls.urls = ["http://%s/" % h for h in cls.hosts]
        d = cls.new_daemon()
        cls.dirs = [d.shared_dir("wa"), d.shared_dir("wb")]
        base = {"description": "narrowing test tool", "schema": {"type": "object"},
                "command": ["/usr/bin/python3", "-I", "-c", TOOL], "protocol": "plain",
                "timeout_ms": 60000, "limits": {"memory_mb": 1024, "processes": 64}}
        d.add_tool(dict(base, name="net", network={"allow": cls.hosts},
                        filesystem=harness.with_tree({"write": cls.dirs})))
        d.add_tool(dict(base, name="nonet", network=False))
        d.add_tool(dict(base, name="hostfs", network=False, filesystem="host"))
        # a writable directory with a hidden file and a read-only directory
        # inside it; the same in a minimal root with another read path
        top = d.shared_dir("nest")
        cls.secret, cls.ro = os.path.join(top, "secret"), d.shared_dir("nest/ro")
        with open(cls.secret, "w") as f:
            f.write("s3cret")
        os.chmod(cls.secret, 0o666)
        cls.top, cls.other, cls.ro_sub = top, d.shared_dir("other"), d.shared_dir("nest/ro/x")
        nest = {"write": [top], "hide": [cls.secret], "read": [cls.ro]}
        d.add_tool(dict(base, name="nest", network=False, filesystem=harness.with_tree(nest)))
        d.add_tool(dict(base, name="nestmin", network=False,
                        filesystem=harness.with_tree(dict(nest, root="minimal",
                                                          read=[cls.ro, cls.other]))))
        cls.d = d
        cls.started(d)

    @classmethod
    def started(cls, d):
        d.start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        for s in cls.srv:
            s.shutdown()
            s.server_close()

    def run_one(self, args, name="net", policy=None, batch_policy=None):
        call = {"id": "c", "name": name, "arguments": args}
        if policy is not None:
            call["policy"] = policy
        opts = {} if batch_policy is None else {"policy": batch_policy}
        res = self.d.client().run([call], **opts)
        self.assertTrue(res.ok, res.terminal)
        return res

    def out(self, res):
        r = res.result("c")
        self.assertIn("ok", r, r)
        return json.loads(r["ok"]) if isinstance(r["ok"], str) else r["ok"]

    def refused(self, key_and_why, name="net", policy=None, batch_policy=None):
        call = {"id": "c", "name": name, "arguments": {}}
        if policy is not None:
            call["policy"] = policy
        req = {"op": "run", "batch": "r", "calls": [call]}
        if batch_policy is not None:
            req["policy"] = batch_policy
        c = self.d.client()
        c.send(req)
        ev = c.recv_for(lambda e: e.get("event") == "error")
        self.assertEqual(ev.get("type"), "request_error", ev)
        self.assertEqual(ev.get("reason"), "invalid_request", ev)
        for part in key_and_why:
            self.assertIn(part, ev["message"])
        return ev

    # -- narrowing, enforced -------------------------------------------------
    def test_allow_list_subset_is_enforced(self):
        a, b = self.urls
        out = self.out(self.run_one({"get": [a, b]}))
        self.assertEqual(out, {a: 200, b: 200})  # the tool's list: both
        res = self.run_one({"get": [a, b]}, policy={"network": {"allow": [self.hosts[0]]}})
        self.assertEqual(self.out(res), {a: 200, b: 403})
        host, port = self.hosts[1].split(":")
        self.assertIn({"kind": "network", "host": host, "port": int(port)},
                      res.completed("c").get("denied", []))

    def test_network_false(self):
        out = self.out(self.run_one({"get": [self.urls[0]]}, policy={"network": False}))
        self.assertNotEqual(out[self.urls[0]], 200, out)
        self.assertIsInstance(out[self.urls[0]], str, out)  # no proxy at all: an OSError

    def test_write_narrowed(self):
        pa = os.path.join(self.dirs[0], "f-%d" % os.getpid())
        pb = os.path.join(self.dirs[1], "f-%d" % os.getpid())
        out = self.out(self.run_one({"write": [pa, pb]}))
        self.assertEqual(out, {pa: "written", pb: "written"})
        # a root daemon's calls each run as a uid of their own: new files
        pa, pb = pa + "-2", pb + "-2"
        out = self.out(self.run_one({"write": [pa, pb]},
                                    policy={"filesystem": {"write": [self.dirs[0]]}}))
        self.assertEqual(out[pa], "written")
        self.assertIn(out[pb], ("Read-only file system", "Permission denied"), out)
        pa = pa + "-3"
        out = self.out(self.run_one({"write": [pa]}, policy={"filesystem": {"write": []}}))
        self.assertIn(out[pa], ("Read-only file system", "Permission denied"), out)

    def test_timeout_lower(self):
        res = self.run_one({"sleep": 3600}, policy={"timeout_ms": 200})
        r = res.result("c")
        self.assertEqual(r.get("tool_error", {}).get("reason"), "timeout", r)

    def test_batch_and_call_combine(self):
        a, b = self.urls
        # the batch narrows to A and B's ports: a call narrows that to A
        res = self.run_one({"get": [a, b]}, policy={"network": {"allow": [self.hosts[0]]}},
                           batch_policy={"network": {"allow": self.hosts}})
        self.assertEqual(self.out(res), {a: 200, b: 403})
        # the batch's narrowing alone applies to every call
        res = self.run_one({"get": [a, b]}, batch_policy={"network": {"allow": [self.hosts[1]]}})
        self.assertEqual(self.out(res), {a: 403, b: 200})
        # a call cannot widen what its batch narrowed
        self.refused(["calls[0].policy.network.allow[0]", self.hosts[0], "not in tool net"],
                     policy={"network": {"allow": [self.hosts[0]]}},
                     batch_policy={"network": {"allow": [self.hosts[1]]}})
        self.refused(["calls[0].policy.network", "no network"], policy={"network": {"allow": [self.hosts[0]]}},
                     batch_policy={"network": False})

    def test_llm_shaped_call_keeps_its_policy(self):
        a, b = self.urls
        call = {"type": "function", "id": "c", "policy": {"network": {"allow": [self.hosts[1]]}},
                "function": {"name": "net", "arguments": json.dumps({"get": [a, b]})}}
        c = self.d.client()
        res = c.run([dict(call, name="net")], result_format="openai")
        self.assertEqual(self.out(res), {a: 403, b: 200})

    # -- widening, refused naming the key --------------------------------------
    def test_widening_refused_naming_the_key(self):
        self.refused(['policy.network.allow[1]: "evil.com:443" is not in tool net\'s allow-list'],
                     batch_policy={"network": {"allow": [self.hosts[0], "evil.com:443"]}})
        self.refused(["calls[0].policy.network: true", "allow-list"], policy={"network": True})
        self.refused(["calls[0].policy.network.allow[0]", "no network"], name="nonet",
                     policy={"network": {"allow": [self.hosts[0]]}})
        self.refused(["calls[0].policy.filesystem.write[0]", "/var/tmp", "not writable by tool net"],
                     policy={"filesystem": {"write": ["/var/tmp"]}})
        self.refused(["calls[0].policy.filesystem", "host's file system"], name="hostfs",
                     policy={"filesystem": {"write": []}})
        self.refused(["calls[0].policy.timeout_ms: 60001 is above tool net's 60000"],
                     policy={"timeout_ms": 60001})
        self.refused(["policy.memory_mb: 2048 is above tool net's 1024"],
                     batch_policy={"memory_mb": 2048})
        self.refused(["calls[0].policy.processes: 65 is above tool net's 64"],
                     policy={"processes": 65})
        self.refused(["calls[0].policy.limits.memory_mb: 4096 is above"],
                     policy={"limits": {"memory_mb": 4096}})
        self.refused(["calls[0].policy.user: not a key a policy narrows"],
                     policy={"user": "root"})
        self.refused(["calls[0].policy.network.max_bytes: not a key a policy narrows"],
                     policy={"network": {"allow": [], "max_bytes": 1}})
        self.refused(["policy: expected an object"], batch_policy="tight")

    def test_no_widening_below_a_writable_path(self):
        # a path the tool hides, or keeps read-only, below one it writes:
        # naming it in a narrowed "write" (or "read") must not expose it
        self.refused(["calls[0].policy.filesystem.write[0]", self.secret, "not writable"],
                     name="nest", policy={"filesystem": {"write": [self.secret]}})
        self.refused(["calls[0].policy.filesystem.write[0]", self.ro, "not writable"],
                     name="nest", policy={"filesystem": {"write": [self.ro]}})
        self.refused(["calls[0].policy.filesystem.write[0]", "not writable"], name="nest",
                     policy={"filesystem": {"write": [self.ro_sub]}})
        self.refused(["calls[0].policy.filesystem.read[0]", self.secret, "not readable"],
                     name="nestmin", policy={"filesystem": {"read": [self.secret]}})
        # a minimal root's read list narrowed: what it kept read-only below
        # its writable directory stays read-only
        p = os.path.join(self.ro, "f-%d" % os.getpid())
        q = os.path.join(self.top, "f-%d" % os.getpid())
        out = self.out(self.run_one({"write": [p, q]}, name="nestmin",
                                    policy={"filesystem": {"read": [self.other]}}))
        self.assertEqual(out[q], "written", out)
        self.assertIn(out[p], ("Read-only file system", "Permission denied"), out)
        self.assertFalse(os.path.exists(p))

    # -- client paths: string work, nothing looked up or echoed resolved ------
    def refusal(self, policy, name="net"):
        call = {"id": "c", "name": name, "arguments": {}, "policy": policy}
        c = self.d.client()
        c.send({"op": "run", "batch": "r", "calls": [call]})
        ev = c.recv_for(lambda e: e.get("event") == "error")
        self.assertEqual(ev.get("reason"), "invalid_request", ev)
        return ev["message"]

    def test_root_only_paths_answer_alike(self):
        # a file that exists under root-only /root, and one that does not:
        # the same refusal, word for word (a root daemon resolving them
        # told ENOENT from the rest)
        if not os.path.isdir("/root"):
            self.skipTest("no /root here")
        fd, there = tempfile.mkstemp(prefix="narrow-secret-", dir="/root")
        os.close(fd)
        gone = there[:-1] + ("x" if there[-1] != "x" else "y")
        self.assertFalse(os.path.exists(gone))
        try:
            for key in ("write", "hide"):
                m1 = self.refusal({"filesystem": {key: [there]}})
                m2 = self.refusal({"filesystem": {key: [gone]}})
                self.assertIn(there, m1)
                self.assertEqual(m1.replace(there, "P"), m2.replace(gone, "P"))
            m1 = self.refusal({"filesystem": {"read": [there]}}, name="nestmin")
            m2 = self.refusal({"filesystem": {"read": [gone]}}, name="nestmin")
            self.assertEqual(m1.replace(there, "P"), m2.replace(gone, "P"))
        finally:
            os.unlink(there)

    def test_dot_dot_is_string_work(self):
        # "..": taken lexically, the client's own text echoed
        up = self.dirs[0] + "/../../../../../../etc"
        m = self.refusal({"filesystem": {"write": [up]}})
        self.assertIn('calls[0].policy.filesystem.write[0]: "%s" is not writable by tool net' % up,
                      m)
        self.assertIn("not an absolute path", self.refusal({"filesystem": {"write": ["etc"]}}))
        # "//", "/./" and a trailing "/" name the path they spell
        p = os.path.join(self.dirs[0], "dots-%d" % os.getpid())
        out = self.out(self.run_one({"write": [p]}, policy={"filesystem": {"write": [
            "/" + self.dirs[0].replace("/", "//") + "/./x/../"]}}))
        self.assertEqual(out[p], "written", out)

    def test_link_target_is_not_revealed(self):
        # a link where the tool writes, to a directory of its own: the
        # narrowing does not resolve it (nor say where it points), and the
        # spawn opens the view's paths without following links
        target = tempfile.mkdtemp(prefix="narrow-link-target-")
        os.chmod(target, 0o777)
        link = os.path.join(self.dirs[0], "lnk-%d" % os.getpid())
        os.symlink(target, link)
        try:
            for path in (link, link + "/below"):
                call = {"id": "c", "name": "net", "arguments": {"write": [link + "/f"]},
                        "policy": {"filesystem": {"write": [path]}}}
                c = self.d.client()
                c.send({"op": "run", "batch": "l", "calls": [call]})
                seen = []
                c.recv_for(lambda e: seen.append(e) or e.get("event") in (
                    "error", "batch_completed", "batch_failed"))
                self.assertNotIn(target, json.dumps(seen), seen)
                done = [e for e in seen if e.get("event") == "tool_execution_completed"]
                self.assertEqual(len(done), 1, seen)
                self.assertIn("Too many levels of symbolic links",
                              done[0]["result"]["tool_error"]["message"], seen)
                self.assertEqual(os.listdir(target), [], seen)
        finally:
            os.unlink(link)
            shutil.rmtree(target, ignore_errors=True)

    def test_hide_narrowed_is_enforced(self):
        # a file, a directory and a path that is not there, hidden by the
        # policy: the child sees which is which (the loop looked nothing up)
        base = os.path.join(self.dirs[0], "hid-%d" % os.getpid())
        f, d = base + ".txt", base + ".d"
        with open(f, "w") as fh:
            fh.write("kept")
        os.chmod(f, 0o666)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o777)
        link = base + ".lnk"
        os.symlink(d, link)
        try:
            out = self.out(self.run_one({"write": [f, d + "/x", base + ".ok"]}, policy={
                "filesystem": {"hide": [f, d, base + ".gone/deeper"]}}))
            self.assertEqual(out[base + ".ok"], "written", out)
            self.assertNotEqual(out[f], "written", out)
            self.assertNotEqual(out[d + "/x"], "written", out)
            with open(f) as fh:
                self.assertEqual(fh.read(), "kept")
            self.assertEqual(os.listdir(d), [])
            # a link named to be hidden: refused at the spawn, not followed
            res = self.d.client().run([{"id": "c", "name": "net", "arguments": {},
                                        "policy": {"filesystem": {"hide": [link]}}}])
            err = res.result("c").get("tool_error", {})
            self.assertIn("Too many levels of symbolic links", err.get("message", ""), err)
        finally:
            os.unlink(link)
            shutil.rmtree(d, ignore_errors=True)
            for p in (f, base + ".ok"):
                if os.path.exists(p):
                    os.unlink(p)

    def test_lower_limits_accepted(self):
        res = self.run_one({}, policy={"memory_mb": 512, "processes": 16,
                                       "limits": {"open_files": 64}})
        self.assertEqual(self.out(res), {})


class Clients(unittest.TestCase):
    """toolexec run --policy FILE and call --policy FILE; MCP's
    _meta["toolexecd/policy"] in tools/call."""

    @classmethod
    def setUpClass(cls):
        NarrowCases.setUpClass.__func__(cls)

    @classmethod
    def new_daemon(cls):
        return Daemon(start=False)

    @classmethod
    def started(cls, d):
        d.start()

    @classmethod
    def tearDownClass(cls):
        NarrowCases.tearDownClass.__func__(cls)

    def toolexec(self, *args, stdin=None):
        toolexec = os.environ.get("TOOLEXEC")
        if not toolexec:
            self.skipTest("environment lacks TOOLEXEC (run through meson test)")
        return subprocess.run([toolexec, "--socket", self.d.sock] + list(args), input=stdin,
                              capture_output=True, text=True, timeout=harness.WAIT)

    def test_cli_policy_file(self):
        a, b = self.urls
        pol = self.d.path("policy.json")
        with open(pol, "w") as f:
            json.dump({"network": {"allow": [self.hosts[0]]}}, f)
        p = self.toolexec("call", "--json", "--policy", pol, "net", json.dumps({"get": [a, b]}))
        done = [json.loads(x) for x in p.stdout.splitlines()
                if '"tool_execution_completed"' in x]
        self.assertEqual(done[0]["result"]["ok"], {a: 200, b: 403}, p)
        with open(pol, "w") as f:
            json.dump({"network": {"allow": ["evil.com:443"]}}, f)
        calls = json.dumps([{"id": "c", "name": "net", "arguments": {}}])
        p = self.toolexec("run", "--policy", pol, stdin=calls)
        self.assertNotEqual(p.returncode, 0)
        for part in ("policy.network.allow[0]", "evil.com:443", "is not in tool net"):
            self.assertIn(part, p.stdout + p.stderr)

    def test_mcp_meta_policy(self):
        from test_mcp import Session
        a, b = self.urls
        s = Session(self, self.d.sock)
        s.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}})
        s.response(1)
        s.notify("notifications/initialized")
        s.request(2, "tools/call", {"name": "net", "arguments": {"get": [a, b]},
                                    "_meta": {"toolexecd/policy": {"network": {"allow": [self.hosts[1]]}}}})
        r = s.response(2)
        self.assertEqual(r["result"]["structuredContent"], {a: 403, b: 200}, r)
        s.request(3, "tools/call", {"name": "net", "arguments": {},
                                    "_meta": {"toolexecd/policy": {"timeout_ms": 10 ** 9}}})
        r = json.dumps(s.response(3))
        self.assertIn("policy.timeout_ms", r)


class RootDaemon(NarrowCases, unittest.TestCase):
    pass


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(NarrowCases, unittest.TestCase):
    @classmethod
    def new_daemon(cls):
        d = harness.NobodyDaemon(start=False)
        harness.give_work_dir(d)
        return d

    @classmethod
    def started(cls, d):
        harness.started(d)


if __name__ == "__main__":
    unittest.main()
