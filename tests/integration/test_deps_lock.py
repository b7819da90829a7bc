"""contrib/deps.sh waits for another apt's lock instead of failing. apt-get
and dpkg-query are stand-ins on PATH: the first update fails as apt does
when another apt holds the lists lock, the next succeeds; every apt-get is
asked to wait for the dpkg lock (DPkg::Lock::Timeout)."""

import os
import stat
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DEPS = os.path.normpath(os.path.join(HERE, "..", "..", "contrib", "deps.sh"))

APT = r"""#!/bin/sh
echo "$*" >> "$LOG"
case " $* " in
*" update "*)
    if [ ! -e "$LOG.held" ]; then
        : > "$LOG.held"
        echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1 (apt-get)" >&2
        exit 100
    fi ;;
esac
exit 0
"""


class DepsLock(unittest.TestCase):
    def test_waits_for_the_lock(self):
        with tempfile.TemporaryDirectory() as d:
            for name, text in (("apt-get", APT), ("dpkg-query", "#!/bin/sh\nexit 1\n"),
                               ("sudo", '#!/bin/sh\nexec "$@"\n'), ("sleep", "#!/bin/sh\n")):
                p = os.path.join(d, name)
                with open(p, "w") as f:
                    f.write(text)
                os.chmod(p, stat.S_IRWXU)
            log = os.path.join(d, "log")
            env = dict(os.environ, PATH=d + ":" + os.environ["PATH"], LOG=log,
                       TE_APT_LOCK_WAIT="60")
            r = subprocess.run(["sh", "-c", ". \"$1\" && te_install_deps", "sh", DEPS],
                               env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            calls = open(log).read().splitlines()
            self.assertEqual(["update" if "update" in c.split() else "install" for c in calls],
                             ["update", "update", "install"], calls)
            for c in calls:
                self.assertIn("DPkg::Lock::Timeout=60", c)


if __name__ == "__main__":
    unittest.main(verbosity=2)
