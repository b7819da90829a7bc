"""The real mcp-server-time, mcp-server-git and mcp-server-fetch from PyPI
(pinned in tests/mcp_servers/pypi/requirements.txt), installed with
`python3 -m venv` and pip into the build directory, as "mcp_server"
definitions ("python_module") through the real daemon, root and
unprivileged:

- time: get_current_time answers, cold and kept warm ("start": "warm", the
  call's event says so);
- git: git_status and git_log on a repository in the view, a hidden one
  refused (the server's --repository check, and the view for a server
  started without one), nothing written outside the repository kept
  (test_mcp_server_standins.GitChecks);
- fetch, with "network": {"allow": ["127.0.0.1:PORT"]}: the allowed URL
  fetched, another host refused with {"kind": "network", ...} in the call's
  "denied" and its sentence in `toolexec mcp`'s text
  (test_mcp_server_standins.FetchChecks).

Argument: where the venv goes (meson: the build directory). SKIP (77), with
pip's reason, when the pins cannot be installed (PyPI out of reach, no
venv): never a pass. The index pip is configured with (pip config list:
index-url, extra-index-url, find-links; PyPI's by default) is asked first,
a HEAD of a few seconds through the proxy the environment names: none
answering is a SKIP at once, not after pip's own retries. test_mcp_server_standins.py runs the same git and
fetch checks against stand-ins of ours wherever this one skips."""

import ast
import hashlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_mcp_server_standins as standins  # noqa: E402

REQS = os.path.realpath(os.path.join(harness.HERE, "..", "mcp_servers", "pypi",
                                     "requirements.txt"))
ARGS = [a for a in sys.argv[1:] if not a.startswith("-")]
WORK = os.path.realpath(ARGS[0] if ARGS else os.path.join("/tmp", "te-mcp-pypi"))
VENV = os.path.join(WORK, "venv")
VPY = os.path.join(VENV, "bin", "python")
PYSDK = os.path.realpath(os.path.join(harness.HERE, "..", "..", "contrib", "python"))
PIP_TIMEOUT = int(os.environ.get("TE_PIP_TIMEOUT", "300"))
# the venv's python is a link to the one that made it, which the calls' view
# must show: the system's (a pyenv shim's in a home directory is hidden)
SYSPY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


PROBE_TIMEOUT = 5  # seconds: a reachable index answers a HEAD well within it


def pip_settings():
    """pip's configuration as pip reads it (pip config list: its files and
    PIP_* variables), {name: [values]}, the environment's first, then the
    install section's, then the global one's; {} when pip cannot say."""
    try:
        p = subprocess.run([SYSPY, "-m", "pip", "config", "list"], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    rank = {":env:": 0, "install": 1, "global": 2}
    found = []
    for line in p.stdout.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if section in rank and value:
            try:
                found.append((rank[section], name, str(ast.literal_eval(value))))
            except (ValueError, SyntaxError):
                pass
    out = {}
    for _, name, value in sorted(found, key=lambda f: f[0]):
        out.setdefault(name, []).append(value)
    return out


def index_unreachable():
    """Why none of the places pip would fetch the pins from answers (each
    asked for a HEAD, PROBE_TIMEOUT seconds), or None: one answered, or pip
    may do without (a local find-links directory)."""
    conf = pip_settings()
    first = lambda name: (conf.get(name) or [None])[0]  # noqa: E731
    urls = []
    if first("no-index") not in ("1", "true", "yes", "on"):
        urls.append(first("index-url") or "https://pypi.org/simple/")
        urls += (first("extra-index-url") or "").split()
    for link in (first("find-links") or "").split():
        if "://" in link and not link.startswith("file:"):
            urls.append(link)
        elif os.path.isdir(link) and os.listdir(link):
            return None  # wheels at hand: pip's to try
    if not urls:
        return None
    handlers = []
    if first("proxy"):
        handlers.append(urllib.request.ProxyHandler({"http": first("proxy"),
                                                     "https": first("proxy")}))
    opener = urllib.request.build_opener(*handlers)
    why = []
    for url in urls:
        try:
            opener.open(urllib.request.Request(url, method="HEAD"), timeout=PROBE_TIMEOUT)
            return None
        except urllib.error.HTTPError as e:
            if e.code < 500:  # it answered (a 5xx may be a proxy that could not reach it)
                return None
            why.append("%s: HTTP %d" % (url, e.code))
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, ssl.SSLError):
                return None  # reached; pip, with its own certificates, says the rest
            why.append("%s: %s" % (url, reason))
    return "; ".join(why)


def pip_install():
    """The pinned servers in VENV; False, with the reason printed, when they
    cannot be had."""
    with open(REQS, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(VENV, ".te-requirements")
    try:
        with open(stamp) as f:
            if f.read() == want:
                return True  # installed from these very pins before
    except OSError:
        pass
    why = index_unreachable()
    if why:
        print("SKIP: the package index cannot be reached (%s)" % why)
        return False
    shutil.rmtree(VENV, ignore_errors=True)
    os.makedirs(WORK, exist_ok=True)
    p = subprocess.run([SYSPY, "-m", "venv", VENV], capture_output=True, text=True)
    if p.returncode != 0:
        print("SKIP: python3 -m venv failed (python3-venv, contrib/deps.sh):\n" + p.stderr[-2000:])
        return False
    cmd = [VPY, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
           "--timeout", "20", "--retries", "1", "-r", REQS]
    with open(REQS) as f:
        if "--hash=" in f.read():
            cmd.append("--require-hashes")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT)
    except subprocess.TimeoutExpired:
        print("SKIP: pip install took longer than %d s (is PyPI reachable?)" % PIP_TIMEOUT)
        return False
    if p.returncode != 0:
        print("SKIP: pip install of %s failed (is PyPI reachable?):\n%s"
              % (REQS, (p.stdout + p.stderr)[-3000:]))
        return False
    with open(stamp, "w") as f:
        f.write(want)
    return True


def served(module, name, *args, **fields):
    """A definition of the venv's module run as python -m module args."""
    # no __pycache__ written in the read-only venv: a refusal on every call
    m = {"python_module": module, "python": VPY, "args": list(args),
         "env": {"PYTHONDONTWRITEBYTECODE": "1"}}
    extra = fields.pop("mcp", {})
    m["env"].update(extra.pop("env", {}))
    m.update(extra)
    d = {"name": name, "mcp_server": m, "timeout_ms": 60000,
         "filesystem": harness.with_tree({"read": [WORK]})}
    d.update(fields)
    return d


class Time(standins.Served):
    wait_for = ("time.get_current_time", "timew.get_current_time")

    @classmethod
    def definitions(cls, d):
        return [served("mcp_server_time", "time", "--local-timezone", "UTC"),
                served("mcp_server_time", "timew", "--local-timezone", "UTC",
                       mcp={"start": "warm", "env": {"PYTHONPATH": PYSDK}})]

    def check_time(self, done):
        t = standins.ok_text(self, done)
        self.assertEqual(json.loads(t)["timezone"], "Europe/Paris", t)

    def test_cold(self):
        done = standins.completed(self.c, "time.get_current_time", {"timezone": "Europe/Paris"})
        self.check_time(done)
        self.assertNotEqual(done.get("start"), "warm", done)

    def test_warm(self):
        from test_warm import python_loads_lib
        if not python_loads_lib():
            self.skipTest("python cannot load this build's libtoolexec (a sanitizer build)")
        harness.wait_template(self.d, "timew")  # the server's template, for all its tools
        done = standins.completed(self.c, "timew.get_current_time", {"timezone": "Europe/Paris"})
        self.check_time(done)
        self.assertEqual(done.get("start"), "warm", done)


class Git(standins.GitChecks):
    @classmethod
    def definitions(cls, d):
        repos = cls.repositories(d)
        view = standins.git_view(cls.repos_dir, repos)
        view["read"].append(WORK)
        return [served("mcp_server_git", "git", "--repository", repos["work"],
                       mcp={"env": dict(standins.GIT_ENV)}, filesystem=view),
                served("mcp_server_git", "gitany", mcp={"env": dict(standins.GIT_ENV)},
                       filesystem=view)]


class Fetch(standins.FetchChecks):
    @classmethod
    def definitions(cls, d):
        return [served("mcp_server_fetch", "fetch", "--ignore-robots-txt",
                       network={"allow": ["127.0.0.1:%d" % cls.port]})]


def nobody(cls):
    return unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                               "needs root (to drop to nobody) and setpriv")(cls)


class TimeRoot(Time, unittest.TestCase):
    make_daemon = staticmethod(standins.root_daemon)


class GitRoot(Git, unittest.TestCase):
    make_daemon = staticmethod(standins.root_daemon)


class FetchRoot(Fetch, unittest.TestCase):
    make_daemon = staticmethod(standins.root_daemon)


@nobody
class TimeUnprivileged(Time, unittest.TestCase):
    make_daemon = staticmethod(standins.nobody_daemon)


@nobody
class GitUnprivileged(Git, unittest.TestCase):
    make_daemon = staticmethod(standins.nobody_daemon)


@nobody
class FetchUnprivileged(Fetch, unittest.TestCase):
    make_daemon = staticmethod(standins.nobody_daemon)


if __name__ == "__main__":
    harness.require_env()
    if not shutil.which("git"):
        print("SKIP: git is not installed (contrib/deps.sh)")
        sys.exit(77)
    if not pip_install():
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")])
