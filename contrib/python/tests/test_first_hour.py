"""The Python side of a new user's first hour (unittest, standard
library only):

- the SDK installs with `pip install contrib/python` and no network
  (--no-index: nothing may be fetched, not even a build backend), and a tool
  run by the interpreter it was installed for needs no PYTHONPATH in its
  definition;
- Client.run takes a model's reply as it came (an Anthropic message with
  its text blocks, an OpenAI Responses output) and answers in that API's
  shape.

    TOOLEXECD=build/daemon/toolexecd python3 -m unittest -v test_first_hour
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from test_client import SDK_DIR, WAIT, WORKER_PYTHON, Daemon, view_reads


class PipInstall(unittest.TestCase):
    def setUp(self):
        base = WORKER_PYTHON
        if subprocess.run([base, "-m", "pip", "--version"], capture_output=True).returncode:
            self.skipTest("%s has no pip (Debian: python3-pip)" % base)
        self.tmp = tempfile.mkdtemp(prefix="te-pip-", dir="/tmp")
        os.chmod(self.tmp, 0o755)  # the workers (perhaps nobody) run its python
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.venv = os.path.join(self.tmp, "venv")
        subprocess.run([base, "-m", "venv", "--without-pip", self.venv], check=True,
                       timeout=WAIT)
        self.python = os.path.join(self.venv, "bin", "python")

    def test_pip_install_offline_and_no_pythonpath(self):
        p = subprocess.run([WORKER_PYTHON, "-m", "pip", "--python", self.python, "install",
                            "--no-index", "--no-cache-dir", SDK_DIR],
                           capture_output=True, text=True, timeout=WAIT * 4, cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        where = subprocess.run([self.python, "-c", "import toolexec.worker as w; print(w.__file__)"],
                               capture_output=True, text=True, cwd="/", timeout=WAIT,
                               env={"PATH": "/usr/bin:/bin"})
        self.assertTrue(where.stdout.startswith(self.venv + "/lib/"), where)
        # whatever the umask, the workers' user may read it (links left alone:
        # bin/python points at the system's interpreter)
        for dirpath, _, files in os.walk(self.venv):
            os.chmod(dirpath, 0o755)
            for f in files:
                path = os.path.join(dirpath, f)
                if not os.path.islink(path):
                    os.chmod(path, os.stat(path).st_mode | 0o644)
        # a definition with no PYTHONPATH in its env
        d = Daemon(definitions=lambda script: [{
            "name": "py_echo", "description": "echo", "schema": {"type": "object"},
            "command": [self.python, script], "protocol": "framed",
            "env": {"PYTHONDONTWRITEBYTECODE": "1"},
            # /tmp is the call's own: the venv and the script are shown
            "filesystem": {"read": view_reads(self.tmp, os.path.dirname(os.path.realpath(script)))}}])
        try:
            with d.client() as c:
                done = c.run([{"id": "a", "name": "py_echo", "arguments": {"x": 1}}]).wait()
            self.assertEqual(done["messages"][0]["content"], '{"x":1}', done)
        finally:
            d.stop()


class DocumentedVenv(unittest.TestCase):
    """README's path on Debian 12, whose python3 refuses `sudo pip install`
    (PEP 668): a virtualenv, the package installed into it from the tree
    with the venv's own pip, offline, and a tool run by the venv's python
    with no PYTHONPATH."""

    def test_venv_install_and_run(self):
        base = WORKER_PYTHON
        tmp = tempfile.mkdtemp(prefix="te-venv-", dir="/tmp")
        self.addCleanup(shutil.rmtree, tmp, True)
        venv = os.path.join(tmp, "tools")
        # python3 -m venv DIR (Debian: python3-venv), as the README has it
        p = subprocess.run([base, "-m", "venv", venv], capture_output=True, text=True,
                           timeout=WAIT * 4)
        self.assertEqual(p.returncode, 0, "python3 -m venv (Debian: python3-venv): " + p.stderr)
        # DIR/bin/pip install contrib/python, offline (--no-index)
        p = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index",
                            "--no-cache-dir", SDK_DIR],
                           capture_output=True, text=True, timeout=WAIT * 4, cwd=tmp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        python = os.path.join(venv, "bin", "python")
        for dirpath, _, files in os.walk(tmp):  # the workers' user reads it
            os.chmod(dirpath, 0o755)
            for f in files:
                path = os.path.join(dirpath, f)
                if not os.path.islink(path):
                    os.chmod(path, os.stat(path).st_mode | 0o644)
        d = Daemon(definitions=lambda script: [{
            "name": "py_echo", "description": "echo", "schema": {"type": "object"},
            "command": [python, script], "protocol": "framed",
            "env": {"PYTHONDONTWRITEBYTECODE": "1"},
            "filesystem": {"read": view_reads(tmp, os.path.dirname(os.path.realpath(script)))}}])
        try:
            with d.client() as c:
                done = c.run([{"id": "a", "name": "py_echo", "arguments": {"v": 2}}]).wait()
            self.assertEqual(done["messages"][0]["content"], '{"v":2}', done)
        finally:
            d.stop()


def echo_definitions(script):
    return [{"name": "py_echo", "description": "echo", "schema": {"type": "object"},
             "command": [WORKER_PYTHON, script], "protocol": "framed",
             "env": {"PYTHONPATH": SDK_DIR, "PYTHONDONTWRITEBYTECODE": "1"},
             "filesystem": {"read": view_reads(os.path.dirname(os.path.realpath(script)))}}]


class ReplyShapes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(definitions=echo_definitions)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_anthropic_message_with_text_blocks(self):
        reply = {"role": "assistant", "content": [
            {"type": "text", "text": "Let me echo that."},
            {"type": "tool_use", "id": "toolu_1", "name": "py_echo", "input": {"a": 1}},
            {"type": "thinking", "thinking": "...", "signature": "x"},
            {"type": "tool_use", "id": "toolu_2", "name": "py_echo", "input": {"b": 2}}]}
        with self.d.client() as c:
            for calls in (reply, reply["content"]):
                done = c.run(calls).wait()
                self.assertEqual(done["messages"], [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"a":1}',
                     "is_error": False},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": '{"b":2}',
                     "is_error": False}])

    def test_responses_output_answers_in_its_shape(self):
        output = {"output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "call_1", "name": "py_echo",
             "arguments": "{\"c\": 3}"}]}
        with self.d.client() as c:
            done = c.run(output).wait()
            self.assertEqual(done["messages"], [
                {"type": "function_call_output", "call_id": "call_1", "output": '{"c":3}'}])
            # an explicit result_format still wins
            done = c.run(output, result_format="openai").wait()
            self.assertEqual(done["messages"][0]["tool_call_id"], "call_1")


if __name__ == "__main__":
    unittest.main()
