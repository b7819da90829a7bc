"""A flood of calls of an MCP server's tool ("mcp_server", "instance":
"call": a fresh server per call) through the real daemon, root and
unprivileged, and a fork bomb of a server. The server is our own
(tests/mcp_servers/odd_server.py, Python): what is measured is what the
daemon keeps, not the server.

- 1,000 calls (TE_MCP_FLOOD_CALLS) over 16 connections, after a warm-up of
  the same shape: every call answered; afterwards the daemon's descendants
  (its spawner and the spares it holds ready), its descriptors
  (/proc/PID/fd) and the uids it lends (a range of its own under root) are
  back to where they were before the flood, no process of the server is
  left, and its resident memory is within RSS_SLACK_KIB of what it was
  after the warm-up (malloc keeps what it has touched: the bound is the
  figure, not zero);
- a fork bomb (a server that forks until refused, each child keeping its
  slot and the server's stdout) is held to the definition's
  limits.processes, answered as the call's handler_exit naming the
  refusal (the server's last words), and every process of it reaped; with a
  cgroup per call (where the pids controller is delegated: SKIP here
  otherwise), its cause names the limit, pids.max.
"""
import os
import threading
import unittest

import harness
from test_backpressure import vm_rss_kib
from test_cgroup import CgroupCase, controllers

SRV = os.path.realpath(os.path.join(harness.HERE, "..", "mcp_servers", "odd_server.py"))
PY = "/usr/bin/python3"
CALLS = int(os.environ.get("TE_MCP_FLOOD_CALLS", "1000"))
CONNS = 16
WARMUP = 4 * CONNS
RSS_SLACK_KIB = 4096
# under root the calls' uids come from this range, no other daemon's
UIDS = (1879600000, 1879600063)


def server(name, token, **fields):
    d = {"name": name, "mcp_server": {"command": [PY, SRV, token]}, "timeout_ms": 30000}
    d.update(fields)
    return d


def descendants(pid):
    """Every process below pid, by /proc's parent links."""
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    s = f.read()
            except OSError:
                continue
            ppid = int(s[s.rindex(")") + 2:].split()[1])
            kids.setdefault(ppid, []).append(int(p))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


# what stays below the daemon between calls: its spawner and its spares
STANDING = ("toolexecd-spawn", "toolexecd-spare")


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None  # gone: stands for nothing


def settled(pid):
    """No process of a call is left below pid: each is one that stays."""
    return all(comm(p) in STANDING + (None,) for p in descendants(pid))


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def uids_in(lo, hi):
    """Processes whose real or effective uid is in [lo, hi]."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/status" % p) as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            ids = [int(x) for x in line.split()[1:3]]
                            if any(lo <= u <= hi for u in ids):
                                out.append(int(p))
                            break
            except OSError:
                continue
    return out


# a server's text answer: its content whole (the bridge's ok value)
HI = {"ok": {"content": [{"type": "text", "text": "hi"}]}}


def flood(d, name, calls):
    """calls one-call batches of name over CONNS connections at once; the
    results that were not HI (empty when all were)."""
    bad, lock = [], threading.Lock()
    share = [calls // CONNS + (1 if i < calls % CONNS else 0) for i in range(CONNS)]

    def one(n):
        c = harness.Client(d.sock)
        try:
            for _ in range(n):
                b = c.start_batch([{"id": "c", "name": name, "arguments": {"text": "hi"}}])
                done = [e for e in c.recv_batch(b, timeout=120 * harness.SCALE)
                        if e["event"] == "tool_execution_completed"]
                if not done or done[0]["result"] != HI:
                    with lock:
                        bad.append(done[0]["result"] if done else "no completion")
        except Exception as e:  # noqa: BLE001 - said in the failure
            with lock:
                bad.append(repr(e))
        finally:
            c.close()

    threads = [threading.Thread(target=one, args=(n,)) for n in share]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return bad


class Flood:
    def test_flood_leaves_nothing(self):
        token = harness.new_token("mcpflood")
        d = self.daemon([server("odd", token)])
        try:
            c = d.client()
            harness.deadline_wait(lambda: any(t["name"] == "odd.echo"
                                              for t in c.tools()["tools"]),
                                  what="odd's tools listed")
            c.close()
            pid = d.proc.pid
            self.assertEqual(flood(d, "odd.echo", WARMUP), [])
            harness.assert_token_gone(token)
            # a call's init reports its tool's end before its namespace is
            # torn down, so the last warm-up call's may still be exiting:
            # counted, it stood in the flood's baseline, and the count came
            # back below it
            harness.deadline_wait(lambda: settled(pid), what="the warm-up's call processes gone")
            procs0, fds0, rss0 = len(descendants(pid)), fds(pid), vm_rss_kib(pid)

            bad = flood(d, "odd.echo", CALLS)
            self.assertEqual(bad, [], "%d of %d calls failed" % (len(bad), CALLS))

            harness.assert_token_gone(token, what="a process of the flood's servers")
            # the spares used up are made again, connections closed: wait
            # for the counts to come back, then say where they stand
            harness.deadline_wait(lambda: len(descendants(pid)) == procs0,
                                  what="the daemon's descendants back to %d" % procs0)
            harness.deadline_wait(lambda: fds(pid) == fds0,
                                  what="the daemon's descriptors back to %d" % fds0)
            rss1 = vm_rss_kib(pid)
            print("flood %s: %d calls over %d connections: descendants %d, fds %d, "
                  "RSS %d KiB after %d warm-up calls, %d KiB after the flood (%+d)"
                  % (type(self).__name__, CALLS, CONNS, procs0, fds0, rss0, WARMUP, rss1,
                     rss1 - rss0))
            if not harness.SANITIZED:  # ASan's quarantine holds what was freed (+50 MiB seen)
                self.assertLessEqual(rss1, rss0 + RSS_SLACK_KIB)
            if self.LENT:
                self.assertEqual(uids_in(*self.LENT), [], "processes of the uids it lends")
            self.assertEqual(d.stats()["workers"]["running"], 0)
        finally:
            d.stop()

    def test_fork_bomb(self):
        token = harness.new_token("mcpbomb")
        d = self.daemon([server("bomb", token, limits={"processes": 16})])
        try:
            c = d.client()
            harness.deadline_wait(lambda: any(t["name"] == "bomb.forkbomb"
                                              for t in c.tools()["tools"]),
                                  what="bomb's tools listed")
            b = c.start_batch([{"id": "c", "name": "bomb.forkbomb", "arguments": {}}])
            done = [e for e in c.recv_batch(b, timeout=60 * harness.SCALE)
                    if e["event"] == "tool_execution_completed"][0]
            err = done["result"]["tool_error"]
            self.assertEqual(err["reason"], "handler_exit", err)
            self.assertIn("fork refused after", err["message"])
            self.assertIn("exited with status 4", err["message"])
            harness.assert_token_gone(token, what="a process of the fork bomb")
            if self.LENT:
                self.assertEqual(uids_in(*self.LENT), [], "processes of the uids it lends")
            # and the daemon goes on
            b = c.start_batch([{"id": "e", "name": "bomb.echo", "arguments": {"text": "hi"}}])
            done = [e for e in c.recv_batch(b) if e["event"] == "tool_execution_completed"]
            self.assertEqual(done[0]["result"], HI)
        finally:
            d.stop()


class RootDaemon(Flood, unittest.TestCase):
    @staticmethod
    def daemon(tools):
        return harness.Daemon(tools, ["--call-uids", "%d-%d" % UIDS])

    LENT = UIDS


class UnprivilegedDaemon(Flood, unittest.TestCase):
    """Its calls run as nobody (in user namespaces of their own), a uid the
    daemon itself and other tests' daemons have too: what is left of its
    calls is found by the server's token and the daemon's descendants."""

    @staticmethod
    def daemon(tools):
        return harness.nobody_daemon(tools)

    LENT = None


BOMB_TOKEN = harness.new_token("mcpcgbomb")


class CgroupBomb(CgroupCase):
    TOOLS = [server("bomb", BOMB_TOKEN, limits={"processes": 16})]
    CONTAINMENT = "auto"

    def test_fork_bomb_names_pids_max(self):
        if "pids" not in controllers(self.cg):
            self.skipTest("the pids controller is not available to %s" % self.cg)
        harness.deadline_wait(lambda: any(t["name"] == "bomb.forkbomb"
                                          for t in self.c.tools()["tools"]),
                              what="bomb's tools listed")
        res = self.c.run([{"id": "f", "name": "bomb.forkbomb"}], timeout=60 * harness.SCALE)
        te = self.assertToolError(res, "f", "handler_exit")
        self.assertEqual(te["cause"].get("resource_limit"),
                         {"name": "processes", "value": 16, "reached": "pids.max"}, te)
        harness.assert_token_gone(BOMB_TOKEN, what="a process of the fork bomb")


if __name__ == "__main__":
    harness.require_env()
    unittest.main(verbosity=2)
