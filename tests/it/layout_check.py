#!/usr/bin/env python3
"""layout_check.py - checks the source tree against docs/architecture.md: arrows run downward, the node core is socket-free, no oversized files.

Usage: layout_check.py [ARCHIVE_DIR]   (run from the repository root; exit 0 when every rule holds)

Rules (docs/architecture.md, "Layout rules"):
  1. Every #include "..." of a C file points at a folder its component may use (ALLOWED below, most
     specific prefix wins); nothing outside tests/ includes from tests/ or examples/.
  2. storage-node/core/ includes no socket, event-loop or libmemcached header, and (when ARCHIVE_DIR holds
     libnodecore.a) its archive references no zmq_, event_ or memcached_ symbol.
  3. No C file outside tests/ is over 900 lines, except pshift/pshift.c.
  4. No program in bin/ is built from tests/ (no *_SRCS of a PROGS entry under tests/).
"""
import os
import re
import subprocess
import sys

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
MAX_LINES = 900
EXEMPT_SIZE = {"pshift/pshift.c"}


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


def main():
    errors = []
    files = c_files()
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
        lines = text.count("\n")
        if f.endswith(".c") and not f.startswith("tests/") and f not in EXEMPT_SIZE and lines > MAX_LINES:
            errors.append(f"{f}: {lines} lines (at most {MAX_LINES} outside tests/)")

    if len(sys.argv) > 1:
        arc = os.path.join(sys.argv[1], "libnodecore.a")
        if not os.path.exists(arc):
            errors.append(f"{arc}: missing (the node core archive)")
        else:
            nm = subprocess.run(["nm", "-u", arc], capture_output=True, text=True, check=True).stdout
            bad = sorted({s for s in nm.split() if re.match(r"(zmq_|event_|evbuffer_|bufferevent_|memcached_)", s)})
            if bad:
                errors.append(f"{arc}: references {', '.join(bad)}")

    for mk in subprocess.run(["git", "ls-files", "*.mk"], capture_output=True, text=True, check=True).stdout.split():
        with open(mk) as fh:
            mtext = fh.read()
        progs = re.findall(r"^PROGS\s*\+=\s*(.+)$", mtext, re.M)
        for p in " ".join(progs).split():
            m = re.search(r"^" + re.escape(p) + r"_SRCS\s*[+:]?=\s*(.+)$", mtext, re.M)
            if m and "tests/" in m.group(1):
                errors.append(f"{mk}: program {p} is built from tests/: {m.group(1)}")

    for e in errors:
        print("not ok - " + e)
    print(f"layout_check: {len(files)} files, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
