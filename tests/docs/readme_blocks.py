#!/usr/bin/env python3
"""Run every command block of README.md that can run here
(docs that were wrong when followed).

The README is followed as a new user would: contrib/quickstart.sh first (as
nobody, without XDG_RUNTIME_DIR, the case that used to fail; the tree as
built: QUICKSTART_NO_BUILD=1), the SOCK=/EVENTS= line as the script printed
it, then every other block in order, from a directory that looks like the
source tree (contrib -> the sources, build -> this build directory). A
`console` block's commands ("$ " lines) run one by one and their output is
compared with the block's: the same events (kind and call id, in any order:
completion order is the machine's), for a command that tails, once a batch
like the one the block shows has run. An `sh` block runs as a whole and
must exit 0.

Blocks that cannot run here are listed with the reason (a system install
with sudo and systemd, the test suite itself, the qemu check); the install
is tested for real by tests/install/run.sh.

    readme_blocks.py SOURCE_ROOT BUILD_DIR      (meson test readme-blocks)
"""

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WAIT = 30.0 * float(os.environ.get("TE_TIMEOUT_SCALE", "1"))

SKIP = [
    (re.compile(r"\bsudo\b|\bsystemctl\b|\bjournalctl\b"),
     "a system install run by systemd (tests/install/run.sh installs and runs it for real)"),
    (re.compile(r"^tests/run\.sh$", re.M), "the test suite itself, of which this is a part"),
    (re.compile(r"^tests/vm/run\.sh", re.M), "qemu with Debian's kernel: run by .ci/run"),
]


def blocks(readme):
    """(language, text) of each fenced block, indentation removed."""
    out = []
    for m in re.finditer(r"^( *)```(\w+)\n(.*?)^ *```", readme, re.S | re.M):
        indent = len(m.group(1))
        text = "\n".join(l[indent:] if l[:indent].strip() == "" else l
                         for l in m.group(3).split("\n"))
        out.append((m.group(2), text.strip("\n")))
    return out


def events_of(text):
    """(event, call id) pairs of the JSON lines in text (lines cut with
    "..." in the README are read by pattern)."""
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        kind = re.search(r'"event":\s*"(\w+)"', line)
        cid = re.search(r'"(?:id|tool_call_id)":\s*"([^"]+)"', line)
        if kind:
            pairs.append((kind.group(1), cid.group(1) if cid and kind.group(1) not in (
                "batch_started", "batch_completed", "tailing") else None))
    return pairs


class Failed(Exception):
    pass


class Follow:
    def __init__(self, source, build):
        self.source = source
        self.build = build
        self.ran, self.skipped, self.failures = [], [], []
        self.tmp = tempfile.mkdtemp(prefix="te-readme-", dir="/tmp")
        os.chmod(self.tmp, 0o755)
        self.tree = os.path.join(self.tmp, "tree")
        os.mkdir(self.tree)
        os.symlink(os.path.join(source, "contrib"), os.path.join(self.tree, "contrib"))
        os.symlink(build, os.path.join(self.tree, "build"))
        self.userdir = os.path.join(self.tmp, "user")
        os.mkdir(self.userdir)
        self.nobody = pwd.getpwnam("nobody")
        os.chown(self.userdir, self.nobody.pw_uid, self.nobody.pw_gid)
        self.env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
        self.env.update(TMPDIR=self.userdir, LANG="C.UTF-8")
        self.daemon = None

    def close(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                if self.daemon.wait(timeout=WAIT) != 0:
                    self.failures.append("the quickstart daemon exited with %s"
                                         % self.daemon.returncode)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.failures.append("the quickstart daemon did not stop on SIGTERM")
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the blocks ------------------------------------------------------------
    def quickstart(self, text):
        out_path = os.path.join(self.tmp, "quickstart.out")
        # the tree's "build" is the build under test (.ci/run's sanitizer
        # pass exports BUILD_DIR=build-asan, which this tree does not have)
        env = dict(self.env, QUICKSTART_NO_BUILD="1", HOME="/nonexistent", BUILD_DIR="build")
        with open(out_path, "wb") as out:
            self.daemon = subprocess.Popen(
                ["setpriv", "--reuid=%d" % self.nobody.pw_uid,
                 "--regid=%d" % self.nobody.pw_gid, "--clear-groups", "sh", "-c",
                 "exec " + text],  # the daemon is ours to stop, and to see its status
                cwd=self.tree, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True)
        end = time.monotonic() + WAIT
        while True:
            with open(out_path) as f:
                said = f.read()
            m = re.search(r"^\s*(SOCK=\S+ EVENTS=\S+)\s*$", said, re.M)
            if m and "listening on" in said:
                break
            if self.daemon.poll() is not None or time.monotonic() > end:
                raise Failed("contrib/quickstart.sh did not start the daemon:\n" + said)
            time.sleep(0.05)
        for assignment in m.group(1).split():
            k, v = assignment.split("=", 1)
            self.env[k] = v

    def run_sh(self, text):
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=self.tree,
                           env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=WAIT * 2)
        if p.returncode != 0:
            raise Failed("exit status %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
        return p.stdout

    def run_console(self, text):
        commands, expected, cur = [], [], None
        for line in text.split("\n"):
            if line.startswith("$ "):
                cur = [line[2:]]
                commands.append((cur, []))
            elif cur is not None and cur[-1].endswith("\\"):
                cur.append(line)
            elif commands:
                commands[-1][1].append(line)
        for cmd_lines, out_lines in commands:
            cmd = "\n".join(cmd_lines)
            want = events_of("\n".join(out_lines))
            if re.search(r"socat -u |\"op\":\"tail\"", cmd):
                got = self.tail(cmd, "\n".join(out_lines))
            else:
                got = events_of(self.run_sh(cmd))
            if sorted(got, key=str) != sorted(want, key=str):
                raise Failed("%s\nevents: %s\nexpected: %s" % (cmd, got, want))

    def tail(self, cmd, shown):
        """A subscriber: start it, run the batch its output shows, stop it."""
        out_path = os.path.join(self.tmp, "tail.out")
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(["bash", "-c", "exec " + cmd], cwd=self.tree, env=self.env,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.wait_for(out_path, '"tailing"', proc)
            started = [json.loads(l) for l in shown.splitlines()
                       if '"tool_execution_started"' in l]
            batch = re.search(r'"batch":"([^"]+)"', shown).group(1)
            calls = [{"id": e["id"], "name": e["name"], "arguments": e["arguments"]}
                     for e in started]
            self.run_sh("echo %s | socat -t 30 - UNIX-CONNECT:\"$SOCK\" >/dev/null"
                        % shquote(json.dumps({"op": "run", "batch": batch, "calls": calls})))
            self.wait_for(out_path, '"batch_completed"', proc)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=WAIT)
        with open(out_path) as f:
            return events_of(f.read())

    def wait_for(self, path, what, proc):
        end = time.monotonic() + WAIT
        while True:
            with open(path) as f:
                text = f.read()
            if what in text:
                return
            if proc.poll() is not None or time.monotonic() > end:
                raise Failed("no %s from the subscriber:\n%s" % (what, text))
            time.sleep(0.02)

    def follow(self, readme):
        for i, (lang, text) in enumerate(blocks(readme)):
            if lang not in ("sh", "console"):
                continue
            name = "block %d (%s): %s" % (i + 1, lang, text.splitlines()[0][:70])
            why = next((reason for pattern, reason in SKIP if pattern.search(text)), None)
            if why:
                self.skipped.append("%s\n    skipped: %s" % (name, why))
                continue
            try:
                if text.strip() == "contrib/quickstart.sh":
                    self.quickstart(text)
                elif re.match(r"^SOCK=\S+ EVENTS=\S+", text):
                    pass  # "as printed": the line quickstart.sh printed is in force
                elif "SOCK" not in self.env and ("$SOCK" in text or "$EVENTS" in text):
                    raise Failed("the README uses $SOCK before telling how to get it")
                elif lang == "console":
                    self.run_console(text)
                else:
                    self.run_sh(text)
                self.ran.append(name)
            except (Failed, subprocess.TimeoutExpired) as e:
                self.failures.append("%s\n    %s" % (name, str(e).replace("\n", "\n    ")))


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def main():
    source, build = (os.path.abspath(a) for a in sys.argv[1:3])
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("socat"):
        print("SKIP: needs root, setpriv and socat (runs the quickstart as nobody)")
        return 77
    # nobody runs the quickstart from the tree: through a directory above it
    # that keeps others out (a 0700 mktemp -d) as the integration tests do
    sys.path.insert(0, os.path.join(source, "tests", "integration"))
    import harness_paths
    harness_paths.reach_trees(roots=[source, build])
    with open(os.path.join(source, "README.md")) as f:
        readme = f.read()
    f = Follow(source, build)
    try:
        f.follow(readme)
    finally:
        f.close()
    for name in f.ran:
        print("ran     " + name)
    for name in f.skipped:
        print("skipped " + name)
    for name in f.failures:
        print("FAILED  " + name)
    print("%d blocks ran, %d skipped, %d failed" % (len(f.ran), len(f.skipped), len(f.failures)))
    return 1 if f.failures or not f.ran else 0


if __name__ == "__main__":
    sys.exit(main())
