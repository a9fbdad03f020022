#!/bin/sh
# run-tests.sh - run every test program and integration script given, report each, fail if any failed.
# Usage: run-tests.sh TEST...   (BIN and O in the environment point at the build)
# Test programs (Check suites: executables not named *.sh) run first,
# UNIT_JOBS at a time (default 1: several suites assert on timing - a 0.2 s
# idle timeout, the backend's fail-fast second - and pShift's OpenMP threads
# spin when they share the cores; UNIT_JOBS=2 halves their wall time on an
# idle host).  Integration scripts then run IT_JOBS at a time (default 2:
# most of their wall time is waiting - for a period, an election, a lease -
# and each starts its own servers on free loopback ports), except a script
# whose first 30 lines hold the line "# run-tests: alone" (it measures rates
# or CPU tightly enough that a neighbour would move its figure): those run
# afterwards, one at a time.  Each test's output is shown whole, in the order
# given within its group.  An integration script that fails is run once more,
# alone, after all the others (RETRY=0: not): it counts as passed only if that
# run passes, both runs' output is shown, and the summary names it.  Unit
# suites are never run again.  (Scripts judge real daemons in real time on a
# shared 2-core host; one run in about ten had one such script miss a bound
# once on a starved host - docs/decisions.md, "Integration scripts get one
# retry alone".)
set -u
pass=0; fail=0; failed=""; again=""; retried=""; retrying=0

# report T RC SECS: counts and prints the result of T.
report() {
  if [ "$2" -eq 0 ]; then
    pass=$((pass + 1)); echo "PASS: $1 (${3}s)"
    [ "$retrying" = 0 ] || retried="$retried $1"
  elif [ "$retrying" = 0 ] && [ "${RETRY:-1}" != 0 ] && [ "${1%.sh}" != "$1" ]; then
    again="$again $1"; echo "FAILED ONCE: $1 (exit $2, ${3}s): runs again, alone, at the end"
  else
    fail=$((fail + 1)); failed="$failed $1"; echo "FAIL: $1 (exit $2, ${3}s)"
  fi
}

d=$(mktemp -d /tmp/run-tests.XXXXXX) || exit 1
trap 'rm -rf "$d"' EXIT
n=0 # tests started so far: numbers the scratch files

# batch JOBS TEST...: runs the tests JOBS at a time (a script through sh,
# anything else as a program), then prints each one's output and result in
# the order given.
batch() {
  jobs=$1; shift
  [ $# -gt 0 ] || return 0
  # one: runs test $2 (number $1) with its output in $0/$1.out, then "RC SECS"
  # in $0/$1.rc (renamed into place); $0 is the scratch directory.
  # shellcheck disable=SC2016 # expanded by the sh -c that runs it
  one='start=$(date +%s); case "$2" in *.sh) sh "$2";; *) "$2";; esac >"$0/$1.out" 2>&1; rc=$?
    echo "$rc $(( $(date +%s) - start ))" >"$0/$1.tmp"; mv "$0/$1.tmp" "$0/$1.rc"'
  first=$n list="" # numbered here, not in a pipeline's subshell: n goes on
  for t in "$@"; do n=$((n + 1)); list="$list$n $t
"; done
  printf '%s' "$list" |
    CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60} xargs -P "$jobs" -L 1 sh -c "$one" "$d" &
  xargs_pid=$!
  i=$first
  for t in "$@"; do
    i=$((i + 1))
    while [ ! -f "$d/$i.rc" ]; do
      if ! kill -0 "$xargs_pid" 2>/dev/null && [ ! -f "$d/$i.rc" ]; then
        echo "127 0" >"$d/$i.rc" # xargs is gone without running it
      fi
      sleep 0.1
    done
    cat "$d/$i.out" 2>/dev/null
    read -r rc secs <"$d/$i.rc"
    report "$t" "$rc" "$secs"
  done
  wait "$xargs_pid"
}

units=""; shared=""; alone=""
for t in "$@"; do
  if [ -x "$t" ] && [ "${t%.sh}" = "$t" ]; then units="$units $t"
  elif head -n 30 "$t" 2>/dev/null | grep -qx '# run-tests: alone'; then alone="$alone $t"
  else shared="$shared $t"; fi
done

# shellcheck disable=SC2086 # the lists are space-separated paths
batch "${UNIT_JOBS:-1}" $units
# shellcheck disable=SC2086
batch "${IT_JOBS:-2}" $shared
# shellcheck disable=SC2086
batch 1 $alone
if [ -n "$again" ]; then
  echo "== running again, alone:$again"
  retrying=1
  # shellcheck disable=SC2086
  batch 1 $again
fi
echo "== $pass passed${retried:+ (on a second run:$retried)}, $fail failed"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
