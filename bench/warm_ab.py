#!/usr/bin/env python3
"""bench/warm_ab.py - two builds' warm calls against each other, pair by pair.

  bench/warm_ab.py BUILD_A BUILD_B [CALLS] [PAIRS] [TOOL] [CONCURRENCY]

Starts a daemon from each build (work directories on /dev/shm) with the
bundled calc and echo definitions (BUILD/contrib/tools.d), each also as a
warm tool ("calc_warm", "echo_warm"), then runs PAIRS times one batch of
CALLS calls of TOOL (default calc_warm) at CONCURRENCY (default 1) through
A and through B, in alternating order, and prints each build's median time
per call and the median of the per-pair ratios A/B: pairing keeps the ratio
meaningful while the host's speed drifts (bench/ab.py does the same for cold
calls). It warns when a warm tool's calls did not all run warm. Builds must
lie outside /tmp (the default view hides it). A benchmark to run by hand,
never a pass/fail test.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def start(build, tool, calls, conc):
    tmp = tempfile.mkdtemp(prefix="wab-")
    os.chmod(tmp, 0o755)
    tools = os.path.join(tmp, "tools")
    os.mkdir(tools)
    defs = os.path.join(build, "contrib", "tools.d")
    for base in ("calc", "echo"):
        with open(os.path.join(defs, base + ".json")) as f:
            d = json.load(f)
        for name, extra in ((base, {}), (base + "_warm", {"start": "warm"})):
            with open(os.path.join(tools, name + ".json"), "w") as f:
                json.dump(dict(d, name=name, **extra), f)
    work = tempfile.mkdtemp(prefix="wab-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    os.chmod(work, 0o755)
    sock = os.path.join(tmp, "s.sock")
    p = subprocess.Popen([os.path.join(build, "daemon", "toolexecd"), "--socket", sock,
                          "--tools", tools, "--work-dir", work, "--log-level", "error",
                          "--max-batch-calls", "1000000"])
    while not os.path.exists(sock):
        if p.poll() is not None:
            raise SystemExit("%s: the daemon exited with %s" % (build, p.returncode))
        time.sleep(0.01)
    args = {"expression": "1+2"} if tool.startswith("calc") else {"x": 1}
    batch = os.path.join(tmp, "b.json")
    with open(batch, "w") as f:
        json.dump({"op": "run", "max_concurrency": conc, "calls": [
            {"id": "c%d" % i, "name": tool, "arguments": args} for i in range(calls)]}, f)
    return p, [os.path.join(build, "daemon", "cli", "toolexec"), "-s", sock, "run", "-j", batch], \
        (tmp, work)


def run(cmd, calls):
    t0 = time.monotonic()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True).stdout
    return (time.monotonic() - t0) / calls * 1e3, out


def main():
    a, b = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    tool = sys.argv[5] if len(sys.argv) > 5 else "calc_warm"
    conc = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    pa, ca, da = start(a, tool, calls, conc)
    pb, cb, db = start(b, tool, calls, conc)
    try:
        time.sleep(1.5)  # the templates start
        for name, cmd in (("A", ca), ("B", cb)):
            out = run(cmd, calls)[1]
            warm = out.count(b'"start":"warm"') + out.count(b'"start": "warm"')
            if tool.endswith("_warm") and warm < calls:
                print("warning: %s ran %d of %d calls warm" % (name, warm, calls))
        ta, tb, r = [], [], []
        for i in range(pairs):
            if i % 2 == 0:
                x, y = run(ca, calls)[0], run(cb, calls)[0]
            else:
                y, x = run(cb, calls)[0], run(ca, calls)[0]
            ta.append(x)
            tb.append(y)
            r.append(x / y)
        print("%s at concurrency %d: A %.3f ms, B %.3f ms per call (medians of %d pairs of %d); "
              "A/B median %.3f (%.2f-%.2f)" % (tool, conc, statistics.median(ta),
                                              statistics.median(tb), pairs, calls,
                                              statistics.median(r), min(r), max(r)))
    finally:
        for p in (pa, pb):
            p.terminate()
            p.wait()
        for d in da + db:
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
