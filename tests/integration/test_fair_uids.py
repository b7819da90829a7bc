"""Worker slots are shared fairly across client uids.

One uid (root) fills the queue from many connections, each with a call that
waits for a file of its own; then another uid (nobody) submits one call. When
the first slot frees, nobody's call is the next to start, not the last after
all of root's queue. The order is read from one tail subscription, so the
test needs no timing: each call runs until the test lets it go."""

import os
import socket
import unittest

import harness
from harness import Client, Daemon, worker_tool

FLOOD = 6
SLOTS = 2


def client_as(path, uid, gid):
    """A Client whose connection was made by uid:gid (the daemon reads the
    peer's credentials at connect): a forked child connects and passes the
    socket back."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            socket.send_fds(theirs, [b"s"], [s.fileno()])
            os._exit(0)
        except BaseException:
            os._exit(1)
    theirs.close()
    try:
        _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    finally:
        ours.close()
        _, status = os.waitpid(pid, 0)
    if not fds or status != 0:
        raise AssertionError("could not connect as uid %d" % uid)
    c = Client.__new__(Client)
    c.sock = socket.socket(fileno=fds[0])
    c.sock.settimeout(harness.WAIT)
    c.buf, c.eof, c.log, c.pending, c._auto = b"", False, [], [], 0
    return c


def queued(tail, batch):
    """The daemon has taken batch (its calls run or wait for a slot)."""
    tail.recv_for(lambda e: e.get("event") == "batch_started" and e.get("batch") == batch)


def next_started(tail):
    return tail.recv_for(lambda e: e.get("event") == "tool_execution_started")


@unittest.skipUnless(os.geteuid() == 0, "needs root (to connect as nobody too)")
class FairAcrossUids(unittest.TestCase):
    def test_other_uid_gets_the_first_free_slot(self):
        args = ["--max-workers", str(SLOTS), "--socket-mode", "0666"]
        with Daemon([worker_tool("wait", "wait-file")], args) as d:
            tail = d.client()
            tail.send({"op": "tail"})
            tail.recv_for(lambda e: e.get("event") == "tailing")
            release = {}
            flood = []
            for i in range(FLOOD):
                c = d.client()
                batch = "flood%d" % i
                release[batch] = d.path("release-" + batch)
                c.start_batch([{"id": "w", "name": "wait",
                                "arguments": {"path": release[batch]}}], batch=batch)
                queued(tail, batch)
                flood.append((c, batch))
            running = [next_started(tail)["batch"] for _ in range(SLOTS)]
            self.assertEqual(sorted(running), ["flood0", "flood1"])

            other = client_as(d.sock, 65534, 65534)
            d.clients.append(other)
            release["other"] = d.path("release-other")
            other.start_batch([{"id": "w", "name": "wait",
                                "arguments": {"path": release["other"]}}], batch="other")
            queued(tail, "other")

            # one of root's calls ends: its slot goes to nobody, whose uid
            # holds none, before root's four other connections
            open(release[running[0]], "w").close()
            self.assertEqual(next_started(tail)["batch"], "other")
            self.assertEqual(next_started(other)["batch"], "other")

            for path in release.values():
                open(path, "w").close()
            for c, batch in flood + [(other, "other")]:
                events = c.finish_batch(batch)
                self.assertEqual(events[-1]["event"], "batch_completed", events[-3:])


if __name__ == "__main__":
    unittest.main()
