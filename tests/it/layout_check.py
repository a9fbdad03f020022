#!/usr/bin/env python3
"""layout_check.py - checks the source tree against docs/architecture.md: arrows run downward, the node core is socket-free, files of one folder call each other in no circle.

Usage: layout_check.py [O]         (run from the repository root; exit 0 when every rule holds)
       layout_check.py --self-test (builds tiny objects that call each other in circles with $CC, default cc,
                                    and checks that rule 3 reports exactly those circles)
O is the build directory (default: $O, else build): its libnodecore.a and its objects O/obj/<path>.o.

Rules (docs/architecture.md, "Layout rules"):
  1. Every #include "..." of a C file points at a folder its component may use (ALLOWED below, most
     specific prefix wins); nothing outside tests/ includes from tests/ or examples/.
  2. storage-node/core/ includes no socket, event-loop or libmemcached header, and its archive
     O/libnodecore.a references no zmq_, event_ or memcached_ symbol.
  3. Files of one folder call each other in no circle: from the built objects' symbols (nm), file A of a
     folder uses file B of the same folder when A leaves undefined a global symbol B defines; every
     strongly connected set of two or more files of this graph (Tarjan) is an error that names the files
     and one symbol per edge (a.c -> b.c (b_fn)).  Only objects of files git tracks count (a stale
     object of a removed file does not); O/obj must hold some.
  4. No program in bin/ is built from tests/ (no *_SRCS of a PROGS entry under tests/).
Not an error: every C file (.c or .h) outside tests/ over WARN_LINES lines is named on a WARNING line:
past that, ask whether it is still one concept.  No file is exempt.  A file is split by concept, never
to fit a line count: a split-off file owns state or a header of its own.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

# folder of the including file -> folders (prefixes) it may include from.  Most specific key wins.
ALLOWED = {
    "common": ["common"],
    "pshift": ["pshift", "common"],
    "controller": ["controller", "pshift", "common"],
    "storage-node/core": ["storage-node/core", "common"],
    # the node's floors: io -> core; mc, nbd -> io, core (not each other); daemon and bench -> all of them
    "storage-node/io": ["storage-node/io", "storage-node/core", "common"],
    "storage-node/mc": ["storage-node/mc", "storage-node/io", "storage-node/core", "common"],
    "storage-node/nbd": ["storage-node/nbd", "storage-node/io", "storage-node/core", "common"],
    "storage-node": ["storage-node", "common"],
    # the load tools speak the NBD wire codec as clients (docs/decisions.md: one owner of the NBD format)
    "workloads": ["workloads", "controller", "storage-node/core", "storage-node/nbd/nbd.h", "pshift",
                  "common"],
    "tests": ["tests", "common", "pshift", "controller", "storage-node", "workloads"],
}
SOCKET_HEADERS = re.compile(r"#\s*include\s*<(zmq\.h|event2/[^>]*|libmemcached/[^>]*|sys/socket\.h|netinet/[^>]*)>")
LOCAL_INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')
WARN_LINES = 1200


def c_files():
    out = subprocess.run(["git", "ls-files", "*.c", "*.h"], capture_output=True, text=True, check=True)
    return [f for f in out.stdout.split() if os.path.exists(f)]


def rule_for(path):
    best = None
    for key in ALLOWED:
        if path == key or path.startswith(key + "/"):
            if best is None or len(key) > len(best):
                best = key
    return best


def check_includes(files, errors):
    """Rules 1 and 2 (the includes); returns {file: line count} for the size warning."""
    lines = {}
    for f in files:
        key = rule_for(f)
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for n, line in enumerate(text.splitlines(), 1):
            m = LOCAL_INCLUDE.search(line)
            if m:
                inc = m.group(1)
                if "/" not in inc:
                    continue  # same-folder include
                if key is None:
                    errors.append(f"{f}:{n}: file outside every component includes {inc}")
                elif not any(inc == a or inc.startswith(a + "/") for a in ALLOWED[key]):
                    errors.append(f"{f}:{n}: {key} may not include {inc} (allowed: {', '.join(ALLOWED[key])})")
            if f.startswith("storage-node/core/") and SOCKET_HEADERS.search(line):
                errors.append(f"{f}:{n}: the node core includes a socket/event/libmemcached header: {line.strip()}")
        lines[f] = text.count("\n")
    return lines


def check_core_archive(out_dir, errors):
    """Rule 2 (the archive)."""
    arc = os.path.join(out_dir, "libnodecore.a")
    if not os.path.exists(arc):
        errors.append(f"{arc}: missing (the node core archive)")
        return
    nm = subprocess.run(["nm", "-u", arc], capture_output=True, text=True, check=True).stdout
    bad = sorted({s for s in nm.split() if re.match(r"(zmq_|event_|evbuffer_|bufferevent_|memcached_)", s)})
    if bad:
        errors.append(f"{arc}: references {', '.join(bad)}")


def symbols(objs):
    """{object: (defined global symbols, undefined symbols)} from nm -g -A."""
    out = {o: (set(), set()) for o in objs}
    for i in range(0, len(objs), 200):
        text = subprocess.run(["nm", "-g", "-A"] + objs[i:i + 200], capture_output=True, text=True,
                              check=True).stdout
        for line in text.splitlines():
            obj, _, rest = line.partition(":")
            parts = rest.split()
            if obj not in out or len(parts) < 2:
                continue
            # "ADDR TYPE NAME" is a definition; "TYPE NAME" (no address: U, w, v) is undefined.
            out[obj][1 if len(parts) == 2 else 0].add(parts[-1])
    return out


def strong_components(nodes, edges):
    """Tarjan's strongly connected components of the graph nodes -> edges[node] (a set of nodes)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
            comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def find_circles(folders):
    """Rule 3.  folders: {folder: {source file: object file}}.  Returns one message per circle: a
    strongly connected set of two or more files of one folder, each edge with one symbol it uses."""
    msgs = []
    for folder in sorted(folders):
        objs = folders[folder]
        syms = symbols(sorted(objs.values()))
        owner = {}  # symbol -> files of this folder that define it
        for src, obj in objs.items():
            for s in syms[obj][0]:
                owner.setdefault(s, set()).add(src)
        edges, via = {}, {}
        for src, obj in objs.items():
            for s in sorted(syms[obj][1]):
                for dst in owner.get(s, ()):
                    if dst != src:
                        edges.setdefault(src, set()).add(dst)
                        via.setdefault((src, dst), s)
        for comp in strong_components(list(objs), edges):
            if len(comp) < 2:
                continue
            inside = set(comp)
            arrows = [f"{os.path.basename(a)} -> {os.path.basename(b)} ({via[(a, b)]})"
                      for a in comp for b in sorted(edges.get(a, ())) if b in inside]
            msgs.append(f"{folder}/: files call each other in a circle: "
                        f"{', '.join(os.path.basename(c) for c in comp)}: {'; '.join(arrows)}")
    return msgs


def check_circles(out_dir, files, errors):
    """Rule 3 over the objects of the tracked C files found under out_dir/obj."""
    folders = {}
    for f in files:
        if f.endswith(".c"):
            obj = os.path.join(out_dir, "obj", f[:-2] + ".o")
            if os.path.exists(obj):
                folders.setdefault(os.path.dirname(f), {})[f] = obj
    if not folders:
        errors.append(f"{os.path.join(out_dir, 'obj')}: no objects of the tracked C files (build first)")
        return
    errors.extend(find_circles(folders))


def check_programs(errors):
    """Rule 4."""
    for mk in subprocess.run(["git", "ls-files", "*.mk"], capture_output=True, text=True, check=True).stdout.split():
        with open(mk) as fh:
            mtext = fh.read()
        progs = re.findall(r"^PROGS\s*\+=\s*(.+)$", mtext, re.M)
        for p in " ".join(progs).split():
            m = re.search(r"^" + re.escape(p) + r"_SRCS\s*[+:]?=\s*(.+)$", mtext, re.M)
            if m and "tests/" in m.group(1):
                errors.append(f"{mk}: program {p} is built from tests/: {m.group(1)}")


def self_test():
    """Rule 3 must be able to fail: two files calling each other, three in a ring, and a chain
    (no circle) beside them, compiled with $CC; exactly the first two are reported."""
    cases = {
        "two": {"a.c": "int b_fn(int);\nint a_fn(int n) { return n ? b_fn(n - 1) : 0; }\n",
                "b.c": "int a_fn(int);\nint b_fn(int n) { return n ? a_fn(n - 1) : 1; }\n"},
        "three": {"x.c": "int y_fn(int);\nint x_fn(int n) { return y_fn(n); }\n",
                  "y.c": "int z_fn(int);\nint y_fn(int n) { return z_fn(n); }\n",
                  "z.c": "int x_fn(int);\nint z_fn(int n) { return n ? x_fn(n - 1) : 0; }\n"},
        "chain": {"p.c": "int q_fn(int);\nint p_fn(int n) { return q_fn(n); }\n",
                  "q.c": "int q_fn(int n) { return n; }\n"},
    }
    cc = shlex.split(os.environ.get("CC") or "cc")
    with tempfile.TemporaryDirectory() as tmp:
        folders = {}
        for folder, srcs in cases.items():
            os.makedirs(os.path.join(tmp, folder))
            for name, code in srcs.items():
                src = os.path.join(tmp, folder, name)
                with open(src, "w") as fh:
                    fh.write(code)
                obj = src[:-2] + ".o"
                subprocess.run(cc + ["-c", src, "-o", obj], check=True)
                folders.setdefault(folder, {})[f"{folder}/{name}"] = obj
        got = find_circles(folders)
    want = ["three/: files call each other in a circle: x.c, y.c, z.c: "
            "x.c -> y.c (y_fn); y.c -> z.c (z_fn); z.c -> x.c (x_fn)",
            "two/: files call each other in a circle: a.c, b.c: a.c -> b.c (b_fn); b.c -> a.c (a_fn)"]
    for g in got:
        print(("ok - found: " if g in want else "not ok - unexpected: ") + g)
    for w in want:
        if w not in got:
            print("not ok - missed: " + w)
    print(f"layout_check --self-test: {'passed' if got == want else 'FAILED'}")
    return 0 if got == want else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("O") or "build"
    errors = []
    files = c_files()
    lines = check_includes(files, errors)
    check_core_archive(out_dir, errors)
    check_circles(out_dir, files, errors)
    check_programs(errors)

    warnings = [f"{f}: {n} lines (over {WARN_LINES}: is it still one concept?)"
                for f, n in sorted(lines.items()) if not f.startswith("tests/") and n > WARN_LINES]
    for w in warnings:
        print("WARNING - " + w)
    for e in errors:
        print("not ok - " + e)
    print(f"layout_check: {len(files)} files, {len(errors)} problems, {len(warnings)} warnings")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
