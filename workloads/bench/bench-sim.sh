#!/bin/sh
# bench-sim.sh - `make bench`: bqos-sim at the full scale of the pShift paper's Experiment 1, events per second per policy.
# Environment: BIN=bin; POLICIES=rr,static,pshift,clairvoyant; extra arguments go to bqos-sim.
set -u
BIN=${BIN:-bin}
T=$(mktemp /tmp/bench-sim.XXXXXX)
trap 'rm -f "$T"' EXIT
start=$(date +%s)
"$BIN/bqos-sim" -q -p "${POLICIES:-rr,static,pshift,clairvoyant}" -j "$T" "$@" || exit 1
python3 - "$T" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["config"]
print("bqos-sim: %d servers, %d buckets, %g IOPS, %d periods of %g s" % (c["servers"], c["buckets"],
      c["capacity"], c["periods"], c["period"]))
print("%-12s %10s %12s %8s %8s %8s" % ("policy", "events", "events/s", "wall s", "ctrl s", ">=95%"))
for p in d["policies"]:
    print("%-12s %9.1fM %12.0f %8.1f %8.2f %7.2f%%" % (p["policy"], p["events"] / 1e6,
          p["events_per_s"], p["wall_s"], p["ctrl_s"], 100 * p["meet95"]))
PY
echo "bqos-sim: $(( $(date +%s) - start )) s in all"
