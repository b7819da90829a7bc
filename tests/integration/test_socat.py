"""The socat recipes in contrib/socat/ work as written, against the real
daemon: a batch, the tools list, tailing the events socket."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import Daemon, worker_tool, deadline_wait, WAIT

RECIPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "contrib",
                       "socat")
EXAMPLES = os.environ.get("TE_CONTRIB_TOOLS_D", "")


@unittest.skipUnless(shutil.which("socat"), "needs socat")
class Recipes(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="te-socat-", dir="/tmp")
        cls.events = os.path.join(cls.tmp, "events.sock")
        tools = [worker_tool("echo", "echo"),
                 worker_tool("wordcount", "echo")]  # stand-ins with the recipes' names
        cls.d = Daemon(tools=tools, args=["--events-socket", cls.events])
        cls.env = dict(os.environ, SOCK=cls.d.sock, EVENTS=cls.events)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def recipe(self, name, **kw):
        return subprocess.run([os.path.join(RECIPES, name)], env=self.env, capture_output=True,
                              timeout=WAIT, **kw)

    def test_batch(self):
        p = self.recipe("batch.sh")
        self.assertEqual(p.returncode, 0, p.stderr)
        events = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertEqual(events[-1]["event"], "batch_completed")
        self.assertEqual([m["tool_call_id"] for m in events[-1]["messages"]], ["c0", "c1"])

    def test_tools(self):
        p = self.recipe("tools.sh")
        self.assertEqual(p.returncode, 0, p.stderr)
        ev = json.loads(p.stdout)
        self.assertEqual(sorted(t["name"] for t in ev["tools"]), ["echo", "wordcount"])

    def test_tail(self):
        out = open(os.path.join(self.tmp, "tail.out"), "w+b")
        self.addCleanup(out.close)
        tail = subprocess.Popen([os.path.join(RECIPES, "tail.sh")], env=self.env, stdout=out)
        self.addCleanup(tail.wait)
        self.addCleanup(tail.kill)
        deadline_wait(lambda: b'"tailing"' in open(out.name, "rb").read(),
                      what="the tail to subscribe")
        self.assertEqual(self.recipe("batch.sh").returncode, 0)
        deadline_wait(lambda: b'"batch_completed"' in open(out.name, "rb").read(),
                      what="the tail to show the batch")


if __name__ == "__main__":
    unittest.main()
