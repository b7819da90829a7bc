#!/usr/bin/env python3
"""bench/ab.py - two builds of the daemon against each other, pair by pair.

  bench/ab.py BUILD_A BUILD_B [CALLS] [PAIRS] [CONCURRENCY] [TOOL]

Starts a daemon from each build (work directories on /dev/shm) with the C
echo tool ("echo": the default view; "echo_host": "filesystem": "host"),
then runs PAIRS times one batch of CALLS calls of TOOL (default echo) at
CONCURRENCY (default 1) through A and then through B, and prints each
build's median wall time per call and the median of the per-pair ratios
A/B: pairing keeps the ratio meaningful while the host's speed drifts.
A build under /tmp cannot serve: the default view hides /tmp, where its
libtoolexec would be. A benchmark to run by hand, never a pass/fail test.
"""
import json, os, subprocess, sys, tempfile, time, statistics, shutil
A, B = sys.argv[1], sys.argv[2]
calls = int(sys.argv[3]) if len(sys.argv) > 3 else 200
pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 10
conc = int(sys.argv[5]) if len(sys.argv) > 5 else 1
tool = sys.argv[6] if len(sys.argv) > 6 else "echo"
def start(build):
    tmp = tempfile.mkdtemp(prefix="ab-"); os.chmod(tmp, 0o755)
    work = tempfile.mkdtemp(prefix="ab-", dir="/dev/shm"); os.chmod(work, 0o755)
    tools = os.path.join(tmp, "tools"); os.mkdir(tools)
    worker = os.path.join(build, "contrib", "tools", "c", "echo")
    for name, fs in (("echo", None), ("echo_host", "host")):
        d = {"name": name, "command": [worker]}
        if fs: d["filesystem"] = fs
        json.dump(d, open(os.path.join(tools, name + ".json"), "w"))
    sock = os.path.join(tmp, "s.sock")
    p = subprocess.Popen([os.path.join(build, "daemon", "toolexecd"), "--socket", sock, "--tools", tools,
                          "--work-dir", work, "--log-level", "warn", "--max-batch-calls", "1000000"])
    while not os.path.exists(sock): time.sleep(0.01)
    batch = os.path.join(tmp, "b.json")
    json.dump({"op": "run", "max_concurrency": conc, "calls": [{"id": "c%d" % i, "name": tool, "arguments": {}} for i in range(calls)]}, open(batch, "w"))
    cli = os.path.join(build, "daemon", "cli", "toolexec")
    return p, [cli, "-s", sock, "run", "-j", batch], (tmp, work)
def run(cmd):
    t0 = time.monotonic(); subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL); return (time.monotonic() - t0) / calls * 1e6
pa, ca, da = start(A); pb, cb, db = start(B)
try:
    run(ca); run(cb)
    ta, tb, r = [], [], []
    for _ in range(pairs):
        a = run(ca); b = run(cb); ta.append(a); tb.append(b); r.append(a / b)
    print("A %s: median %.0f us/call; B %s: median %.0f us/call; A/B pairs median %.3f (min %.3f max %.3f)" % (
        A, statistics.median(ta), B, statistics.median(tb), statistics.median(r), min(r), max(r)))
finally:
    for p in (pa, pb): p.terminate(); p.wait()
    for d in da + db: shutil.rmtree(d, ignore_errors=True)
