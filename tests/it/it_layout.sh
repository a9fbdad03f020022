#!/bin/sh
# it_layout.sh - the layout rules of docs/architecture.md hold: downward includes, a socket-free node core, no circle of files within a folder (its self-test first proves that rule can fail), no program built from tests/; files over 1,200 lines are warned of.
set -u
cd "$(dirname "$0")/../.." || exit 1
python3 tests/it/layout_check.py --self-test || exit 1
exec python3 tests/it/layout_check.py "${O:-build}"
