#!/usr/bin/env python3
"""bench/credproxy.py - what the egress proxy's TLS end (credential headers)
costs per request against a plain CONNECT tunnel.

  bench/credproxy.py [--build DIR] [--requests N] [--rounds R]

Starts a local HTTPS server (a CA and certificate made with openssl) and
one root toolexecd (--upstream-ca that CA) with two tools allowed to it,
the same python3 program that makes N sequential HTTPS requests (a new
connection each, urllib through HTTPS_PROXY) and reports its own time:

  tunnel    no headers: a CONNECT tunnel, TLS end to end (the tool trusts
            the server's CA through SSL_CERT_FILE, a bundle of the system's
            roots and that CA: as large as the inject tool's)
  inject    "headers" for the host: the proxy ends TLS with its own CA,
            adds Authorization, and makes its own TLS connection upstream

R rounds alternate the two; it prints the median per-request time of
each, and inject / tunnel. A benchmark to run by hand, never a test.
"""

import argparse
import os
import shutil
import ssl
import statistics
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

TOOL = r'''
import json, sys, time, urllib.request
a = json.loads(sys.stdin.readline())
t0 = time.perf_counter()
for _ in range(a["n"]):
    r = urllib.request.urlopen(a["url"], timeout=20)
    r.read()
    assert r.status == 200
print(json.dumps({"s": time.perf_counter() - t0}))
'''


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    o = ap.parse_args()
    b = os.path.abspath(o.build)
    os.environ.setdefault("TOOLEXECD", b + "/daemon/toolexecd")
    os.environ.setdefault("TE_TESTWORKER", b + "/tests/workers/testworker")
    os.environ.setdefault("TE_PROTO_DIR", os.path.join(HERE, "..", "proto"))
    os.environ.setdefault("TE_WORKERS_SRC", os.path.join(HERE, "..", "tests", "workers"))
    os.environ.setdefault("TOOLEXEC", b + "/daemon/cli/toolexec")
    import harness
    from test_credentials import make_certs

    d = tempfile.mkdtemp(prefix="te-credbench-", dir="/srv" if os.path.isdir("/srv") else None)
    os.chmod(d, 0o755)
    try:
        make_certs(d)
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(os.path.join(d, "srv.pem"), os.path.join(d, "srv.key"))
        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        srv.daemon_threads = True
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        host = "127.0.0.1:%d" % srv.server_address[1]
        # the tunnel's client loads a bundle as large as the one the inject
        # tool's view has (the system's roots and one CA): urllib parses it
        # for each request, ~10 ms of the figure either way
        with open(os.path.join(d, "bundle.pem"), "wb") as f:
            for p in ("/etc/ssl/certs/ca-certificates.crt", os.path.join(d, "ca.pem")):
                if os.path.exists(p):
                    f.write(open(p, "rb").read())
        os.chmod(os.path.join(d, "bundle.pem"), 0o644)
        creds = os.path.join(d, "creds")
        os.mkdir(creds, 0o700)
        with open(os.path.join(creds, "api"), "w") as f:
            f.write("Bearer bench\n")
        os.chmod(os.path.join(creds, "api"), 0o600)

        def tool(name, net, **kw):
            t = {"name": name, "description": "bench", "schema": {"type": "object"},
                 "command": ["/usr/bin/python3", "-I", "-c", TOOL], "protocol": "plain",
                 "network": net, "timeout_ms": 600000, "filesystem": {"read": [d]}}
            t.update(kw)
            return t
        dm = harness.Daemon(
            [tool("tunnel", {"allow": [host]}, env={"SSL_CERT_FILE": os.path.join(d, "bundle.pem")}),
             tool("inject", {"allow": [host],
                             "headers": {host: {"Authorization": {"credential": "api"}}}})],
            args=["--credentials-dir", creds, "--upstream-ca", os.path.join(d, "ca.pem")])
        try:
            times = {"tunnel": [], "inject": []}
            c = dm.client()
            for r in range(o.rounds):
                for name in ("tunnel", "inject"):
                    res = c.run([{"id": "c", "name": name,
                                  "arguments": {"n": o.requests, "url": "https://%s/" % host}}],
                                timeout=600)
                    out = res.result("c")
                    if "ok" not in out:
                        sys.exit("%s: %s" % (name, out))
                    times[name].append(out["ok"]["s"] / o.requests)
            med = {k: statistics.median(v) for k, v in times.items()}
            print("requests per call %d, rounds %d" % (o.requests, o.rounds))
            for k in ("tunnel", "inject"):
                print("  %-7s %8.1f us per request (median; rounds: %s)" % (
                    k, med[k] * 1e6, " ".join("%.0f" % (x * 1e6) for x in times[k])))
            print("  inject / tunnel = %.2f" % (med["inject"] / med["tunnel"]))
        finally:
            dm.stop()
            srv.shutdown()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
