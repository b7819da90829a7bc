#!/usr/bin/env python3
"""bench/confine.py - what a call's file-system view costs, in one run.

  bench/confine.py [--build DIR] [--calls N] [--rounds R]

Starts one toolexecd (work directory on /dev/shm) whose tools run the same
trivial framed worker (contrib/tools/c/echo): "echo" with the default view,
"echo_host" with "filesystem": "host", "echo_min" with "root": "minimal".
Then, serial and at concurrency 16, R rounds interleaved (so drift on the
host hits all alike), each of N calls:

  plain     a bare fork+exec+pipe loop of the worker (bench --plain)
  default   one batch of N calls of "echo" through the daemon (toolexec run)
  host      the same with "echo_host"
  bwrap     bubblewrap running the worker in the plain loop's place:
            bwrap --ro-bind / / --tmpfs /tmp --dev /dev --proc /proc
                  --unshare-all --die-with-parent WORKER
  nsfloor   (root) the plain loop with each worker in a new mount and PID
            namespace, every mount private and a /proc of its own, and no
            more (bench BENCH_NS=1): the kernel's share of any per-call view
            with its own /proc, without a daemon, a view or a filter

It prints the median per-call wall time of each and the ratios default /
plain, default / host, bwrap / default, bwrap / plain (no confinement that
costs at least the plain loop can be more than that many times cheaper than
bwrap) and nsfloor / plain (no view can cost less than that), then the
daemon's spawn_us_mean per tool (the loop's time from clone() to exec: the
view is built there).
Goals: default <= 1.25 x plain; bwrap >= 5 x default.
A benchmark to run by hand, never a pass/fail test.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BWRAP = ["--ro-bind", "/", "/", "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc",
         "--unshare-all", "--die-with-parent"]


def run(cmd, env=None):
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    daemon = os.path.join(build, "daemon", "toolexecd")
    cli = os.path.join(build, "daemon", "cli", "toolexec")
    bench = os.path.join(build, "bench", "bench")
    worker = os.path.join(build, "contrib", "tools", "c", "echo")
    bwrap = shutil.which("bwrap")
    tmp = tempfile.mkdtemp(prefix="te-confine-")
    os.chmod(tmp, 0o755)
    work = tempfile.mkdtemp(prefix="te-confine-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                            else None)
    os.chmod(work, 0o755)
    tools = os.path.join(tmp, "tools")
    os.mkdir(tools, 0o755)
    # the minimal root needs the build tree for the library beside the worker
    minimal = {"root": "minimal", "read": [os.path.realpath(build)]}
    for name, fs in (("echo", None), ("echo_host", "host"), ("echo_min", minimal)):
        d = {"name": name, "command": [worker]}
        if fs:
            d["filesystem"] = fs
        with open(os.path.join(tools, name + ".json"), "w") as f:
            json.dump(d, f)
    sock = os.path.join(tmp, "s.sock")
    proc = subprocess.Popen([daemon, "--socket", sock, "--tools", tools, "--work-dir", work,
                             "--log-level", "warn", "--max-batch-calls", "1000000"])
    try:
        for _ in range(500):
            if os.path.exists(sock):
                break
            time.sleep(0.01)
        batches = {}
        for tool in ("echo", "echo_host", "echo_min"):
            for conc in (1, 16):
                path = os.path.join(tmp, "%s-%d.json" % (tool, conc))
                with open(path, "w") as f:
                    json.dump({"op": "run", "max_concurrency": conc, "calls": [
                        {"id": "c%d" % i, "name": tool, "arguments": {}}
                        for i in range(a.calls)]}, f)
                batches[tool, conc] = path
        kinds = {
            "plain": lambda c: [bench, "--plain", worker, str(a.calls), str(c)],
            "default": lambda c: [cli, "-s", sock, "run", "-j", batches["echo", c]],
            "host": lambda c: [cli, "-s", sock, "run", "-j", batches["echo_host", c]],
            "minimal": lambda c: [cli, "-s", sock, "run", "-j", batches["echo_min", c]],
        }
        if bwrap:
            kinds["bwrap"] = lambda c: [bench, "--plain", worker, str(a.calls), str(c)]
        if os.geteuid() == 0:
            kinds["nsfloor"] = lambda c: [bench, "--plain", worker, str(a.calls), str(c)]
        wrap_env = dict(os.environ, BENCH_WRAP=" ".join([bwrap] + BWRAP)) if bwrap else None
        envs = {"bwrap": wrap_env, "nsfloor": dict(os.environ, BENCH_NS="1")}
        print("toolexecd %s, %d CPUs, %s; %d calls x %d rounds" % (
            subprocess.run([daemon, "--version"], stdout=subprocess.PIPE).stdout.decode()
            .split()[1], os.cpu_count(), os.uname().release, a.calls, a.rounds))
        for conc in (1, 16):
            times = {k: [] for k in kinds}
            for k, cmd in kinds.items():  # warm-up
                run(cmd(conc)[:4] + ["20", str(conc)] if k in ("plain", "bwrap", "nsfloor")
                    else cmd(conc), env=envs.get(k))
            for _ in range(a.rounds):
                for k, cmd in kinds.items():
                    times[k].append(run(cmd(conc), env=envs.get(k)) / a.calls * 1e6)
            med = {k: statistics.median(v) for k, v in times.items()}
            print("\nconcurrency %d: median us per call (min-max)" % conc)
            for k, v in times.items():
                print("  %-8s %9.1f  (%.1f-%.1f)" % (k, med[k], min(v), max(v)))
            print("  default / plain   %.2f" % (med["default"] / med["plain"]))
            print("  host / plain      %.2f" % (med["host"] / med["plain"]))
            print("  default / host    %.2f" % (med["default"] / med["host"]))
            print("  minimal / host    %.2f" % (med["minimal"] / med["host"]))
            if bwrap:
                print("  bwrap / default   %.2f" % (med["bwrap"] / med["default"]))
                print("  bwrap / plain     %.2f" % (med["bwrap"] / med["plain"]))
            if "nsfloor" in med:
                print("  nsfloor / plain   %.2f" % (med["nsfloor"] / med["plain"]))
        st = json.loads(subprocess.run([cli, "-s", sock, "stats", "-j"], check=True,
                                       stdout=subprocess.PIPE).stdout)
        print("\nclone() to exec in the daemon's loop, mean us per call (spawn_us_mean):")
        for tool in ("echo", "echo_host", "echo_min"):
            print("  %-10s %7.1f" % (tool, st["tools"][tool]["spawn_us_mean"]))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
