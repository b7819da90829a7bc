#!/usr/bin/env python3
"""tests/deps/test_cycles_selftest.py - cycles.py finds what it must (call,
global and include cycles) and nothing it must not (static functions,
names in comments and strings, declarations in headers), on small trees."""
import os
import subprocess
import sys
import tempfile
import unittest

CYCLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cycles.py")


def check(files):
    with tempfile.TemporaryDirectory() as root:
        for d in ("lib", "daemon", "daemon/cli", "daemon/run", "daemon/base", "daemon/unit"):
            os.makedirs(os.path.join(root, d))
        for path, text in files.items():
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        p = subprocess.run([sys.executable, CYCLES, root], capture_output=True, text=True)
        return p.returncode, p.stdout


BASE = {
    "lib/a.c": "int te_a(void)\n{\n    return 1;\n}\n",
    "lib/b.c": '#include "t.h"\nint te_b(void)\n{\n    return te_a();\n}\n',
    "lib/t.h": "int te_a(void);\nint te_b(void);\n",
    "daemon/x.c": "int td_x(void)\n{\n    return te_b();\n}\n",
}


class Cycles(unittest.TestCase):
    def test_acyclic(self):
        rc, out = check(BASE)
        self.assertEqual(rc, 0, out)
        self.assertIn("lib/b.c -> lib/a.c lib/t.h", out)
        self.assertIn("daemon/x.c -> lib/b.c", out)
        self.assertIn("0 cycle(s)", out)

    def test_call_cycle(self):
        files = dict(BASE)
        files["lib/a.c"] = "int te_a(void)\n{\n    return te_b() - 1;\n}\n"
        rc, out = check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("cycle of 2 files: lib/a.c lib/b.c", out)
        self.assertIn("lib/a.c -> lib/b.c: te_b", out)

    def test_global_cycle(self):
        files = dict(BASE)
        files["daemon/main.c"] = "bool td_down;\nint main(void)\n{\n    return td_y();\n}\n"
        files["daemon/y.c"] = "int td_y(void)\n{\n    return td_down;\n}\n"
        rc, out = check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("cycle of 2 files: daemon/main.c daemon/y.c", out)
        self.assertIn("daemon/y.c -> daemon/main.c: td_down", out)

    def test_cli_call_cycle(self):
        # the CLI's private functions (cli_) count as uses too
        files = dict(BASE)
        files["daemon/cli/m.c"] = "int cli_m(void)\n{\n    return cli_n();\n}\n"
        files["daemon/cli/n.c"] = "int cli_n(void)\n{\n    return cli_m();\n}\n"
        rc, out = check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("cycle of 2 files: daemon/cli/m.c daemon/cli/n.c", out)

    def test_unprefixed_cycle(self):
        # private helpers without a prefix (a library split into files
        # whose helpers call each other: violation() <-> validate())
        files = dict(BASE)
        files["lib/v.c"] = (
            "int depth;\nint violation(int n)\n{\n    return n ? check(n - 1) : depth;\n}\n"
        )
        files["lib/w.c"] = "int check(int n)\n{\n    return violation(n);\n}\n"
        rc, out = check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("cycle of 2 files: lib/v.c lib/w.c", out)
        self.assertIn("lib/v.c -> lib/w.c: check", out)
        self.assertIn("lib/w.c -> lib/v.c: violation", out)

    def test_unprefixed_not_uses(self):
        # a same-name static in the user, the user's own main, and a
        # typedef'd struct's name: none is a use of the other file
        files = dict(BASE)
        files["lib/v.c"] = (
            "typedef struct {\n    int n;\n} box;\nint helper(void)\n{\n    return 0;\n}\n"
            "int main(void)\n{\n    return helper();\n}\n"
        )
        files["lib/w.c"] = (
            "typedef struct {\n    int n;\n} box;\nstatic int helper(void)\n{\n    return 1;\n}\n"
            "int main(void)\n{\n    box b = {helper()};\n    return b.n + te_a();\n}\n"
        )
        rc, out = check(files)
        self.assertEqual(rc, 0, out)
        self.assertIn("lib/w.c -> lib/a.c\n", out)
        self.assertIn("lib/v.c (leaf)", out)

    def test_include_cycle(self):
        files = dict(BASE)
        files["daemon/p.h"] = '#include "q.h"\n'
        files["daemon/q.h"] = '#include "p.h"\n'
        rc, out = check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("cycle of 2 files: daemon/p.h daemon/q.h", out)

    def test_layer_folders(self):
        # daemon/'s folders are read, and a header is found in another
        # folder by its name (the daemon's include path): a cycle across
        # two folders, by call and by include, is one
        files = dict(BASE)
        files["daemon/run/r.c"] = "int td_r(void)\n{\n    return td_c();\n}\n"
        files["daemon/base/c.c"] = "int td_c(void)\n{\n    return 0;\n}\n"
        files["daemon/run/r.h"] = '#include "c.h"\n'
        files["daemon/base/c.h"] = "int td_c(void);\n"
        files["daemon/unit/test_c.c"] = "int td_t(void)\n{\n    return td_r();\n}\n"
        rc, out = check(files)
        self.assertEqual(rc, 0, out)
        self.assertIn("daemon/run/r.c -> daemon/base/c.c", out)
        self.assertIn("daemon/run/r.h -> daemon/base/c.h", out)
        self.assertNotIn("daemon/unit", out)  # the tests are not in the graph
        files["daemon/base/c.c"] = "int td_c(void)\n{\n    return td_r();\n}\n"
        files["daemon/base/c.h"] = '#include "r.h"\n'
        rc, out = check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("cycle of 2 files: daemon/base/c.c daemon/run/r.c", out)
        self.assertIn("cycle of 2 files: daemon/base/c.h daemon/run/r.h", out)

    def test_not_uses(self):
        files = dict(BASE)
        # a static td_x elsewhere, te_b in a comment and a string, and a
        # header declaring te_x: none is a use of x.c or b.c
        files["lib/a.c"] = (
            "/* te_b, td_x */\nstatic int td_x(void)\n{\n    return 0;\n}\n"
            'int te_a(void)\n{\n    const char *s = "te_b td_x";\n    return td_x() + !s;\n}\n'
        )
        files["lib/t.h"] += "int td_x(void);\n"
        rc, out = check(files)
        self.assertEqual(rc, 0, out)
        self.assertIn("lib/a.c (leaf)", out)


if __name__ == "__main__":
    unittest.main()
