#!/bin/sh
# it_layout.sh - the layout rules of docs/architecture.md hold: downward includes, a socket-free node core, file sizes, no program built from tests/.
set -u
cd "$(dirname "$0")/../.." || exit 1
exec python3 tests/it/layout_check.py "${O:-build}"
