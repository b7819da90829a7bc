"""A socket file the daemon binds itself appears only once the socket
listens, so a client that waits for the file and connects at once is never
refused (ECONNREFUSED), on the main socket nor the events socket.

holdlisten.so (LD_PRELOAD) stops the daemon just before each listen() until
the test says go: at that moment, bound but not listening, every socket path
that exists must accept a connection. Before the fix the path existed from
bind() on, so the first hold found it refusing, every time. Root daemon and
unprivileged one."""

import errno
import os
import select
import socket
import time
import unittest

import harness
from harness import Daemon, NobodyDaemon, give_work_dir, worker_tool, WAIT

HOLDLISTEN = os.environ.get("TE_HOLDLISTEN", "")


def read_line(fd, proc, timeout):
    """One line from the FIFO fd, or an assertion error when the daemon
    exits or does not write it in time."""
    buf = b""
    end = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        if proc.poll() is not None:
            raise AssertionError("toolexecd exited (%s) before listen()" % proc.returncode)
        if time.monotonic() > end:
            raise AssertionError("the daemon did not reach listen() within %.1fs" % timeout)
        # a short wait, only to look at the daemon's status again
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            buf += os.read(fd, 4096)
    return buf.decode().strip()


def write_go(path, proc, timeout):
    """One byte into the FIFO path once the daemon has it open for reading;
    an assertion error, not a hang, when it never does."""
    end = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        if proc.poll() is not None:
            raise AssertionError("toolexecd exited (%s) while held" % proc.returncode)
        if time.monotonic() > end:
            raise AssertionError("the daemon did not wait for go within %.1fs" % timeout)
        # a short wait, only to look again
        time.sleep(0.005)
    try:
        os.write(fd, b"g")
    finally:
        os.close(fd)


class SocketReady(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        if not HOLDLISTEN:
            self.skipTest("TE_HOLDLISTEN not set (run through meson test)")

    def check(self, cls):
        d = cls(tools=[worker_tool("echo", "echo")], start=False)
        try:
            self.run_held(d, cls is NobodyDaemon)
        except BaseException:
            d.kill()
            d.stop(check=False)
            raise
        d.stop()

    def run_held(self, d, nobody):
        events = d.path("ev.sock")
        d.args += ["--events-socket", events]
        if nobody:
            give_work_dir(d)
        fifos = d.path("hold")
        os.mkdir(fifos)
        os.chmod(fifos, 0o755)
        for f in ("held", "go"):
            os.mkfifo(os.path.join(fifos, f))
            os.chmod(os.path.join(fifos, f), 0o666)
        env = {"LD_PRELOAD": HOLDLISTEN, "TE_HOLD_LISTEN": fifos}
        # a sanitized daemon wants its runtime first among the libraries
        asan = os.environ.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "verify_asan_link_order=0"
        d.env = env
        # read and write: no end of file between the daemon's two writes
        held = os.open(os.path.join(fifos, "held"), os.O_RDWR | os.O_NONBLOCK)
        try:
            d.spawn()
            bound = []
            for _ in range(2):  # the events socket, then the main socket
                name = read_line(held, d.proc, WAIT)
                bound.append(name)
                for path in (events, d.sock):
                    if not os.path.exists(path):
                        continue  # not there yet: a waiting client waits on
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    try:
                        s.connect(path)
                    except ConnectionRefusedError:
                        self.fail("%s exists while the daemon holds before listen() on %s, "
                                  "and refuses connections" % (path, name))
                    finally:
                        s.close()
                # the daemon blocks opening go for reading until this write
                write_go(os.path.join(fifos, "go"), d.proc, WAIT)
        finally:
            os.close(held)
        d.wait_ready()
        self.assertEqual(len(bound), 2)
        # both bound names were temporary ones, gone now
        for name in bound:
            self.assertNotIn(name, (events, d.sock))
            self.assertFalse(os.path.exists(name), name)
        self.assertEqual(sorted(os.listdir(d.tmp)),
                         sorted(["daemon.stderr", "ev.sock", "hold", "s.sock", "tools", "work"]))
        res = d.client().run([{"id": "a", "name": "echo", "arguments": {"x": 1}}])
        self.assertTrue(res.ok)

    def test_root_daemon(self):
        self.check(Daemon)

    def test_unprivileged_daemon(self):
        self.check(NobodyDaemon)


if __name__ == "__main__":
    harness.main()
