#!/usr/bin/env python3
"""tests/deps/cycles.py - the file dependency graph of lib/, daemon/ with
every folder under it (its layers and daemon/cli/; not daemon/unit/, the
tests), and a failure on any cycle in it.

An edge X -> Y when X includes Y ("..." includes resolved in X's directory,
then lib/, then daemon/ and its folders, as the daemon's include path
has them), or when the .c file X uses a function or global (any name, prefixed or
not: the library's private helpers carry none) that is defined non-static
in the .c file Y and that X does not itself declare static. Parsing is
rough on purpose (comments and strings stripped, definitions found at brace
depth 0); it needs no compiler. A struct member or local variable that bears
a global's name counts as a use of it: name members apart from the
functions they point at.

Prints every file with its edges, then the cycles (strongly connected
components of more than one file) and exits 1 if there is any.

    tests/deps/cycles.py [SOURCE_ROOT]
"""
import os
import re
import sys

TOP_DIRS = ["lib", "daemon"]
SKIP = {"unit"}  # tests, beside the code they test


def source_dirs(root):
    """lib/, daemon/ and every folder under daemon/ (but its tests'), in
    a fixed order: a folder added to the daemon is read without a word
    here."""
    dirs = []
    for top in TOP_DIRS:
        for d, subdirs, _ in os.walk(os.path.join(root, top)):
            subdirs[:] = sorted(s for s in subdirs if s not in SKIP and not s.startswith("."))
            dirs.append(os.path.relpath(d, root).replace(os.sep, "/"))
    return dirs
NAME = r"[A-Za-z_]\w*"
SYM = re.compile(r"\b(" + NAME + r")\b")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def strip(text):
    """Comments, string and character literals, and preprocessor lines
    out (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    lines = "".join(out).split("\n")
    res, cont = [], False
    for line in lines:
        pp = cont or line.lstrip().startswith("#")
        cont = pp and line.rstrip().endswith("\\")
        res.append("" if pp else line)
    return "\n".join(res)


def top_level(code):
    """The statements at brace depth 0, each with whether a body ({...})
    ended it, and the code inside bodies."""
    stmts, inner = [], []
    depth, start, paren = 0, 0, 0
    for i, c in enumerate(code):
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        elif c == "{":
            if depth == 0:
                stmts.append((code[start:i], True))
                body_start = i + 1
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                inner.append(code[body_start:i])
                start = i + 1
        elif c == ";" and depth == 0 and paren == 0:
            stmts.append((code[start:i], False))
            start = i + 1
    return stmts, inner


def definitions(code):
    """Non-static functions and globals defined in code."""
    names = set()
    stmts, _ = top_level(code)
    # After a struct/union/enum body: the first word of its statement (the
    # declarators after "}" are typedef names when that was "typedef").
    tail_of = None
    for s, has_body in stmts:
        s = s.strip()
        words = s.split()
        after, tail_of = tail_of, None
        if not words:
            continue
        if has_body:
            # A function definition: NAME( ... ) { ; else struct/enum/
            # initialiser bodies (a global "T name = {...};" ends later).
            m = re.search(r"\b(" + NAME + r")\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*$", s)
            if m and words[0] not in ("static", "typedef"):
                names.add(m.group(1))
            elif words[0] not in ("static", "typedef", "extern") and "=" in s:
                m = re.search(r"\b(" + NAME + r")\s*(?:\[[^\]]*\])?\s*=\s*$", s)
                if m:
                    names.add(m.group(1))
            elif not m:
                tail_of = words[0]
            continue
        if after in ("static", "typedef", "extern"):
            continue
        if words[0] in ("static", "typedef", "extern") or "(" in s.split("=")[0]:
            continue
        if s.startswith(("struct", "enum", "union")) and "=" not in s and len(words) == 2:
            continue
        m = re.search(r"\b(" + NAME + r")\s*(?:\[[^\]]*\])?\s*(?:=.*)?$", s, re.S)
        if m:
            names.add(m.group(1))
    return names


def statics(code):
    """Names a file defines or declares static: its uses of them
    are its own, whatever another file defines under the same name."""
    names = set()
    stmts, _ = top_level(code)
    for s, _ in stmts:
        s = s.strip()
        if s.split()[:1] == ["static"]:
            m = re.search(r"\b(" + NAME + r")\s*[(\[=]", s) or re.search(r"\b(" + NAME + r")\s*$", s)
            if m:
                names.add(m.group(1))
    return names


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    dirs = source_dirs(root)
    # where a quoted include is looked for after its own directory
    search = ["lib"] + [d for d in dirs if d == "daemon" or d.startswith("daemon/")]
    files = []
    for d in dirs:
        for f in sorted(os.listdir(os.path.join(root, d))):
            if f.endswith((".c", ".h")):
                files.append(d + "/" + f)
    fileset = set(files)
    raw = {f: open(os.path.join(root, f), encoding="utf-8").read() for f in files}
    code = {f: strip(raw[f]) for f in files}

    edges = {f: set() for f in files}
    why = {}
    for f in files:
        for inc in INCLUDE.findall(raw[f]):
            for d in [os.path.dirname(f)] + search:
                p = os.path.normpath(d + "/" + inc)
                if p in fileset:
                    edges[f].add(p)
                    why.setdefault((f, p), set()).add("#include")
                    break

    defs = {}
    for f in files:
        if f.endswith(".c"):
            for name in definitions(code[f]):
                defs.setdefault(name, []).append(f)
    for name, where in sorted(defs.items()):
        if len(where) > 1:
            print(f"note: {name} defined in {', '.join(where)}")
    # A header's declarations are not uses: its includers' calls are.
    for f in files:
        if f.endswith(".h"):
            continue
        for name in set(SYM.findall(code[f])) - statics(code[f]):
            if f in defs.get(name, []):
                continue  # its own (main, defined by each program)
            for g in defs.get(name, []):
                if g != f:
                    edges[f].add(g)
                    why.setdefault((f, g), set()).add(name)

    print("graph (file -> files it depends on):")
    for f in files:
        if edges[f]:
            print(f"  {f} -> {' '.join(sorted(edges[f]))}")
        else:
            print(f"  {f} (leaf)")

    # Tarjan's strongly connected components.
    index, low, on, stack, sccs = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for f in files:
        if f not in index:
            visit(f)

    nedges = sum(len(e) for e in edges.values())
    print(f"{len(files)} files, {nedges} edges, {len(sccs)} cycle(s)")
    for comp in sccs:
        print(f"cycle of {len(comp)} files: {' '.join(comp)}")
        for f in comp:
            for g in sorted(edges[f] & set(comp)):
                print(f"    {f} -> {g}: {' '.join(sorted(why[(f, g)]))}")
    return 1 if sccs else 0


if __name__ == "__main__":
    sys.exit(main())
