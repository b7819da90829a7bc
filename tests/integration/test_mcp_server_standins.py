"""Stand-ins of ours for PyPI's mcp-server-fetch and mcp-server-git (PyPI
cannot be reached from here, so test_mcp_server_pypi.py skips; these run):
tests/mcp_servers/fetch_standin.py and git_standin.py, stdio MCP servers
in standard-library Python shaped like the real ones (the same tool names,
arguments and failures), as "mcp_server" definitions through the real
daemon, root and unprivileged.

fetch, with "network": {"allow": ["127.0.0.1:PORT"]} naming an HTTP server
of the test's on the host's loopback (an address on the list is reached even
though it is private):
- the allowed URL is fetched through the call's egress proxy (the server
  sees the request) and nothing is denied;
- another host, over http and https, is refused: the tool's error, and
  {"kind": "network", "host", "port"} in the call's "denied";
- through `toolexec mcp`, the model reads the refusal's sentence in the
  result's text.

git, on a repository the view makes writable beside one it hides:
- git_status and git_log answer for the repository; a commit made by calls
  (git_add, git_commit) is in the repository afterwards;
- the hidden repository is refused, by the server's own --repository check
  and, for a server started without one, by the view (nothing of it in the
  answer);
- nothing written outside the repository survives the call: a repository
  git_init makes in the call's /tmp is gone for the next call and from the
  host, one it tries to make beside the repository is refused.

The checks (FetchChecks, GitChecks) are also run against the real servers
by test_mcp_server_pypi.py."""

import json
import os
import shutil
import subprocess
import sys
import threading
import unittest
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from test_mcp import TOOLEXEC, Session  # noqa: E402

PY = "/usr/bin/python3"  # a shim in a home directory would be hidden by the view
# the servers run with -B: their imports write no __pycache__ (a refusal) in the read-only tree
SERVERS = os.path.realpath(os.path.join(harness.HERE, "..", "mcp_servers"))
PAGE = "a page from the allowed host"
SECRET = "secret-%s" % uuid.uuid4().hex[:10]
# git as any user the calls run as, on repositories the test made (as root)
GIT_ENV = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
           "GIT_CONFIG_VALUE_0": "*", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org", "HOME": "/tmp"}


class Page(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with self.server.lock:
            self.server.paths.append(self.path)
        found = self.path == "/page"
        body = (PAGE if found else "not here").encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def page_server():
    """An HTTP server on the host's 127.0.0.1, in a thread; .paths what it got."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    srv.daemon_threads = True
    srv.lock = threading.Lock()
    srv.paths = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def make_repos(top):
    """top/work (one commit) and top/secret (one commit whose message is
    SECRET), writable by whoever the calls run as."""
    repos = {}
    for name, message in (("work", "first commit"), ("secret", SECRET)):
        r = os.path.join(top, name)
        os.makedirs(r)
        env = dict(os.environ, **GIT_ENV)
        subprocess.run(["git", "-C", r, "init", "-q", "--shared=0777"], check=True, env=env)
        with open(os.path.join(r, "README"), "w") as f:
            f.write(name + "\n")
        subprocess.run(["git", "-C", r, "add", "README"], check=True, env=env)
        subprocess.run(["git", "-C", r, "commit", "-q", "-m", message], check=True, env=env)
        subprocess.run(["chmod", "-R", "a+rwX", r], check=True)
        repos[name] = r
    return repos


def git_view(repos_dir, repos):
    """The git servers' view: the repositories' directory read-only, the work
    repository writable, the secret one hidden."""
    return harness.with_tree({"read": [repos_dir], "write": [repos["work"]],
                              "hide": [repos["secret"]]})


def completed(c, name, args):
    b = c.start_batch([{"id": "c", "name": name, "arguments": args}])
    return [e for e in c.recv_batch(b, timeout=120 * harness.SCALE)
            if e["event"] == "tool_execution_completed"][0]


def ok_text(test, done):
    r = done["result"]
    test.assertIn("ok", r, done)
    return "\n".join(b.get("text", "") for b in r["ok"]["content"])


class Served:
    """A daemon (cls.make_daemon) with cls.definitions(d) loaded, until
    cls.wait_for is listed."""

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.srv = page_server()
        cls.port = cls.srv.server_address[1]
        cls.d = cls.make_daemon()
        try:
            for t in cls.definitions(cls.d):
                cls.d.add_tool(t)
            harness.started(cls.d)
            cls.c = cls.d.client()
            def listed():
                names = {t["name"] for t in cls.c.tools()["tools"]}
                return all(n in names for n in cls.wait_for)
            harness.deadline_wait(listed, timeout=120 * harness.SCALE,
                                  what="%s listed" % ", ".join(cls.wait_for))
        except BaseException:
            cls.d.stop(check=False)
            cls.srv.shutdown()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.stop()
        cls.srv.shutdown()
        cls.srv.server_close()


class FetchChecks(Served):
    """fetch.fetch: a fetch server allowed 127.0.0.1:PORT alone."""
    wait_for = ("fetch.fetch",)

    def url(self, path="/page"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def test_allowed_host_fetched(self):
        done = completed(self.c, "fetch.fetch", {"url": self.url()})
        t = ok_text(self, done)
        self.assertIn("Contents of %s:" % self.url(), t)
        self.assertIn(PAGE, t)
        self.assertEqual(done.get("denied", []), [])
        with self.srv.lock:
            self.assertIn("/page", self.srv.paths)

    def test_other_host_refused_as_data(self):
        for url, port in (("http://evil.example/x", 80), ("https://evil.example/x", 443)):
            done = completed(self.c, "fetch.fetch", {"url": url})
            r = done["result"]
            self.assertNotIn("ok", r, done)
            self.assertIn("evil.example", json.dumps(r))
            self.assertIn({"kind": "network", "host": "evil.example", "port": port},
                          done.get("denied", []), done)

    def test_model_reads_the_refusal(self):
        if not TOOLEXEC:
            self.skipTest("environment lacks TOOLEXEC (run through meson test)")
        s = Session(self, self.d.sock)
        s.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "standins", "version": "1"}})
        self.assertIn("result", s.recv())
        s.notify("notifications/initialized")
        s.request(2, "tools/call", {"name": "fetch.fetch",
                                    "arguments": {"url": "http://evil.example/x"}})
        r = s.response(2, timeout=120 * harness.SCALE)["result"]
        refused = ("Network access to evil.example port 80 was refused: it is not in the tool's "
                   "network allow-list; only the tool's definition (\"network\": {\"allow\": "
                   "[\"evil.example:80\"]}) allows it, within what a run request's \"policy\" "
                   "leaves.")
        self.assertTrue(r["isError"], r)
        self.assertIn(refused, r["content"][0]["text"])
        # and the allowed one, through the same front
        s.request(3, "tools/call", {"name": "fetch.fetch", "arguments": {"url": self.url()}})
        r = s.response(3, timeout=120 * harness.SCALE)["result"]
        self.assertFalse(r.get("isError"), r)
        self.assertIn(PAGE, r["content"][0]["text"])


class GitChecks(Served):
    """git.* (started with --repository on the work repository) and gitany.*
    (started without one), both with git_view."""
    wait_for = ("git.git_status", "gitany.git_status")

    @classmethod
    def repositories(cls, d):
        cls.repos_dir = d.shared_dir("repos")
        cls.repos = make_repos(cls.repos_dir)
        return cls.repos

    def host_log(self, repo):
        return subprocess.run(["git", "-C", repo, "log", "--format=%s"], capture_output=True,
                              text=True, check=True, env=dict(os.environ, **GIT_ENV)).stdout

    def test_status_and_log_of_the_repository(self):
        work = self.repos["work"]
        t = ok_text(self, completed(self.c, "git.git_status", {"repo_path": work}))
        self.assertIn("Repository status:", t)
        self.assertIn("On branch", t)
        t = ok_text(self, completed(self.c, "git.git_log", {"repo_path": work}))
        self.assertIn("first commit", t)

    def test_hidden_repository_refused(self):
        secret = self.repos["secret"]
        for name in ("git.git_status", "git.git_log", "gitany.git_status", "gitany.git_log"):
            done = completed(self.c, name, {"repo_path": secret})
            self.assertNotIn("ok", done["result"], (name, done))
            self.assertNotIn(SECRET, json.dumps(done), name)
        self.assertIn(SECRET, self.host_log(secret))  # there all along, and untouched

    def test_commit_in_the_repository_kept(self):
        work = self.repos["work"]
        name = "note-%s" % uuid.uuid4().hex[:8]
        with open(os.path.join(work, name), "w") as f:
            f.write("x\n")
        os.chmod(os.path.join(work, name), 0o666)
        ok_text(self, completed(self.c, "git.git_add", {"repo_path": work, "files": [name]}))
        ok_text(self, completed(self.c, "git.git_commit", {"repo_path": work,
                                                           "message": "add " + name}))
        self.assertIn("add " + name, self.host_log(work))

    def test_nothing_outside_the_repository_survives(self):
        names = {t["name"] for t in self.c.tools()["tools"]}
        if "gitany.git_init" not in names:
            self.skipTest("this server has no git_init")
        before = sorted(os.listdir(self.repos_dir))
        in_tmp = "/tmp/te-git-%s" % uuid.uuid4().hex[:10]
        ok_text(self, completed(self.c, "gitany.git_init", {"repo_path": in_tmp}))
        self.assertFalse(os.path.exists(in_tmp))
        done = completed(self.c, "gitany.git_status", {"repo_path": in_tmp})
        self.assertNotIn("ok", done["result"], done)  # the call's /tmp went with it
        beside = os.path.join(self.repos_dir, "beside")
        done = completed(self.c, "gitany.git_init", {"repo_path": beside})
        self.assertNotIn("ok", done["result"], done)
        self.assertFalse(os.path.exists(beside))
        self.assertEqual(sorted(os.listdir(self.repos_dir)), before)


def root_daemon():
    return harness.Daemon(start=False)


def nobody_daemon():
    d = harness.NobodyDaemon(start=False)
    harness.give_work_dir(d)
    return d


def standin(script, *args):
    return [PY, "-B", os.path.join(SERVERS, script)] + list(args)


def fetch_standin(port):
    return {"name": "fetch", "mcp_server": {"command": standin("fetch_standin.py")},
            "network": {"allow": ["127.0.0.1:%d" % port]}, "timeout_ms": 60000}


def git_standin(name, view, *args):
    return {"name": name, "mcp_server": {"command": standin("git_standin.py", *args),
                                         "env": dict(GIT_ENV)},
            "filesystem": view, "timeout_ms": 60000}


class StandinFetch(FetchChecks):
    @classmethod
    def definitions(cls, d):
        return [fetch_standin(cls.port)]


class StandinGit(GitChecks):
    @classmethod
    def definitions(cls, d):
        repos = cls.repositories(d)
        view = git_view(cls.repos_dir, repos)
        return [git_standin("git", view, "--repository", repos["work"]),
                git_standin("gitany", view)]


class FetchRoot(StandinFetch, unittest.TestCase):
    make_daemon = staticmethod(root_daemon)


class GitRoot(StandinGit, unittest.TestCase):
    make_daemon = staticmethod(root_daemon)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class FetchUnprivileged(StandinFetch, unittest.TestCase):
    make_daemon = staticmethod(nobody_daemon)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class GitUnprivileged(StandinGit, unittest.TestCase):
    make_daemon = staticmethod(nobody_daemon)


if __name__ == "__main__":
    if not shutil.which("git"):
        print("SKIP: git is not installed (contrib/deps.sh)")
        sys.exit(77)
    unittest.main()
