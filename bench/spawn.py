#!/usr/bin/env python3
"""bench/spawn.py - the spawn path's goals, as ratios from one run.

  bench/spawn.py [--build DIR] [--calls N] [--rounds R] [--inflight K]

Three daemons run side by side, starting calls through the spawner
(daemon/run/spawner.c, the default), through the spawner with two spares per
tool (spares.c, --spares 2), and with --spawner no (the loop starts them, as before the
spawner), each with the C echo worker under the default
confinement. R rounds, interleaved so drift hits all alike, of N calls:

  plain      a bare fork+exec+pipe loop of the worker (bench --plain)
  nsfloor    (root) the same with each worker in a new mount and PID
             namespace, every mount private, a /proc of its own (BENCH_NS=1)
  sandbox    (root) the confinement floor: the same loop starting each call
             in the sandbox the daemon would build, by the daemon's own code
             (bench/sandboxfloor.c: a uid of its own, the view, Landlock, the
             filter, the init...), no loop, spawner or messages; at
             concurrency 1 and 16 only (its time is the loop's, as the
             program measures it, without its start-up)
  spawner    one batch of N calls through the spawner daemon (toolexec run)
  spares     the same with --spares 2 (sandboxes prepared ahead, spares.c)
  loop       the same through the --spawner no daemon
  pool       a Python asyncio pool doing a bare fork+exec of the worker, one
             request frame each (no isolation)

at concurrency 1 and 16 (per-call time; spawner / sandbox is what the
daemon adds above its own confinement, sandbox / plain what the
confinement costs; bench/floor_layers.py breaks the floor down by layer),
and calls/s at 1, 2, 4, 16, 64, 256. Then, for each daemon, K calls that sleep started in one batch (the
time until the last has started), and the throughput of echo calls while
they are in flight against none in flight.

Goals: spawner <= 1.15 x plain serial, <= 1.10 x nsfloor at 16;
calls/s >= the pool's at every concurrency, c256 >= 0.9 x c16; with 1,000
in flight >= 0.9 x the throughput of none, 1,000 started in <= 1 s.
A benchmark to run by hand, never a pass/fail test.
"""

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def floor(cmd):
    """sandboxfloor's own time for its calls (its start-up not counted)."""
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return float(out.split()[-1]) * 1e-6


def timed(cmd, env=None):
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.monotonic() - t0


async def pool_run(worker, calls, conc):
    sem = asyncio.Semaphore(conc)
    body = b'{"tool":"echo","arguments":{"x":1}}'
    frame = struct.pack(">I", len(body)) + body

    async def one():
        async with sem:
            p = await asyncio.create_subprocess_exec(worker, stdin=subprocess.PIPE,
                                                     stdout=subprocess.PIPE)
            await p.communicate(frame)

    await asyncio.gather(*(one() for _ in range(calls)))


def pool(worker, calls, conc):
    t0 = time.monotonic()
    asyncio.run(pool_run(worker, calls, conc))
    return time.monotonic() - t0


class Daemon:
    def __init__(self, build, tmp, name, args):
        self.dir = os.path.join(tmp, name)
        os.mkdir(self.dir, 0o755)
        tools = os.path.join(self.dir, "tools")
        os.mkdir(tools, 0o755)
        worker = os.path.join(build, "contrib", "tools", "c", "echo")
        tw = os.path.join(build, "tests", "workers", "testworker")
        for n, cmd, extra in (("echo", [worker], {}),
                              ("sleep", [tw, "sleep"], {"timeout_ms": 600000}),
                              ("sleep100", [tw, "sleep"], {"timeout_ms": 100})):
            with open(os.path.join(tools, n + ".json"), "w") as f:
                json.dump(dict({"name": n, "command": cmd}, **extra), f)
        self.work = tempfile.mkdtemp(prefix="te-spawn-", dir="/dev/shm"
                                     if os.path.isdir("/dev/shm") else None)
        os.chmod(self.work, 0o755)
        self.sock = os.path.join(self.dir, "s.sock")
        self.proc = subprocess.Popen(
            [os.path.join(build, "daemon", "toolexecd"), "--socket", self.sock, "--tools", tools,
             "--work-dir", self.work, "--log-level", "warn", "--max-batch-calls", "1000000",
             "--max-workers", "1100", "--max-queued-calls", "1000000"] + args)
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None:
                raise SystemExit("toolexecd %s did not start" % name)
            time.sleep(0.01)
        self.batches = {}

    def batch(self, tool, n, conc):
        key = (tool, n, conc)
        if key not in self.batches:
            path = os.path.join(self.dir, "%s-%d-%d.json" % key)
            with open(path, "w") as f:
                json.dump({"op": "run", "max_concurrency": conc, "calls": [
                    {"id": "c%d" % i, "name": tool, "arguments": {}} for i in range(n)]}, f)
            self.batches[key] = path
        return self.batches[key]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)


def batch_kind(cli, d, tool, calls):
    """A kind of per_call(): one batch of calls calls of tool through
    daemon d (toolexec run), timed whole, at the concurrency given."""
    return lambda conc: timed([cli, "-s", d.sock, "run", "-j", d.batch(tool, calls, conc)])


def per_call(kinds, names, conc, rounds, calls):
    """Each kind of names (a function of the concurrency that runs calls
    calls and returns its seconds) once to warm up, then rounds rounds in
    turn: us per call of each round, by name."""
    times = {k: [] for k in names}
    for k in times:  # warm-up
        kinds[k](conc)
    for _ in range(rounds):
        for k in times:
            times[k].append(kinds[k](conc) / calls * 1e6)
    return times


def lines(sock):
    buf = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield json.loads(line)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int([l for l in f if l.startswith("VmRSS:")][0].split()[1])


def lateness(d, n):
    """n calls that time out after 100 ms, at once: how late each ended
    (its duration_ms past 100), sorted."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(d.sock)
    req = {"op": "run", "batch": "late", "max_concurrency": n,
           "calls": [{"id": "t%d" % i, "name": "sleep100", "arguments": {}} for i in range(n)]}
    s.sendall(json.dumps(req).encode() + b"\n")
    late = []
    for ev in lines(s):
        if ev.get("event") == "tool_execution_completed":
            late.append(ev["duration_ms"] - 100)
        if ev.get("batch") == "late" and ev.get("event") in ("batch_completed", "error"):
            break
    s.close()
    return sorted(late)


def inflight(d, cli, k, calls):
    """Seconds to start k sleeping calls; echo calls/s with them in flight
    and with none."""
    none = calls / timed([cli, "-s", d.sock, "run", "-j", d.batch("echo", calls, 16)])
    rss0 = rss_kb(d.proc.pid)
    s = socket.socket(socket.AF_UNIX)
    s.connect(d.sock)
    req = {"op": "run", "batch": "hold", "max_concurrency": k,
           "calls": [{"id": "s%d" % i, "name": "sleep", "arguments": {}} for i in range(k)]}
    t0 = time.monotonic()
    s.sendall(json.dumps(req).encode() + b"\n")
    started = 0
    for ev in lines(s):
        if ev.get("event") == "tool_execution_started":
            started += 1
            if started == k:
                break
    # "started" is said when a call's worker is made; with the spawner its
    # process may still be queued there: one more call, queued behind them,
    # completes once all have really started
    timed([cli, "-s", d.sock, "run", "-j", d.batch("echo", 1, 1)])
    start_s = time.monotonic() - t0
    per_call_kb = (rss_kb(d.proc.pid) - rss0) / k
    busy = calls / timed([cli, "-s", d.sock, "run", "-j", d.batch("echo", calls, 16)])
    s.sendall(b'{"op":"cancel","batch":"hold"}\n')
    for ev in lines(s):
        if ev.get("batch") == "hold" and ev.get("event") in ("batch_completed", "error"):
            break
    s.close()
    return start_s, none, busy, per_call_kb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=1000)
    ap.add_argument("--no-sweep", action="store_true",
                    help="only the in-flight and timeout figures")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    cli = os.path.join(build, "daemon", "cli", "toolexec")
    bench = os.path.join(build, "bench", "bench")
    worker = os.path.join(build, "contrib", "tools", "c", "echo")
    tmp = tempfile.mkdtemp(prefix="te-spawnb-")
    os.chmod(tmp, 0o755)
    ds = {"spawner": Daemon(build, tmp, "spawner", []),
          "spares": Daemon(build, tmp, "spares", ["--spares", "2"]),
          "loop": Daemon(build, tmp, "loop", ["--spawner", "no"])}
    try:
        print("toolexecd, %d CPUs, %s; %d calls x %d rounds" % (
            os.cpu_count(), os.uname().release, a.calls, a.rounds))
        kinds = {
            "plain": lambda c: timed([bench, "--plain", worker, str(a.calls), str(c)]),
            "spawner": batch_kind(cli, ds["spawner"], "echo", a.calls),
            "spares": batch_kind(cli, ds["spares"], "echo", a.calls),
            "loop": batch_kind(cli, ds["loop"], "echo", a.calls),
            "pool": lambda c: pool(worker, a.calls, c),
        }
        if os.geteuid() == 0:
            ns_env = dict(os.environ, BENCH_NS="1")
            kinds["nsfloor"] = lambda c: timed([bench, "--plain", worker, str(a.calls), str(c)],
                                               env=ns_env)
            sfloor = os.path.join(build, "bench", "sandboxfloor")
            kinds["sandbox"] = lambda c: floor([sfloor, worker, str(a.calls), str(c)]) * a.calls
        rates = {}
        for conc in () if a.no_sweep else (1, 2, 4, 16, 64, 256):
            # the floor only where its ratios are printed
            times = per_call(kinds, [k for k in kinds if k != "sandbox" or conc in (1, 16)],
                             conc, a.rounds, a.calls)
            med = {k: statistics.median(v) for k, v in times.items()}
            rates[conc] = {k: 1e6 / v for k, v in med.items()}
            if conc in (1, 16):
                print("\nconcurrency %d: median us per call (min-max)" % conc)
                for k, v in times.items():
                    print("  %-8s %9.1f  (%.1f-%.1f)" % (k, med[k], min(v), max(v)))
                print("  spawner / plain    %.2f" % (med["spawner"] / med["plain"]))
                print("  loop / plain       %.2f" % (med["loop"] / med["plain"]))
                print("  spawner / loop     %.2f" % (med["spawner"] / med["loop"]))
                print("  spares / spawner   %.2f" % (med["spares"] / med["spawner"]))
                if "nsfloor" in med:
                    print("  spawner / nsfloor  %.2f" % (med["spawner"] / med["nsfloor"]))
                    print("  nsfloor / plain    %.2f" % (med["nsfloor"] / med["plain"]))
                    print("  spawner / sandbox  %.2f" % (med["spawner"] / med["sandbox"]))
                    print("  sandbox / plain    %.2f" % (med["sandbox"] / med["plain"]))
        if rates:
            print("\ncalls/s by concurrency (median of %d rounds)" % a.rounds)
            cols = [k for k in kinds if k != "sandbox"]
            print("  conc " + "".join("%10s" % k for k in cols) + "   spawner/pool")
            for conc, r in rates.items():
                print("  %4d " % conc + "".join("%10.0f" % r[k] for k in cols) +
                      "   %.2f" % (r["spawner"] / r["pool"]))
            for k in ("spawner", "spares", "loop"):
                print("  %s c256 / c16: %.2f" % (k, rates[256][k] / rates[16][k]))
        # Lateness first: measured after the in-flight runs, it was the
        # kernel's teardown of their 1,000 cancelled calls' namespaces that
        # it measured, for whichever daemon came first (p99 6-28 ms in runs
        # where it is 4-7 ms alone). Three runs of 20, pooled.
        lates = {}
        for k, d in ds.items():
            lates[k] = sorted(sum((lateness(d, 20) for _ in range(3)), []))
        print("\n%d calls in flight (each sleeping, in one batch; started: until a call "
              "queued behind them is done)" % a.inflight)
        for k, d in ds.items():
            start_s, none, busy, kb = inflight(d, cli, a.inflight, a.calls)
            print("  %-8s started in %.2f s; echo calls/s: %.0f none in flight, %.0f with "
                  "them: %.2f; daemon RSS per call in flight %.1f kB" % (
                      k, start_s, none, busy, busy / none, kb))
        print("\n20 calls timing out at once after 100 ms, 3 times: lateness in ms "
              "(p50, p99, max)")
        for k, late in lates.items():
            print("  %-8s %.1f  %.1f  %.1f" % (k, late[len(late) // 2], late[int(len(late) * 0.99)],
                                                late[-1]))
    finally:
        for d in ds.values():
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
