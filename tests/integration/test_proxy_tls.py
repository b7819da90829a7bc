"""The credential proxy's TLS end (daemon/confine/proxy_tls.c), beyond
test_credentials: its set-up failing and tried again at reload, its
certificate cache past its 256 hosts, and upstreams whose certificates
cannot be trusted. Helpers (the tool, the test's CA and servers) are
test_credentials'."""

import os
import shutil
import signal
import tempfile
import threading
import unittest
from http.server import ThreadingHTTPServer

import harness
import test_credentials as tc
from harness import Daemon

SECRET = tc.SECRET
Handler = tc.Handler
make_ca, make_leaf, make_certs = tc.make_ca, tc.make_leaf, tc.make_certs
tls_context = tc.tls_context
serve, tool = tc.serve, tc.tool


class Setup(unittest.TestCase):
    """The proxy's TLS set-up: one that failed (an --upstream-ca with no
    certificate in it) is tried again at each reload, leaving nothing of
    itself behind (LeakSanitizer at stop, in the ASan build), and succeeds
    once the file is right; a certificate per host is kept for 256 hosts,
    and a host past them still gets one (the least recently used goes)."""

    def creds(self, d):
        creds = os.path.join(d, "creds")
        os.mkdir(creds, 0o700)
        with open(os.path.join(creds, "api"), "w") as f:
            f.write(SECRET)
        os.chmod(os.path.join(creds, "api"), 0o600)
        return creds

    def test_a_failed_setup_is_tried_again_at_reload(self):
        harness.require_env()
        d = tempfile.mkdtemp(prefix="te-cred-")
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        make_certs(d)
        ca = os.path.join(d, "upstream.pem")
        open(ca, "w").close()
        t = tool("cred", {"allow": ["example.com"],
                          "headers": {"example.com": {"Authorization": {"credential": "api"}}}})
        dm = Daemon([t], args=["--credentials-dir", self.creds(d), "--upstream-ca", ca])
        bundle = os.path.join(dm.work_dir, "ca-bundle.pem")
        try:
            failed = "no TLS for credential headers: --upstream-ca %s: no certificate" % ca
            harness.deadline_wait(lambda: dm.stderr().count(failed) == 1, what="the set-up to fail")
            for n in (2, 3):
                dm.proc.send_signal(signal.SIGHUP)
                harness.deadline_wait(lambda: dm.stderr().count(failed) == n,
                                      what="the set-up to fail again at reload %d" % n)
            self.assertFalse(os.path.exists(bundle))
            shutil.copy(os.path.join(d, "ca.pem"), ca)
            dm.proc.send_signal(signal.SIGHUP)
            harness.deadline_wait(lambda: os.path.exists(bundle), what="the bundle at reload")
        finally:
            dm.stop()

    def test_more_hosts_than_the_certificate_cache_holds(self):
        harness.require_env()
        d = tempfile.mkdtemp(prefix="te-cred-")
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        # 300 addresses of the host's loopback (127.0.0.0/8 is all its own)
        ips = ["127.0.%d.%d" % (1 + i // 200, 1 + i % 200) for i in range(300)]
        make_certs(d, ips)
        srv = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        srv.daemon_threads = True
        srv.seen = []
        srv.socket = tls_context(d, "srv").wrap_socket(srv.socket, server_side=True)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        hosts = ["%s:%d" % (ip, srv.server_address[1]) for ip in ips]
        cred = {"Authorization": {"credential": "api"}}
        t = dict(tool("many", {"allow": hosts, "headers": {h: cred for h in hosts}}),
                 timeout_ms=110000)
        dm = Daemon([t], args=["--credentials-dir", self.creds(d),
                               "--upstream-ca", os.path.join(d, "ca.pem")])
        self.addCleanup(dm.stop)
        # the first host again at the end: its certificate was dropped for a
        # newer one, and is made again
        urls = ["https://%s/x" % h for h in hosts + hosts[:1]]
        res = dm.client().run([{"id": "c", "name": "many", "arguments": {"op": "each", "urls": urls}}],
                              timeout=120 * harness.SCALE)
        out = res.result("c").get("ok")
        self.assertEqual(list(out or {}), ["200"], {k: v[:3] for k, v in (out or {}).items()})
        self.assertEqual(len(out["200"]), 301)
        self.assertEqual(len(srv.seen), 301)
        self.assertEqual(set(map(tuple, srv.seen)), {(SECRET,)})


class BadUpstream(unittest.TestCase):
    """A host whose certificate the proxy cannot trust, for it, now (signed
    by a CA it does not know, for another address, expired) gets 502 and
    not the credential: nothing reaches the host but the failed handshake."""

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.dir = tempfile.mkdtemp(prefix="te-cred-")
        os.chmod(cls.dir, 0o755)
        make_ca(cls.dir)            # given to the daemon with --upstream-ca
        make_ca(cls.dir, "stranger")  # given to nobody
        make_leaf(cls.dir, "untrusted", ca="stranger")
        make_leaf(cls.dir, "othername", ips=("127.0.0.2",))
        make_leaf(cls.dir, "expired", days=-1)
        cls.srv = {n: serve(tls_context(cls.dir, n)) for n in ("untrusted", "othername", "expired")}
        cls.hosts = {n: "127.0.0.1:%d" % s.server_address[1] for n, s in cls.srv.items()}
        creddir = os.path.join(cls.dir, "creds")
        os.mkdir(creddir, 0o700)
        with open(os.path.join(creddir, "api"), "w") as f:
            f.write(SECRET)
        os.chmod(os.path.join(creddir, "api"), 0o600)
        cred = {"Authorization": {"credential": "api"}}
        hosts = list(cls.hosts.values())
        cls.d = Daemon([tool("cred", {"allow": hosts, "headers": {h: cred for h in hosts}})],
                       args=["--credentials-dir", creddir,
                             "--upstream-ca", os.path.join(cls.dir, "ca.pem")])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        for s in cls.srv.values():
            s.shutdown()
            s.server_close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def check(self, name):
        res = self.d.client().run([{"id": "c", "name": "cred", "arguments": {
            "op": "get", "url": "https://%s/x" % self.hosts[name]}}])
        out = res.result("c").get("ok")
        self.assertEqual((out or {}).get("status"), 502, res.result("c"))
        self.assertIn("TLS to 127.0.0.1 failed", out["body"])
        self.assertEqual(self.srv[name].seen, [])
        self.assertNotIn(SECRET.split()[1], self.d.stderr())

    def test_a_certificate_of_an_unknown_ca(self):
        self.check("untrusted")

    def test_a_certificate_for_another_address(self):
        self.check("othername")

    def test_an_expired_certificate(self):
        self.check("expired")


if __name__ == "__main__":
    unittest.main()
