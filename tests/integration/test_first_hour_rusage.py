"""A call's resource use is the tool's own (and its descendants'), in every
containment mode.

Under PID-namespace containment the daemon's child is toolexecd-init, which
waits for the tool; what wait4() gives the daemon for the init used to be
the init's own few pages and no CPU, so a tool that burned a second and
touched 50 MB was reported as 0 ms and ~3.5 MB. The tool here burns CPU
until its own clock says so, and touches memory, in itself and in a child
it waits for; the test asks that the event report at least those amounts.
"""

import os
import textwrap
import unittest

from harness import Daemon, require_env

# What the tool burns, in its own (process) CPU clock, and touches.
BURN_MS = 300
TOUCH_MB = 48

TOOL = textwrap.dedent("""\
    import json, os, struct, sys, time
    BURN, MB = %d / 1000.0, %d
    def work():
        block = bytearray(MB * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        end = time.process_time() + BURN
        while time.process_time() < end:
            pass
    framed = sys.argv[1] == "framed"
    if framed:
        n = struct.unpack(">I", sys.stdin.buffer.read(4))[0]
        sys.stdin.buffer.read(n)
    # a child does the same, so the descendants' share counts too
    pid = os.fork()
    if pid == 0:
        work()
        os._exit(0)
    os.waitpid(pid, 0)
    work()
    out = json.dumps({"ok": "done"}).encode()
    if framed:
        sys.stdout.buffer.write(struct.pack(">I", len(out)) + out)
    else:
        sys.stdout.buffer.write(b'"done"')
    sys.stdout.flush()
""") % (BURN_MS, TOUCH_MB)


class ResourceUse(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_env()

    def run_in(self, containment, protocol):
        with Daemon(start=False, args=["--containment", containment]) as d:
            path = d.path("burn.py")
            with open(path, "w") as f:
                f.write(TOOL)
            os.chmod(path, 0o644)
            d.add_tool({"name": "burn", "description": "burns CPU and memory",
                        "schema": {"type": "object"}, "protocol": protocol,
                        "command": ["/usr/bin/python3", path, protocol]})
            d.start()
            c = d.client()
            res = c.run([{"id": "c0", "name": "burn", "arguments": {}}])
            self.assertEqual(res.result("c0"), {"ok": "done"}, res.events)
            return res.completed("c0")

    def check(self, containment, protocol):
        done = self.run_in(containment, protocol)
        what = "%s/%s: %r" % (containment, protocol, done)
        # two processes each burned BURN_MS of their own CPU time
        self.assertGreaterEqual(done["cpu_user_ms"] + done["cpu_sys_ms"], 2 * BURN_MS * 0.9, what)
        # the larger of the two touched TOUCH_MB (max_rss_kb is a maximum, not a sum)
        self.assertGreaterEqual(done["max_rss_kb"], TOUCH_MB * 1024, what)

    def test_pidns_framed(self):
        self.check("pidns", "framed")

    def test_pidns_plain(self):
        self.check("pidns", "plain")

    def test_pgroup_framed(self):
        self.check("pgroup", "framed")

    def test_pgroup_plain(self):
        self.check("pgroup", "plain")


if __name__ == "__main__":
    unittest.main(verbosity=2)
