#!/usr/bin/env python3
"""bench/loopcpu.py - what the daemon itself spends per cold call, builds
against each other.

  bench/loopcpu.py BUILD... [--calls N] [--rounds R] [--concurrency C] [--strace]

Starts a daemon from each build (work directories on /dev/shm) with the C
echo tool under the default confinement, then runs R rounds of one batch of
N calls through each, in turn (the order rotates each round, so that drift
hits all alike), and prints per build the medians per call of: the wall
time, the CPU time of the libuv loop's thread (its schedstat, on-CPU time in
ns), of all the daemon's threads, and of the spawner process
(toolexecd-spawn, its own thread only: a call's set-up before its exec runs
in the call's own process). --strace instead counts the system calls of the
loop's thread and of the spawner over one batch each (strace -c, its table
kept in /tmp/loopcpu-BUILD-WHO.txt): per call. A build under /tmp cannot
serve: the default view hides /tmp, where its libtoolexec would be. A
benchmark to run by hand, never a pass/fail test.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("builds", nargs="+")
ap.add_argument("--calls", type=int, default=200)
ap.add_argument("--rounds", type=int, default=12)
ap.add_argument("--concurrency", type=int, default=1)
ap.add_argument("--strace", action="store_true")
a = ap.parse_args()


def start(build):
    tmp = tempfile.mkdtemp(prefix="loopcpu-"); os.chmod(tmp, 0o755)
    work = tempfile.mkdtemp(prefix="loopcpu-", dir="/dev/shm"); os.chmod(work, 0o755)
    tools = os.path.join(tmp, "tools"); os.mkdir(tools)
    worker = os.path.join(build, "contrib", "tools", "c", "echo")
    json.dump({"name": "echo", "command": [worker]}, open(os.path.join(tools, "echo.json"), "w"))
    sock = os.path.join(tmp, "s.sock")
    p = subprocess.Popen([os.path.join(build, "daemon", "toolexecd"), "--socket", sock, "--tools", tools,
                          "--work-dir", work, "--log-level", "warn", "--max-batch-calls", "1000000"])
    while not os.path.exists(sock):
        time.sleep(0.01)
    batch = os.path.join(tmp, "b.json")
    json.dump({"op": "run", "max_concurrency": a.concurrency,
               "calls": [{"id": "c%d" % i, "name": "echo", "arguments": {"x": 1}} for i in range(a.calls)]},
              open(batch, "w"))
    cmd = [os.path.join(build, "daemon", "cli", "toolexec"), "-s", sock, "run", "-j", batch]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)  # warm-up; the spawner is up
    spawner = [int(c) for c in open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()
               if open("/proc/%s/comm" % c).read().strip() == "toolexecd-spawn"][0]
    return {"build": build, "p": p, "spawner": spawner, "cmd": cmd, "dirs": (tmp, work)}


def oncpu(pid, tid):
    return int(open("/proc/%d/task/%d/schedstat" % (pid, tid)).read().split()[0])


def threads(pid):
    return sum(oncpu(pid, int(t)) for t in os.listdir("/proc/%d/task" % pid))


def batch(d):
    pid, sp = d["p"].pid, d["spawner"]
    l0, a0, s0 = oncpu(pid, pid), threads(pid), oncpu(sp, sp)
    t0 = time.monotonic()
    subprocess.run(d["cmd"], check=True, stdout=subprocess.DEVNULL)
    w = time.monotonic() - t0
    l1, a1, s1 = oncpu(pid, pid), threads(pid), oncpu(sp, sp)
    n = a.calls
    return {"wall": w / n * 1e6, "loop": (l1 - l0) / n / 1e3, "all": (a1 - a0) / n / 1e3,
            "spawner": (s1 - s0) / n / 1e3}


def counted(d, who, pid):
    out = "/tmp/loopcpu-%s-%s.txt" % (d["build"].strip("/").replace("/", "_"), who)
    st = subprocess.Popen(["strace", "-c", "-o", out, "-p", str(pid)], stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached
    batch(d)
    st.terminate()
    st.wait()
    total = [l for l in open(out) if l.split() and l.split()[-1] == "total"]
    return int(total[0].split()[3]) / a.calls if total else float("nan")


ds = []
try:
    for b in a.builds:
        ds.append(start(b))
    if a.strace:
        for d in ds:
            print("%-40s loop %.1f, spawner %.1f system calls/call" % (
                d["build"], counted(d, "loop", d["p"].pid), counted(d, "spawner", d["spawner"])))
        sys.exit(0)
    res = [[] for _ in ds]
    for r in range(a.rounds):
        order = list(range(len(ds)))
        order = order[r % len(ds):] + order[:r % len(ds)]
        for k in order:
            res[k].append(batch(ds[k]))
    for k, d in enumerate(ds):
        m = {key: statistics.median(x[key] for x in res[k]) for key in res[k][0]}
        print("%-40s wall %7.1f  loop %6.1f  all threads %6.1f  spawner %6.1f  us/call" % (
            d["build"], m["wall"], m["loop"], m["all"], m["spawner"]))
finally:
    for d in ds:
        d["p"].terminate()
        d["p"].wait()
        for x in d["dirs"]:
            shutil.rmtree(x, ignore_errors=True)
