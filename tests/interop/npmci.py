"""`npm ci` of a test's pinned package.json and package-lock.json into a
work directory (tests/interop, tests/mcp_conformance): False, with the
reason printed, when it cannot be done (no node or npm, the registry out of
reach), so that the caller exits 77 and meson says SKIP, never a pass."""

import filecmp
import os
import shutil
import subprocess

NPM_TIMEOUT = int(os.environ.get("TE_NPM_TIMEOUT", "180"))


def npm_ci(src, work, timeout=NPM_TIMEOUT):
    """node_modules in work from src's lock; False when it cannot be had."""
    if not shutil.which("node") or not shutil.which("npm"):
        print("SKIP: node or npm is not installed (apt-get install nodejs npm)")
        return False
    os.makedirs(work, exist_ok=True)
    for f in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(src, f), os.path.join(work, f))
    stamp = os.path.join(work, "node_modules", ".te-lock")
    if os.path.exists(stamp) and filecmp.cmp(stamp, os.path.join(work, "package-lock.json"),
                                             shallow=False):
        return True  # installed from this very lock before
    try:
        p = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund",
                            "--fetch-retries=1", "--fetch-timeout=20000"],
                           cwd=work, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print("SKIP: npm ci took longer than %d s (is the registry reachable?)" % timeout)
        return False
    if p.returncode != 0:
        print("SKIP: npm ci failed (is the registry reachable?):\n" + p.stderr[-3000:])
        return False
    shutil.copy(os.path.join(work, "package-lock.json"), stamp)
    return True


def ready(src, work):
    """What a run.py of these needs before it starts the daemon: the
    harness's environment, TOOLEXEC, and node_modules from src's lock.
    False, with the reason printed: the test exits 77."""
    import harness  # tests/integration, on the caller's path
    harness.require_env()
    if not os.environ.get("TOOLEXEC"):
        print("SKIP: TOOLEXEC not set (run through meson test)")
        return False
    return npm_ci(src, work)


class Cleanups:
    """What test_mcp_http.Front wants of a TestCase, outside unittest:
    somewhere to leave its cleanup, run by run()."""

    def __init__(self):
        self.fns = []

    def addCleanup(self, fn):
        self.fns.append(fn)

    def run(self):
        while self.fns:
            self.fns.pop()()
