#!/usr/bin/env python3
"""bench/mcp_http.py - the MCP HTTP front (`toolexec mcp --listen`) against
the daemon's own socket, measured in the same run.

  bench/mcp_http.py [--build DIR] [--only a,b,c,d] [--seconds S] [--repeat R]
                    [--conc 1,16,256] [--clients N] [--calls-each K] [--idle N]
                    [--front-exe PATH] [--front-arg ARG]...

Starts a private toolexecd with one trivial framed tool (the C SDK echo,
contrib/tools/c/echo) and a front on 127.0.0.1:0, then:

  a  calls/s: closed-loop clients, each with one persistent connection,
     running tools/call of echo one after another for --seconds; over HTTP
     (2026-07-28, stateless, keep-alive, Accept: application/json) and over
     the Unix socket (one JSON line {"op":"run"} of one call, what the front
     itself sends the daemon), at each --conc, alternating, --repeat times.
     Prints both rates and the ratio HTTP / socket of each pair, and the
     client's own CPU (user+sys seconds per wall second): near 1.0 the
     client, not the server, is the limit.
  b  --clients HTTP clients at once (the front started with --connections
     above them), each connecting and running --calls-each calls: how many
     were refused (503 or a closed connection), latency p50 / p99 / max.
  c  memory of idle keep-alive connections: --idle connections, each after
     one request (server/discover), left open; the front's Rss and Pss
     (/proc/PID/smaps_rollup) before and after, divided by --idle.
  d  JWT validation with a cached key: BUILD/bench/jwt_verify.

The client is asyncio over raw sockets with a minimal HTTP/1.1 reader (a
Content-Length body, no chunking: the front answers so), so that Python's
http.client is not what is measured. Standard library only; a benchmark to
run by hand, never a pass/fail test. The figures vary with the machine's
load: compare the ratios of one run, and repeat.
"""

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FRONT_ARGS = []  # --front-arg
FRONT_EXE = []  # --front-exe: another build's toolexec, for an A/B
NEW = "2026-07-28"


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def cpu():
    t = os.times()
    return t.user + t.system


def proc_cpu(pid):
    """A process's user+sys seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(cond, what, timeout=30.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise SystemExit("mcp_http bench: timed out waiting for " + what)
        time.sleep(0.01)


class Daemon:
    def __init__(self, build, tmp):
        self.tmp = tmp
        tools = os.path.join(tmp, "tools")
        os.mkdir(tools, 0o755)
        worker = os.path.join(build, "contrib", "tools", "c", "echo")
        with open(os.path.join(tools, "echo.json"), "w") as f:
            json.dump({"name": "echo", "command": [worker]}, f)
        self.work = tempfile.mkdtemp(prefix="te-mcphttp-", dir="/dev/shm"
                                     if os.path.isdir("/dev/shm") else None)
        os.chmod(self.work, 0o755)
        self.sock = os.path.join(tmp, "s.sock")
        self.log = open(os.path.join(tmp, "daemon.log"), "wb")
        self.proc = subprocess.Popen(
            [os.path.join(build, "daemon", "toolexecd"), "--socket", self.sock, "--tools", tools,
             "--work-dir", self.work, "--log-level", "warn", "--max-workers", "1100",
             "--max-queued-calls", "1000000", "--max-batch-calls", "1000000",
             "--max-client-batches", "100000", "--max-clients", "2000",
             "--max-clients-per-uid", "2000"],
            stdout=self.log, stderr=self.log)
        wait_for(lambda: os.path.exists(self.sock) or self.proc.poll() is not None, "the daemon")
        if self.proc.poll() is not None:
            raise SystemExit("toolexecd did not start: see " + self.log.name)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)


class Front:
    def __init__(self, build, sock, tmp, *args):
        self.err = open(os.path.join(tmp, "front-%d.log" % time.monotonic_ns()), "w+b")
        self.proc = subprocess.Popen(
            [(FRONT_EXE or [os.path.join(build, "daemon", "cli", "toolexec")])[0],
             "--socket", sock, "mcp",
             "--listen", "127.0.0.1:0"] + list(args) + FRONT_ARGS,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err)
        found = {}

        def listening():
            self.err.seek(0)
            m = re.search(rb"http://127\.0\.0\.1:(\d+)/mcp", self.err.read())
            if m:
                found["port"] = int(m.group(1))
            return bool(m) or self.proc.poll() is not None
        wait_for(listening, "the front")
        if "port" not in found:
            raise SystemExit("toolexec mcp --listen did not start: see " + self.err.name)
        self.port = found["port"]

    def mem_kb(self):
        """Rss and Pss (KiB) from smaps_rollup."""
        out = {}
        with open("/proc/%d/smaps_rollup" % self.proc.pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Rss", "Pss"):
                    out[k] = int(v.split()[0])
        return out["Rss"], out["Pss"]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.err.close()


# ---- clients -------------------------------------------------------------------


class Refused(Exception):
    pass


def http_call(rid):
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"n": rid},
        "_meta": {"io.modelcontextprotocol/protocolVersion": NEW,
                  "io.modelcontextprotocol/clientCapabilities": {}}}},
        separators=(",", ":")).encode()
    return (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json\r\nMCP-Protocol-Version: " + NEW.encode() +
            b"\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: " +
            str(len(body)).encode() + b"\r\n\r\n" + body)


def http_discover(rid):
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "server/discover"}).encode()
    return (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json\r\nContent-Length: " + str(len(body)).encode() +
            b"\r\n\r\n" + body)


async def http_exchange(reader, writer, req):
    """One request on a kept-alive connection; returns (status, body)."""
    writer.write(req)
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError) as e:
        raise Refused("closed: %s" % e)
    status = int(head[9:12])
    m = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
    body = await reader.readexactly(int(m.group(1))) if m else b""
    return status, body


def check_call(status, body, rid):
    if status == 503:
        raise Refused("503")
    msg = json.loads(body)
    if status != 200 or msg.get("id") != rid or msg.get("result", {"isError": 1}).get("isError"):
        raise SystemExit("bad answer %d: %r" % (status, body[:300]))


async def http_client(port, stop_at, counts, lat=None, ncalls=None):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    rid = 0
    try:
        while (ncalls is None and time.monotonic() < stop_at) or (ncalls is not None and
                                                                  rid < ncalls):
            rid += 1
            t0 = time.monotonic()
            status, body = await http_exchange(reader, writer, http_call(rid))
            check_call(status, body, rid)
            if lat is not None:
                lat.append(time.monotonic() - t0)
            counts[0] += 1
    finally:
        writer.close()


async def sock_client(path, stop_at, counts, tag):
    reader, writer = await asyncio.open_unix_connection(path, limit=1 << 20)
    n = 0
    try:
        while time.monotonic() < stop_at:
            n += 1
            batch = "%s-%d" % (tag, n)
            writer.write(json.dumps({"op": "run", "batch": batch, "calls": [
                {"id": "c0", "name": "echo", "arguments": {"n": n}}]},
                separators=(",", ":")).encode() + b"\n")
            ok = False
            while True:
                ev = json.loads(await reader.readline())
                e = ev.get("event")
                if e == "tool_execution_completed":
                    ok = ev.get("status") in ("success", "ok", None) or "result" in ev
                if ev.get("batch") == batch and e in ("batch_completed", "error"):
                    break
            if e != "batch_completed" or not ok:
                raise SystemExit("bad socket answer: %r" % ev)
            counts[0] += 1
    finally:
        writer.close()


def rate(coro_factory, conc, seconds):
    async def run():
        counts = [0]
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(coro_factory(stop_at, counts, i) for i in range(conc)))
        return counts[0]
    c0, t0 = cpu(), time.monotonic()
    n = asyncio.run(run())
    wall = time.monotonic() - t0
    return n / wall, (cpu() - c0) / wall


# ---- the benchmarks ------------------------------------------------------------


def bench_a(args, d, front):
    print("a) calls/s of echo, HTTP (2026-07-28, keep-alive) vs the Unix socket; "
          "%.1f s a run, %d runs; client CPU in ()" % (args.seconds, args.repeat))
    for conc in args.conc:
        ratios, hs, ss, fus, dus = [], [], [], [], []
        for _ in range(args.repeat):
            d0 = proc_cpu(d.proc.pid)
            t0 = time.monotonic()
            s, scpu = rate(lambda stop, cnt, i: sock_client(d.sock, stop, cnt, "b%d" % i),
                           conc, args.seconds)
            dus.append((proc_cpu(d.proc.pid) - d0) / (s * (time.monotonic() - t0)) * 1e6)
            f0 = proc_cpu(front.proc.pid)
            t0 = time.monotonic()
            h, hcpu = rate(lambda stop, cnt, i: http_client(front.port, stop, cnt),
                           conc, args.seconds)
            fus.append((proc_cpu(front.proc.pid) - f0) / (h * (time.monotonic() - t0)) * 1e6)
            ss.append((s, scpu))
            hs.append((h, hcpu))
            ratios.append(h / s)
        print("  conc %3d  socket %s  http %s  ratio %.2f-%.2f (median %.2f); CPU a call: "
              "daemon %.0f-%.0f us, front %.0f-%.0f us" % (
                  conc, " ".join("%.0f(%.2f)" % x for x in ss),
                  " ".join("%.0f(%.2f)" % x for x in hs), min(ratios), max(ratios),
                  statistics.median(ratios), min(dus), max(dus), min(fus), max(fus)))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def bench_b(args, build, d, tmp):
    front = Front(build, d.sock, tmp, "--connections", str(args.clients + 64))
    try:
        async def run():
            lat, counts, refused = [], [0], []

            async def one():
                try:
                    await http_client(front.port, None, counts, lat, args.calls_each)
                except (Refused, OSError) as e:
                    refused.append(str(e))
            await asyncio.gather(*(one() for _ in range(args.clients)))
            return lat, counts[0], refused
        c0, t0 = cpu(), time.monotonic()
        lat, n, refused = asyncio.run(run())
        wall = time.monotonic() - t0
        print("b) %d HTTP clients at once, %d calls each: %d calls in %.1f s (%.0f/s), "
              "%d clients refused%s; latency p50 %.1f ms, p99 %.1f ms (%.2f x p50), max %.1f ms; "
              "client CPU %.2f" % (
                  args.clients, args.calls_each, n, wall, n / wall, len(refused),
                  (" (" + ", ".join(sorted(set(refused))[:3]) + ")") if refused else "",
                  pct(lat, .5) * 1e3, pct(lat, .99) * 1e3, pct(lat, .99) / pct(lat, .5),
                  max(lat) * 1e3, (cpu() - c0) / wall))
    finally:
        front.stop()


def bench_c(args, build, d, tmp):
    front = Front(build, d.sock, tmp, "--connections", str(args.idle + 64))
    try:
        async def run():
            r, w = await asyncio.open_connection("127.0.0.1", front.port)
            await http_exchange(r, w, http_discover(0))  # warm: one connection's worth
            w.close()
            rss0, pss0 = front.mem_kb()
            conns = []
            for i in range(args.idle):
                r, w = await asyncio.open_connection("127.0.0.1", front.port)
                status, _ = await http_exchange(r, w, http_discover(i))
                if status != 200:
                    raise SystemExit("server/discover: %d" % status)
                conns.append(w)
            rss1, pss1 = front.mem_kb()
            for w in conns:
                w.close()
            return rss0, pss0, rss1, pss1
        rss0, pss0, rss1, pss1 = asyncio.run(run())
        print("c) %d idle keep-alive connections: front Rss %d -> %d KiB, Pss %d -> %d KiB: "
              "%.1f KiB Rss, %.1f KiB Pss a connection" % (
                  args.idle, rss0, rss1, pss0, pss1, (rss1 - rss0) / args.idle,
                  (pss1 - pss0) / args.idle))
    finally:
        front.stop()


def bench_d(build):
    exe = os.path.join(build, "bench", "jwt_verify")
    print("d) " + subprocess.run([exe], capture_output=True, text=True, check=True)
          .stdout.strip().replace("\n", "\n   "))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--only", default="a,b,c,d")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--conc", default="1,16,256")
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--calls-each", type=int, default=3)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--front-exe", help="the front's toolexec (default: BUILD's)")
    ap.add_argument("--front-arg", action="append", default=[],
                    help="another argument of toolexec mcp (repeat it for more)")
    args = ap.parse_args()
    args.conc = [int(x) for x in args.conc.split(",")]
    only = set(args.only.split(","))
    FRONT_ARGS.extend(args.front_arg)
    if args.front_exe:
        FRONT_EXE.append(os.path.abspath(args.front_exe))
    build = os.path.abspath(args.build)
    raise_nofile()  # the front inherits it: --connections past 1024
    print("toolexec mcp --listen vs the socket; %d CPUs, load average %s" % (
        os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    tmp = tempfile.mkdtemp(prefix="te-mcphttp-bench-")
    os.chmod(tmp, 0o755)
    d = Daemon(build, tmp)
    try:
        if "a" in only:
            front = Front(build, d.sock, tmp, "--connections", str(max(args.conc) + 64))
            try:
                bench_a(args, d, front)
            finally:
                front.stop()
        if "b" in only:
            bench_b(args, build, d, tmp)
        if "c" in only:
            bench_c(args, build, d, tmp)
        if "d" in only:
            bench_d(build)
    finally:
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("load average after: " + " ".join("%.2f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    sys.exit(main())
