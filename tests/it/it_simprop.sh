#!/bin/sh
# it_simprop.sh - the QoS property test in make check: a few random scenarios in bqos-sim (bqos-sim-prop), issue 25's R targets and the limits asserted; a broken policy (rr) fails; dumped scenarios run in bqos-sim.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_simprop
PROP=$BIN/bqos-sim-prop
[ -x "$PROP" ] || { echo "no $PROP"; exit 1; }

# Seeds 1-5 with the node's scheduler and the controller (pshift-paced),
# judged where the reservations fit and the requests in flight allow the
# guarantee (2 x R at the unloaded round trip): issue 25's targets, met on
# these seeds (100% at >= 99% of R, worst 1.000), and the limits.
nice "$PROP" --seeds 5 --require-met99 0.995 --require-worst 0.9 --require-limits \
    > "$T/tokens.txt" 2>&1; rc=$?
cat "$T/tokens.txt"
check "pshift-paced meets the R targets and the limits on seeds 1-5" "[ $rc -eq 0 ]"
check "every seed judged some bucket-periods" \
    "[ \$(awk '\$1 ~ /^[0-9]+\$/ && \$5 > 0' '$T/tokens.txt' | wc -l) -ge 4 ]"
check "the targets are reported" "grep -q 'target >= 99.5%' '$T/tokens.txt'"

# The checker can fail: round robin (no tokens) misses R and L (worst
# 0.105 x R, 17.6 x L on seeds 1-3).
nice "$PROP" --seeds 3 --policy rr -q --require-worst 0.9 --require-limits \
    > "$T/rr.txt" 2>&1; rc=$?
cat "$T/rr.txt"
check "rr fails the R and L properties" \
    "[ $rc -eq 1 ] && grep -q 'FAIL: worst' '$T/rr.txt' && grep -q 'FAIL: limits' '$T/rr.txt'"

# A seed's scenario is a bqos-load scenario that bqos-sim runs.
"$PROP" --dump 3 > "$T/s3.json"
check "a dumped seed runs in bqos-sim" \
    "$BIN/bqos-sim --scenario '$T/s3.json' -p pshift-paced -q -j '$T/s3.out' && grep -q meet99 '$T/s3.out'"
check "the same seed gives the same scenario" "$PROP --dump 3 | cmp -s - '$T/s3.json'"
it_end
