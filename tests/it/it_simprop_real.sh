#!/bin/sh
# it_simprop_real.sh - the QoS property test on real nodes in make check (issue 25): one bqos-sim-prop seed scaled to this host (memcached + bqos-node pairs on loopback, a controller, bqos-load's closed-loop clients), judged by the simulator's own checker (bqos-sim-prop --measured); the checker fails the same run with one bucket-period's service halved.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_simprop_real bqos-load bqos-node bqos-controller bqos-ctl bqos-sim-prop memcached python3
. "$HERE/prop_real.sh"

# Seed 67: 5 servers, 11 buckets on 1-4 servers each (skewed reservations
# at 75-80% of the servers' capacity, hungry unlimited buckets, limits
# below demand, a bucket that moves); 6 s: 2 periods of warm-up, 4 judged.
# Round robin fails it (limits 1.08 x L; docs/performance.md).
SEED=${SEED:-67}
PR_DUR=${PR_DUR:-6}
pr_run "$SEED" "$T/run" one
echo "$PR_INFO"
cat "$T/run/check.txt" 2>/dev/null
check "the seed ran on real nodes" "[ -s '$T/run/out/periods.csv' ] && [ -s '$T/run/out/servers.csv' ]"
check "bucket-periods were judged" \
  "awk '\$1 == 0 && \$5 > 0 { f = 1 } END { exit !f }' '$T/run/check.txt'"
check "every judged bucket-period >= 99% of R (>= 0.9 x R worst), limits held (rc $PR_RC)" "[ $PR_RC = 0 ]"

# The checker can fail on measured figures: the first judged bucket-period
# with its service halved must fail the R bound.
cp -r "$T/run/out" "$T/bad"
awk -F, 'NR == 2 { print $2 + 1, "b" $3 }' "$T/run/judged.csv" >"$T/victim"
read -r vp vb <"$T/victim"
awk -F, -v p="$vp" -v b="$vb" 'BEGIN { OFS = "," } $1 == p && $2 == b { $5 = int($5 / 2) } { print }' \
  "$T/run/out/periods.csv" >"$T/bad/periods.csv"
"$BIN/bqos-sim-prop" --scenario "$T/run/real.json" --measured "$T/bad" --require-worst 0.9 \
  >"$T/bad.txt" 2>&1; rc=$?
check "with $vb's period $vp halved the checker fails (rc $rc)" "[ $rc = 1 ] && grep -q 'FAIL: worst' '$T/bad.txt'"
it_end 'for f in "$T"/run/*.log; do echo "== $f"; tail -5 "$f"; done'
