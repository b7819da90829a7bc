"""Soak: SOAK_CALLS calls (default 10,000) mixing every failure mode, run
to completion by 12 clients while 4 more keep sending batches and
disconnecting mid-batch. Afterwards: no zombie, no process left from any call, the daemon's
descriptors back to (not above) their baseline and its RSS within
SOAK_RSS_SLACK_KIB (default 8 MiB: allocator caches) of it, and every
client that stayed got exactly one terminal event per batch with the
spec's event grammar.

Run longer by hand:  SOAK_CALLS=200000 meson test -C build test_soak -t 100
"""

import os
import threading
import unittest

import harness
from harness import Daemon, worker_tool, script_tool, WAIT

CALLS = int(os.environ.get("SOAK_CALLS", "10000"))
RSS_SLACK_KIB = int(os.environ.get("SOAK_RSS_SLACK_KIB", str(8 * 1024)))
CLIENTS = 16
LEAVERS = CLIENTS // 4
BATCH = 25

# (tool name, arguments, acceptable result keys)
MODES = [
    ("echo", {"x": 1}, "ok"),
    ("raise", {}, "tool_error"),
    ("exit3", {}, "tool_error"),
    ("segv", {}, "tool_error"),
    ("garbage", {}, "tool_error"),
    ("huge", {}, "tool_error"),
    ("badjson", {}, "tool_error"),
    ("truncated", {}, "tool_error"),
    ("sleepy", {}, "tool_error"),
    ("error", {}, "error"),
    ("halt", {}, "halt"),
    ("ask", {}, "ask_user"),
    ("grandchild", {"setsid": True}, "ok"),
    ("flood", {"kb": 256}, "tool_error"),
    ("big", {"n": 200000}, "ok"),
    ("plain", {}, "ok"),
    ("manual", {}, "tool_error"),
    ("echo", {"y": 2}, "ok"),
]


def tools(token):
    return [
        worker_tool("echo", "echo"),
        worker_tool("raise", "raise"),
        worker_tool("exit3", "exit", "3"),
        worker_tool("segv", "segv"),
        worker_tool("garbage", "garbage"),
        worker_tool("huge", "huge-prefix"),
        worker_tool("badjson", "badjson"),
        worker_tool("truncated", "truncated"),
        worker_tool("sleepy", "sleep", timeout_ms=100),
        worker_tool("error", "error"),
        worker_tool("halt", "halt"),
        worker_tool("ask", "ask"),
        # every grandchild carries the soak's token: none may survive
        worker_tool("grandchild", "grandchild", timeout_ms=5000),
        worker_tool("flood", "stderr-flood"),
        worker_tool("big", "big-output"),
        script_tool("plain", "plain-json.sh"),
        {"name": "manual", "description": "manual mode"},
    ]


def calls_for(seq, n):
    out = []
    for i in range(n):
        name, args, _ = MODES[(seq + i) % len(MODES)]
        a = dict(args)
        if name == "grandchild":
            a["token"] = SoakTest.token
        out.append({"id": "c%d" % i, "name": name, "arguments": a})
    return out


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def fd_kinds(pid, prefix):
    n = 0
    for f in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, f)).startswith(prefix)
        except OSError:
            pass
    return n


def socket_count(pid):
    return fd_kinds(pid, "socket:")


def pipe_count(pid):
    return fd_kinds(pid, "pipe:")


def sanitized(pid):
    """ASan keeps freed memory in quarantine: RSS says nothing there (its
    LeakSanitizer checks the daemon at exit instead)."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def zombies_of(pid):
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z" and int(fields[1]) == pid:
            out.append(int(name))
    return out


class SoakTest(unittest.TestCase):
    token = harness.new_token("soak")

    def test_soak(self):
        d = Daemon(tools=tools(self.token))
        self.addCleanup(d.stop)
        pid = d.proc.pid
        start_pipes = pipe_count(pid)  # the loop's own; no worker has run yet
        # the listening socket, and the spawner's socket (spawner.c) where
        # calls are started by one
        start_sockets = socket_count(pid)

        # warm up, then take the baseline once the warm-up client is gone
        warm = d.client()
        warm.run(calls_for(0, len(MODES)), batch="warm", timeout=WAIT * 2)
        warm.close()
        d.clients.remove(warm)
        harness.deadline_wait(lambda: not harness.pids_with_token(self.token),
                              what="warm-up grandchildren to be gone")
        harness.deadline_wait(lambda: socket_count(pid) == start_sockets and pipe_count(pid) == start_pipes,
                              what="every connection and worker pipe to be closed")
        base_fds, base_rss = fd_count(pid), rss_kib(pid)

        lock = threading.Lock()
        state = {"issued": 0, "batches": 0, "left": 0, "errors": []}

        def take(n):
            with lock:
                if state["issued"] >= CALLS:
                    return 0
                n = min(n, CALLS - state["issued"])
                state["issued"] += n
                return n

        def stayer(k):
            try:
                c = harness.Client(d.sock)
                seq = k
                while True:
                    n = take(BATCH)
                    if not n:
                        break
                    res = c.run(calls_for(seq, n), batch="s%d-%d" % (k, seq), timeout=WAIT * 4)
                    if res.terminal["event"] != "batch_completed":
                        raise AssertionError("batch ended with %r" % res.terminal)
                    for i, call in enumerate(res.calls):
                        want = MODES[(seq + i) % len(MODES)][2]
                        got = res.result(call["id"])
                        if want not in got:
                            raise AssertionError("%s: expected %s, got %r"
                                                 % (call["name"], want, got))
                    seq += n
                    with lock:
                        state["batches"] += 1
                c.close()
            except BaseException as e:  # reported by the main thread
                with lock:
                    state["errors"].append("client %d: %r" % (k, e))

        def leaver(k):
            # leavers run beside the stayers until those have run CALLS calls
            try:
                seq = k
                while True:
                    with lock:
                        if state["issued"] >= CALLS:
                            break
                    n = BATCH
                    c = harness.Client(d.sock)
                    c.start_batch(calls_for(seq, n), batch="l%d-%d" % (k, seq))
                    # leave once the batch is under way
                    c.recv_for(lambda e: e["event"] == "tool_execution_completed",
                               timeout=WAIT * 4)
                    c.close()
                    seq += n
                    with lock:
                        state["left"] += 1
            except BaseException as e:
                with lock:
                    state["errors"].append("leaver %d: %r" % (k, e))

        threads = [threading.Thread(target=leaver if k < LEAVERS else stayer, args=(k,))
                   for k in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(state["errors"], [])
        self.assertGreater(state["batches"], 0)
        self.assertGreater(state["left"], 0)

        # Everything settles: no process of any call, no zombie, descriptors
        # and memory back to the baseline.
        harness.deadline_wait(lambda: not harness.pids_with_token(self.token),
                              timeout=WAIT, what="every grandchild to be gone")
        harness.deadline_wait(lambda: fd_count(pid) <= base_fds, timeout=WAIT,
                              what="descriptors back to %d (now %d)" % (base_fds, fd_count(pid)))
        self.assertEqual(zombies_of(pid), [])
        rss = rss_kib(pid)
        if not sanitized(pid):
            self.assertLessEqual(rss, base_rss + RSS_SLACK_KIB,
                                 "RSS %d KiB after the soak, baseline %d KiB" % (rss, base_rss))
        print("soak: %d calls, %d batches kept, %d left mid-batch; fds %d; RSS %d -> %d KiB"
              % (state["issued"], state["batches"], state["left"], base_fds, base_rss, rss))


if __name__ == "__main__":
    unittest.main()
