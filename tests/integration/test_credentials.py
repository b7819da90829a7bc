"""Credentials injected at the egress proxy:
"network": {"allow": [...], "headers": {"HOST[:PORT]": {"Name":
{"credential": "NAME"}}}}, the value read from a root-only file in
--credentials-dir. A local HTTPS server (its own CA, given to the daemon
with --upstream-ca) and a plain HTTP one answer 200 only with the bearer
token; a python3 tool reaches them through the proxy. The call succeeds and
cannot find the value in its environment, its /proc, or any file it can
read where it might be; a call of another tool allowed to the same hosts
gets 401; a host not on the list is refused; a credential file others may
read is refused at load and by --check."""

import json
import os
import pwd
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness
from harness import Daemon

SECRET = "Bearer s3cr3t-" + os.urandom(8).hex()

TOOL = r'''
import json, os, stat, sys, urllib.request, urllib.error
a = json.loads(sys.stdin.readline())
op = a["op"]
def get(url, auth=None, host=None, more=None):
    try:
        hdrs = {"Authorization": auth} if auth else {}
        if host:
            hdrs["Host"] = host
        hdrs.update(more or {})
        req = urllib.request.Request(url, headers=hdrs)
        r = urllib.request.urlopen(req, timeout=20)
        return {"status": r.status, "body": r.read().decode()}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode()}
    except OSError as e:
        return {"error": type(e).__name__, "msg": str(e)}
if op == "get":
    out = get(a["url"], a.get("auth"), a.get("host"), a.get("headers"))
elif op == "gets":
    out = [get(a["url"]).get("status", "error") for _ in range(a["n"])]
elif op == "each":
    out = {}
    for u in a["urls"]:
        r = get(u)
        out.setdefault(str(r.get("status", r.get("error"))), []).append(u)
elif op == "look":
    # everywhere the value might be: environment, /proc, the trust files,
    # the credentials directory, every readable file below these roots
    needle = a["needle"].encode()
    found, read = [], 0
    if needle in json.dumps(dict(os.environ)).encode():
        found.append("os.environ")
    roots = ["/proc/self/environ", "/proc/self/cmdline", "/proc/1/environ", "/proc/1/cmdline",
             "/etc", "/tmp", "/dev/shm", os.getcwd(), a["creddir"], a["workdir"], "/run", "/var"]
    for r in roots:
        for dirpath, dirs, files in (os.walk(r) if os.path.isdir(r) else [("", [], [r])]):
            for f in files:
                p = os.path.join(dirpath, f)
                # regular files only, opened without waiting: a FIFO the
                # host left under /var or /run holds nothing at rest, and
                # a plain open() of it would wait for a writer forever
                try:
                    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
                except OSError:
                    continue
                with open(fd, "rb") as fh:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        continue
                    try:
                        data = fh.read(1 << 20)
                    except OSError:
                        continue
                read += 1
                if needle in data:
                    found.append(p)
    pids = [d for d in os.listdir("/proc") if d.isdigit()]
    out = {"found": found, "read": read, "pids": pids,
           "ssl_cert_file": os.environ.get("SSL_CERT_FILE"),
           "bundle_has_ca": b"toolexecd credential proxy CA" in open("/etc/ssl/certs/ca-certificates.crt", "rb").read()}
print(json.dumps(out))
'''


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        ok = self.headers.get("Authorization") == SECRET
        self.server.seen.append(self.headers.get_all("Authorization") or [])
        body = b"welcome" if ok else b"who are you"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(ctx=None):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.seen = []
    if ctx:
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def openssl(d, *a):
    subprocess.run(("openssl",) + a, cwd=d, check=True, capture_output=True)


def make_ca(d, ca="ca"):
    """A CA of the test's own: d/CA.pem, d/CA.key."""
    openssl(d, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", ca + ".key", "-out", ca + ".pem", "-days", "2",
            "-subj", "/CN=test CA " + ca)


def make_leaf(d, name, ips=("127.0.0.1",), ca="ca", days=2):
    """d/NAME.pem and d/NAME.key: a server certificate for ips signed by ca,
    valid from now for days (-1: expired yesterday)."""
    openssl(d, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + ips[0])
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\n"
                % ",".join("IP:" + ip for ip in ips))
    openssl(d, "x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".pem", "-days", str(days),
            "-extfile", name + ".ext")


def make_certs(d, ips=("127.0.0.1",)):
    """A CA of the test's own and a certificate for ips signed by it."""
    make_ca(d)
    make_leaf(d, "srv", ips)


def tls_context(d, name):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(os.path.join(d, name + ".pem"), os.path.join(d, name + ".key"))
    return ctx


def tool(name, network):
    return {"name": name, "description": "credential test tool", "schema": {"type": "object"},
            "command": ["/usr/bin/python3", "-I", "-c", TOOL], "protocol": "plain",
            "network": network, "timeout_ms": 60000}


class CredentialsCases:
    owner = 0  # of the credentials: root, or the unprivileged daemon's uid

    @classmethod
    def make_daemon(cls, tools, args):
        return Daemon(tools, args=args)

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.dir = tempfile.mkdtemp(prefix="te-cred-")
        os.chmod(cls.dir, 0o755)
        make_certs(cls.dir)
        cls.https = serve(tls_context(cls.dir, "srv"))
        cls.http = serve()
        cls.creddir = os.path.join(cls.dir, "creds")
        os.mkdir(cls.creddir, 0o700)
        with open(os.path.join(cls.creddir, "api"), "w") as f:
            f.write(SECRET + "\n")
        os.chmod(os.path.join(cls.creddir, "api"), 0o600)
        os.chown(cls.creddir, cls.owner, -1)
        os.chown(os.path.join(cls.creddir, "api"), cls.owner, -1)
        hs = "127.0.0.1:%d" % cls.https.server_address[1]
        hp = "127.0.0.1:%d" % cls.http.server_address[1]
        cls.hs, cls.hp = hs, hp
        cred = {"Authorization": {"credential": "api"}}
        cls.d = cls.make_daemon([tool("cred", {"allow": [hs, hp], "headers": {hs: cred, hp: cred}}),
                                 tool("other", {"allow": [hs, hp]}),
                                 tool("capped", {"allow": [hs], "headers": {hs: cred},
                                                 "max_bytes": 800})],
                                ["--credentials-dir", cls.creddir,
                                 "--upstream-ca", os.path.join(cls.dir, "ca.pem")])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        for s in (cls.https, cls.http):
            s.shutdown()
            s.server_close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def call(self, name, timeout=harness.WAIT, **args):
        res = self.d.client().run([{"id": "c", "name": name, "arguments": args}], timeout=timeout)
        r = res.result("c")
        self.assertIn("ok", r, r)
        return r["ok"], res.completed("c").get("denied", [])

    def test_https_with_the_credential(self):
        out, _ = self.call("cred", op="get", url="https://%s/x" % self.hs)
        self.assertEqual(out, {"status": 200, "body": "welcome"})

    def test_the_calls_own_header_is_replaced(self):
        for srv, url in ((self.https, "https://%s/x" % self.hs),
                         (self.http, "http://%s/x" % self.hp)):
            before = len(srv.seen)
            out, _ = self.call("cred", op="get", url=url, auth="Bearer not-the-one")
            self.assertEqual(out["status"], 200)
            self.assertEqual(srv.seen[before:], [[SECRET]])

    def test_a_narrowed_call_keeps_its_credential(self):
        # a run request's policy narrows the allow-list to
        # the HTTPS host alone: that host keeps its header (and the call its
        # CA), the host narrowed away is refused
        res = self.d.client().run(
            [{"id": "n", "name": "cred", "arguments": {"op": "get", "url": "https://%s/x" % self.hs},
              "policy": {"network": {"allow": [self.hs]}, "filesystem": {"hide": ["/srv"]}}},
             {"id": "m", "name": "cred", "arguments": {"op": "get", "url": "http://%s/x" % self.hp},
              "policy": {"network": {"allow": [self.hs]}}}])
        self.assertEqual(res.result("n").get("ok"), {"status": 200, "body": "welcome"}, res.result("n"))
        self.assertEqual(res.result("m")["ok"]["status"], 403, res.result("m"))

    def test_max_bytes_holds_across_tls_connections(self):
        # each HTTPS request is a connection of its own whose TLS the proxy
        # ends; together they may relay max_bytes (800: a few requests and
        # their answers), not each of them
        res = self.d.client().run([{"id": "c", "name": "capped",
                                    "arguments": {"op": "gets", "n": 12,
                                                  "url": "https://%s/x" % self.hs}}])
        statuses = res.result("c")["ok"]
        self.assertEqual(statuses[0], 200, statuses)
        self.assertLess(statuses.count(200), 12, statuses)
        self.assertNotEqual(statuses[-1], 200, statuses)

    def test_another_host_behind_the_connect_gets_nothing(self):
        # the CONNECT names the allowed host; a Host header naming another
        # (domain fronting through a shared front end) is refused, unsent
        before = len(self.https.seen)
        out, _ = self.call("cred", op="get", url="https://%s/x" % self.hs, host="evil.example")
        self.assertEqual(out.get("status"), 421, out)
        self.assertEqual(self.https.seen[before:], [])
        # the same host on another port is another site too
        out, _ = self.call("cred", op="get", url="https://%s/x" % self.hs, host="127.0.0.1:1")
        self.assertEqual(out.get("status"), 421, out)
        self.assertEqual(self.https.seen[before:], [])
        out, _ = self.call("cred", op="get", url="https://%s/x" % self.hs, host=self.hs)
        self.assertEqual(out.get("status"), 200, out)

    def test_another_host_in_a_plain_request_gets_nothing(self):
        # in clear text as over TLS: the target names the allowed host, a
        # Host header naming another (or the same host on another port) is
        # refused before anything goes out; the same host:port in another
        # case, or a Host left out, gets the credential
        host, port = self.hp.split(":")
        for other in ("other.example", "other.example:" + port, host, host + ":1",
                      self.hp + "\t, x"):
            before = len(self.http.seen)
            out, _ = self.call("cred", op="get", url="http://%s/x" % self.hp, host=other)
            self.assertEqual(out.get("status"), 421, (other, out))
            self.assertEqual(self.http.seen[before:], [], other)
        for same in (self.hp, " %s " % self.hp):
            before = len(self.http.seen)
            out, _ = self.call("cred", op="get", url="http://%s/x" % self.hp, host=same)
            self.assertEqual(out, {"status": 200, "body": "welcome"}, same)
            self.assertEqual(self.http.seen[before:], [[SECRET]])

    def test_a_host_hidden_in_a_folded_or_odd_line_gets_nothing(self):
        # a line that starts with a space (obs-fold) or a name with a space
        # before its colon is a Host to a lenient front end, and not one the
        # proxy checked: such a head is refused (400), over TLS and in clear
        for srv, url in ((self.https, "https://%s/x" % self.hs),
                         (self.http, "http://%s/x" % self.hp)):
            for more in ({"X-Fold": "a\r\n Host: other.example"},
                         {"Host ": "other.example"}):
                before = len(srv.seen)
                out, _ = self.call("cred", op="get", url=url, headers=more)
                self.assertEqual(out.get("status"), 400, (url, more, out))
                self.assertEqual(srv.seen[before:], [], (url, more))

    def test_plain_http_with_the_credential(self):
        out, _ = self.call("cred", op="get", url="http://%s/x" % self.hp)
        self.assertEqual(out, {"status": 200, "body": "welcome"})

    def test_another_tool_gets_no_header(self):
        out, _ = self.call("other", op="get", url="http://%s/x" % self.hp)
        self.assertEqual(out["status"], 401)
        # over HTTPS its tunnel is plain: the server's certificate is not one
        # its trust store knows, and nothing is added
        before = len(self.https.seen)
        out, _ = self.call("other", op="get", url="https://%s/x" % self.hs)
        self.assertIn("error", out)
        self.assertEqual(self.https.seen[before:], [])

    def test_host_not_on_the_list_is_refused(self):
        out, denied = self.call("cred", op="get", url="http://127.0.0.2:9/x")
        self.assertEqual(out["status"], 403)
        self.assertTrue(any(d.get("kind") == "network" for d in denied), denied)

    def test_the_call_cannot_read_the_value(self):
        # it reads every file the view shows under /var too, which on a
        # machine fresh from apt-get holds its downloaded packages: under
        # the sanitizers that took past the usual wait (the call's own
        # timeout is 60 s)
        out, _ = self.call("cred", op="look", needle=SECRET.split()[1], creddir=self.creddir,
                           workdir=self.d.work_dir, timeout=4 * harness.WAIT)
        self.assertEqual(out["found"], [])
        self.assertGreater(out["read"], 50)
        self.assertEqual(out["ssl_cert_file"], "/etc/ssl/certs/ca-certificates.crt")
        self.assertTrue(out["bundle_has_ca"])
        # the proxy (the daemon) is not in the call's PID namespace
        self.assertNotIn(str(self.d.proc.pid), out["pids"])
        self.assertLess(max(int(p) for p in out["pids"]), 50)


class RootCredentials(CredentialsCases, unittest.TestCase):
    pass


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedCredentials(CredentialsCases, unittest.TestCase):
    owner = pwd.getpwnam("nobody").pw_uid

    @classmethod
    def make_daemon(cls, tools, args):
        d = harness.NobodyDaemon(tools, args=args, start=False)
        harness.give_work_dir(d)
        harness.started(d)
        return d


class BadCredentialFile(unittest.TestCase):
    def test_readable_by_others_is_refused_at_load_and_check(self):
        harness.require_env()
        d = tempfile.mkdtemp(prefix="te-cred-")
        try:
            creds = os.path.join(d, "creds")
            os.mkdir(creds)
            with open(os.path.join(creds, "api"), "w") as f:
                f.write(SECRET)
            os.chmod(os.path.join(creds, "api"), 0o644)
            tools = os.path.join(d, "tools")
            os.mkdir(tools, 0o755)
            t = tool("cred", {"allow": ["example.com"],
                              "headers": {"example.com": {"Authorization": {"credential": "api"}}}})
            with open(os.path.join(tools, "cred.json"), "w") as f:
                json.dump(t, f)
            p = subprocess.run([harness.TOOLEXECD, "--check", "--tools", tools,
                                "--credentials-dir", creds], capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("mode 0644", p.stdout + p.stderr)
            self.assertNotIn(SECRET, p.stdout + p.stderr)
            os.chmod(os.path.join(creds, "api"), 0o600)
            p = subprocess.run([harness.TOOLEXECD, "--check", "--tools", tools,
                                "--credentials-dir", creds], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            os.chmod(os.path.join(creds, "api"), 0o640)
            # at load: the daemon does not start with it, and says why
            dm = Daemon([t], args=["--credentials-dir", creds], start=False)
            dm.spawn()
            self.assertEqual(dm.proc.wait(timeout=harness.WAIT), 1)
            err = dm.stderr()
            dm.stop(check=False)
            self.assertIn("mode 0640", err)
            self.assertNotIn(SECRET, err)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class Bundle(unittest.TestCase):
    """The proxy's CA bundle is the daemon's file: written into its work
    directory only when a loaded tool has credential headers (at start or at
    a reload), removed when the daemon stops."""

    def test_written_when_needed_and_gone_at_stop(self):
        harness.require_env()
        d = tempfile.mkdtemp(prefix="te-cred-")
        self.addCleanup(shutil.rmtree, d, True)
        creds = os.path.join(d, "creds")
        os.mkdir(creds, 0o700)
        with open(os.path.join(creds, "api"), "w") as f:
            f.write(SECRET)
        os.chmod(os.path.join(creds, "api"), 0o600)
        plain = tool("plain", {"allow": ["example.com"]})
        dm = Daemon([plain], args=["--credentials-dir", creds])
        bundle = os.path.join(dm.work_dir, "ca-bundle.pem")
        try:
            self.assertFalse(os.path.exists(bundle))
            # a reload that brings a tool with headers makes it
            t = tool("cred", {"allow": ["example.com"],
                              "headers": {"example.com": {"Authorization": {"credential": "api"}}}})
            with open(os.path.join(dm.tools_dir, "cred.json"), "w") as f:
                json.dump(t, f)
            dm.proc.send_signal(signal.SIGHUP)
            harness.deadline_wait(lambda: os.path.exists(bundle), what="the bundle at reload")
        finally:
            dm.stop()
        self.assertFalse(os.path.exists(bundle))


class NoClearTextWithoutAPort(unittest.TestCase):
    """A header host written without a port gets its credentials over
    HTTPS alone: a plain http:// request to it on port 80 goes out without
    them (clear text, no certificate: only where the definition names the
    port)."""

    def test_plain_http_to_a_portless_host_gets_no_header(self):
        harness.require_env()
        try:
            srv = ThreadingHTTPServer(("127.0.0.1", 80), Handler)
        except OSError as e:
            self.skipTest("port 80 not ours to bind: %s" % e)
        srv.daemon_threads = True
        srv.seen = []
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        d = tempfile.mkdtemp(prefix="te-cred-")
        self.addCleanup(shutil.rmtree, d, True)
        creds = os.path.join(d, "creds")
        os.mkdir(creds, 0o700)
        with open(os.path.join(creds, "api"), "w") as f:
            f.write(SECRET)
        os.chmod(os.path.join(creds, "api"), 0o600)
        t = tool("noport", {"allow": ["127.0.0.1"],
                            "headers": {"127.0.0.1": {"Authorization": {"credential": "api"}}}})
        dm = Daemon([t], args=["--credentials-dir", creds])
        self.addCleanup(dm.stop)
        res = dm.client().run([{"id": "c", "name": "noport",
                                "arguments": {"op": "get", "url": "http://127.0.0.1/x"}}])
        self.assertEqual(res.result("c")["ok"]["status"], 401, res.result("c"))
        self.assertEqual(srv.seen, [[]], srv.seen)


if __name__ == "__main__":
    unittest.main()
