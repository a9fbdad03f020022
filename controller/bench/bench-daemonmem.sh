#!/bin/sh
# bench-daemonmem.sh - the controller daemon's resident memory per configured bucket at 1 M buckets, after start-up and with 4 fake nodes whose tables name every bucket (in parts), no demand, read before any status (docs/performance.md, "Daemon memory with full-table nodes"); exits 1 over the rule docs/controller.md states.
# Usage: controller/bench/bench-daemonmem.sh [N...]   (default 1000000; BIN, NODES, BASEB, PAIRB as bench-names.sh's MEM=1 mode)
MEM=1 exec "$(dirname "$0")/bench-names.sh" "${@:-1000000}"
