#!/usr/bin/env python3
# nested_check.py - checks a bqos-sim run of a scenario with nested buckets (issue 28): every parent's service (the sum of its leaves') within its limit x PERIOD_TOL per period and x WINDOW_TOL per 1 s window, every leaf within its own limit and at its reservation per period.
#
# usage: nested_check.py SCENARIO BUCKETS_CSV INTERVALS_CSV POLICY [PERIOD_TOL WINDOW_TOL]
# The parents are the scenario's (so a run of the same scenario without its
# "parent" members is judged against the caps it ignored).  Prints one line
# per parent and exits 1 if any bound is broken.
import csv
import json
import sys


def main():
    scen, bcsv, icsv, policy = sys.argv[1:5]
    ptol = float(sys.argv[5]) if len(sys.argv) > 5 else 1.01
    wtol = float(sys.argv[6]) if len(sys.argv) > 6 else 1.05
    s = json.load(open(scen))
    T, K = float(s["period"]), int(s["intervals"])
    bk = s["buckets"]
    names = [b["name"] for b in bk]
    parent = {b["name"]: b.get("parent") for b in bk}
    is_parent = {p for p in parent.values() if p}
    leaves_of = {p: [] for p in is_parent}
    for n in names:
        if n in is_parent:
            continue
        up = parent[n]
        while up:
            leaves_of[up].append(names.index(n))
            up = parent[up]
    served = {}  # (period, bucket) -> served
    for r in csv.DictReader(open(bcsv)):
        if r["policy"] == policy:
            served[(int(r["period"]), int(r["bucket"]))] = float(r["served"])
    periods = sorted({p for p, _ in served})
    iv = {}  # bucket -> [served per interval, in time order]
    for r in csv.DictReader(open(icsv)):
        if r["policy"] == policy:
            iv.setdefault(int(r["bucket"]), {})[int(r["period"])] = \
                [float(r["i%d" % (k + 1)]) for k in range(K)]
    series = {b: sum((v[p] for p in sorted(v)), []) for b, v in iv.items()}
    w = max(1, round(1.0 / (T / K)))  # intervals per 1 s window
    bad = 0
    for p in sorted(is_parent):
        lim = bk[names.index(p)].get("limit")
        if lim is None:
            continue
        lv = leaves_of[p]
        worst_p = max(sum(served.get((q, b), 0) for b in lv) / (lim * T) for q in periods)
        tot = [sum(series[b][i] for b in lv) for i in range(len(series[lv[0]]))]
        worst_w = max(sum(tot[i:i + w]) / (lim * w * T / K) for i in range(len(tot) - w + 1))
        ok = worst_p <= ptol and worst_w <= wtol
        bad += not ok
        print("parent %s: limit %g, worst period %.4f x, worst 1 s window %.4f x: %s"
              % (p, lim, worst_p, worst_w, "ok" if ok else "OVER"))
    for i, b in enumerate(bk):
        if b["name"] in is_parent:
            continue
        r, l = b.get("reservation", 0), b.get("limit")
        lo = min(served[(q, i)] / (r * T) for q in periods) if r else 1
        hi = max(served[(q, i)] / (l * T) for q in periods) if l else 0
        ok = lo >= 0.99 and hi <= ptol
        bad += not ok
        print("bucket %s: worst R ratio %.4f, worst L ratio %.4f: %s"
              % (b["name"], lo, hi, "ok" if ok else "BROKEN"))
    sys.exit(1 if bad else 0)


main()
