"""`toolexec mcp-add NAME --npm PACKAGE`: an MCP server installed with npm
install --prefix into PREFIX/NAME, and a definition written for it that the
daemon's --check takes, then loaded by the real daemon, root and
unprivileged, its tools called.

- a package tarball of our own (tests/mcp_servers/tiny, packed here with npm
  pack: no registry needed): installed where --prefix says, its definition
  runs node and the package's bin from there (the server says where it runs
  from), the server's arguments after --; a node of its own (--node) where
  the view would hide it is shown to the calls;
- refusals that write nothing: a name with a '.', a definition that is there
  already (without --force), npm failing, the daemon's --check refusing;
- the pinned @modelcontextprotocol/server-filesystem from the npm registry
  (SKIP, never a pass, when the registry cannot be reached): written to and
  read from the directory --write gave it;
- `--url URL --header NAME=CREDENTIAL`: a Streamable HTTP server's
  definition (the tests' own server, tests/mcp_servers/http_server.py, as
  test_mcp_server_url runs it), its credential a network.headers entry for
  the URL's host: loaded by a root daemon, its tool called, the header
  reaching the server from the proxy; refusals (npm's options beside --url,
  a bad --header, an http:// URL to a host not loopback, a credential the
  credentials directory lacks) write nothing.

Argument: a work directory (meson: the build directory). No node or npm:
SKIP (77)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness

sys.path.insert(0, os.path.join(harness.HERE, "..", "mcp_servers"))
import http_server  # noqa: E402

TINY = os.path.join(harness.HERE, "..", "mcp_servers", "tiny")
FS_PKG = "@modelcontextprotocol/server-filesystem@2026.8.31"  # as tests/mcp_servers/npm pins
ARGS = [a for a in sys.argv[1:] if not a.startswith("-")]
WORK = os.path.realpath(ARGS[0] if ARGS else os.path.join(tempfile.gettempdir(), "te-mcp-add"))
NODE = os.path.realpath(shutil.which("node") or "/usr/bin/node")


def mcp_add(*args):
    return subprocess.run([os.environ["TOOLEXEC"], "mcp-add"] + list(args), capture_output=True,
                          text=True, timeout=300)


def tarball():
    """tests/mcp_servers/tiny packed (npm pack) into a fresh directory."""
    out = tempfile.mkdtemp(prefix="tiny-", dir=WORK)
    p = subprocess.run(["npm", "pack", "--pack-destination", out, os.path.realpath(TINY)],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError("npm pack: " + p.stderr)
    return os.path.join(out, "te-tiny-mcp-1.0.0.tgz")


def prefix_for(d):
    """An install prefix the daemon's user can read (inside its directory,
    which the default view hides: the definition must show it)."""
    p = d.path("opt")
    os.makedirs(p, exist_ok=True)
    os.chmod(p, 0o755)
    return p


def call(d, name, args):
    c = d.client()
    try:
        harness.deadline_wait(lambda: any(t["name"] == name for t in c.tools()["tools"]),
                              timeout=60 * harness.SCALE, what="%s listed" % name)
        b = c.start_batch([{"id": "c", "name": name, "arguments": args}])
        events = c.recv_batch(b, timeout=60 * harness.SCALE)
        return [e for e in events if e["event"] == "tool_execution_completed"][0]["result"]
    finally:
        c.close()


class Tarball:
    def test_installed_and_called(self):
        d = self.daemon(start=False)
        try:
            prefix = prefix_for(d)
            node, more = NODE, []
            if self.OWN_NODE:
                # a node of its own where the view would not show it (under
                # /tmp): the definition shows its directory
                node = os.path.join(prefix, "nodebin", "node")
                os.makedirs(os.path.dirname(node), mode=0o755)
                with open(node, "w") as f:
                    f.write('#!/bin/sh\nexec %s "$@"\n' % NODE)
                os.chmod(node, 0o755)
                more = ["--node", node]
            p = mcp_add("tiny", "--npm", tarball(), "--prefix", prefix, "--dir", d.tools_dir,
                        *more, "--", "an-argument")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("1 definition in", p.stdout + p.stderr)  # the daemon's --check
            root = os.path.join(prefix, "tiny")
            server = os.path.join(root, "node_modules", "te-tiny-mcp", "server.js")
            with open(os.path.join(d.tools_dir, "tiny.json")) as f:
                definition = json.load(f)
            self.assertEqual(definition["mcp_server"]["command"], [node, server, "an-argument"])
            self.assertEqual(definition["instance"], "call")
            self.assertIn(root, definition["filesystem"]["read"])
            if self.OWN_NODE:
                self.assertIn(os.path.dirname(node), definition["filesystem"]["read"])
            harness.started(d)
            r = call(d, "tiny.hello", {"who": "you"})
            self.assertEqual(json.loads(r["ok"]["content"][0]["text"]), {"hello": "you", "from": server, "node": NODE})
        finally:
            d.stop()


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(
    Tarball, root={"OWN_NODE": False}, unprivileged={"OWN_NODE": True})


class Refused(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tools-", dir=WORK)
        self.prefix = tempfile.mkdtemp(prefix="opt-", dir=WORK)
        os.chmod(self.prefix, 0o755)
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.addCleanup(shutil.rmtree, self.prefix, ignore_errors=True)

    def add(self, name, *more):
        return mcp_add(name, "--prefix", self.prefix, "--dir", self.dir, *more)

    def test_refusals_write_nothing(self):
        tgz = tarball()
        for args, says in ((("a.b", "--npm", tgz), "its tools are NAME.TOOL"),
                           (("t1",), "expected one of --npm"),
                           (("t2", "--npm", os.path.join(self.dir, "none.tgz")),
                            "npm install of"),
                           (("t3", "--npm", tgz, "--write", "/nonexistent/dir"),
                            "the daemon's --check refused")):
            p = self.add(*args)
            self.assertEqual(p.returncode, 2, (args, p.stdout + p.stderr))
            self.assertIn(says, p.stderr, args)
            self.assertEqual(os.listdir(self.dir), [], args)
        # there already: kept unless --force
        self.assertEqual(self.add("t4", "--npm", tgz).returncode, 0)
        with open(os.path.join(self.dir, "t4.json"), "a") as f:
            f.write("\n")
        p = self.add("t4", "--npm", tgz)
        self.assertEqual(p.returncode, 2)
        self.assertIn("exists (--force replaces it)", p.stderr)
        p = self.add("t4", "--npm", tgz, "--force")
        self.assertEqual(p.returncode, 0, p.stderr)

    @unittest.skipUnless(os.geteuid() == 0, "a root daemon's per-call uids")
    def test_a_write_directory_its_calls_may_not_write(self):
        # written, with a warning that names the fix; none where they may
        tgz = tarball()
        data = tempfile.mkdtemp(prefix="data-", dir=WORK)
        self.addCleanup(shutil.rmtree, data, ignore_errors=True)
        os.chmod(data, 0o755)
        p = self.add("w1", "--npm", tgz, "--write", data)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("mcp-add: warning: --write %s: a root toolexecd runs each call as a uid of "
                      "its own (--call-uids), which may not write there (owner uid 0, mode 0755): "
                      "chmod 1777 it" % data, p.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "w1.json")))
        os.chmod(data, 0o1777)
        p = self.add("w2", "--npm", tgz, "--write", data)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("warning", p.stderr)


class Url(unittest.TestCase):
    SECRET = "Bearer add-url-" + os.urandom(8).hex()

    def setUp(self):
        harness.require_env()
        self.server = http_server.Server("legacy")
        self.addCleanup(self.server.stop)
        self.dir = tempfile.mkdtemp(prefix="url-", dir=WORK)
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        os.chmod(self.dir, 0o755)
        self.tools = os.path.join(self.dir, "tools")
        self.creds = os.path.join(self.dir, "creds")
        os.mkdir(self.creds, 0o700)
        with open(os.path.join(self.creds, "web_key"), "w") as f:
            f.write(self.SECRET + "\n")
        os.chmod(os.path.join(self.creds, "web_key"), 0o600)

    def test_written_loaded_called(self):
        d = harness.Daemon(start=False, args=["--credentials-dir", self.creds])
        try:
            p = mcp_add("web", "--url", self.server.url, "--header", "Authorization=web_key",
                        "--credentials-dir", self.creds, "--dir", d.tools_dir)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("1 definition in", p.stdout + p.stderr)  # the daemon's --check
            with open(os.path.join(d.tools_dir, "web.json")) as f:
                text = f.read()
            self.assertNotIn(self.SECRET, text)
            host = "127.0.0.1:%d" % self.server.port
            self.assertEqual(json.loads(text), {
                "name": "web", "mcp_server": {"url": self.server.url}, "timeout_ms": 30000,
                "network": {"headers": {host: {"Authorization": {"credential": "web_key"}}}}})
            d.start()
            r = call(d, "web.echo", {"text": "through the proxy"})
            self.assertEqual(r, {"ok": {"content": [{"type": "text",
                                                     "text": "through the proxy"}]}})
            self.assertEqual(self.server.headers_of("tools/call")[-1].get("authorization"),
                             self.SECRET)
        finally:
            d.stop()

    def test_without_a_header(self):
        p = mcp_add("plain", "--url", "https://mcp.example.com/mcp", "--dir", self.tools)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(os.path.join(self.tools, "plain.json")) as f:
            self.assertEqual(json.load(f), {"name": "plain", "timeout_ms": 30000,
                                            "mcp_server": {"url": "https://mcp.example.com/mcp"}})
        # an HTTPS URL's credential goes to its host as written in the
        # allow-list: without the port where it is 443, with it elsewhere
        for url, host in (("https://mcp.example.com/mcp", "mcp.example.com"),
                          ("https://mcp.example.com:443/", "mcp.example.com"),
                          ("https://mcp.example.com:8443/mcp?x=1", "mcp.example.com:8443"),
                          ("https://[2001:db8::1]:8443/mcp", "[2001:db8::1]:8443"),
                          ("http://localhost/mcp", "localhost:80")):
            p = mcp_add("h", "--url", url, "--header", "Authorization=web_key",
                        "--credentials-dir", self.creds, "--dir", self.tools, "--force")
            self.assertEqual(p.returncode, 0, url + ": " + p.stdout + p.stderr)
            with open(os.path.join(self.tools, "h.json")) as f:
                self.assertEqual(list(json.load(f)["network"]["headers"]), [host], url)

    def test_refusals_write_nothing(self):
        url = self.server.url
        for args, says in (
                (("--url", url, "--npm", "x"), "expected one of --npm"),
                (("--url", url, "--write", self.dir), "--write: not with --url"),
                (("--url", url, "--prefix", self.dir), "--prefix: not with --url"),
                (("--url", url, "--", "arg"), "not with --url"),
                (("--npm", "x", "--header", "Authorization=web_key"), "only with --url"),
                (("--url", url, "--header", "Authorization"), "expected NAME=CREDENTIAL"),
                (("--url", url, "--header", "=web_key"), "expected NAME=CREDENTIAL"),
                (("--url", url, "--header", "A=web_key", "--header", "a=web_key"),
                 "given twice"),
                (("--url", "http://mcp.example.com/mcp"), "http:// only to a loopback"),
                (("--url", "ftp://mcp.example.com/"), "expected an https:// URL"),
                (("--url", url, "--header", "Authorization=absent", "--credentials-dir",
                  self.creds), "the daemon's --check refused")):
            p = mcp_add("web", "--dir", self.tools, *args)
            self.assertEqual(p.returncode, 2, (args, p.stdout + p.stderr))
            self.assertIn(says, p.stdout + p.stderr, args)
            self.assertFalse(os.path.exists(os.path.join(self.tools, "web.json")), args)


def registry_reachable():
    try:
        return subprocess.run(["npm", "ping"], capture_output=True, timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


class FromTheRegistry(unittest.TestCase):
    def test_filesystem_server(self):
        if not registry_reachable():
            self.skipTest("the npm registry cannot be reached (npm ping)")
        d = harness.Daemon(start=False)
        try:
            data = d.shared_dir("data")
            p = mcp_add("fs", "--npm", FS_PKG, "--prefix", prefix_for(d), "--dir", d.tools_dir,
                        "--write", data, "--", data)
            if p.returncode != 0 and "npm install of" in p.stderr:
                self.skipTest("npm could not install %s: %s" % (FS_PKG, p.stderr[-500:]))
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            d.start()
            note = os.path.join(data, "note.txt")
            self.assertIn("ok", call(d, "fs.write_file", {"path": note, "content": "kept"}))
            r = call(d, "fs.read_text_file", {"path": note})
            self.assertIn("kept", json.dumps(r["ok"]))
            self.assertIn("error", call(d, "fs.read_text_file", {"path": "/etc/shadow"}))
        finally:
            d.stop()


if __name__ == "__main__":
    harness.require_env()
    if not shutil.which("node") or not shutil.which("npm") or not os.environ.get("TOOLEXEC"):
        print("SKIP: node, npm or TOOLEXEC missing")
        sys.exit(77)
    os.makedirs(WORK, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")],
                  verbosity=2)
