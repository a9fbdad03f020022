#!/usr/bin/env python3
# shares_check.py - checks a run (bqos-sim's buckets CSV) of a scenario whose buckets are all hungry (issue 28, fair shares): the spare capacity (each server's capacity less the reservations placed on it) divides within TOL of the weighted max-min ideal over the bucket-server graph, computed here from the scenario; every reservation is met and every limit holds, per period.
#
# usage: shares_check.py SCENARIO BUCKETS_CSV POLICY [TOL] [CAPACITY_FACTOR]
# The ideal: progressive filling (every bucket's share grows with its
# weight, capped by its limit less its reservation) with a max-flow test of
# feasibility on the bucket-server graph; a bucket is frozen when it cannot
# grow.  Prints one line per bucket and exits 1 if any is off by more than
# TOL (relative, default 0.05) or a reservation or limit is broken.
# CAPACITY_FACTOR scales the scenario's capacity to the one delivered (real
# nodes: measured).
import csv
import json
import sys
from collections import deque


def maxflow(n, edges, s, t):
    """Edmonds-Karp on float capacities; edges: (u, v, cap)."""
    g = [[] for _ in range(n)]
    to, cap = [], []
    for u, v, c in edges:
        g[u].append(len(to)); to.append(v); cap.append(c)
        g[v].append(len(to)); to.append(u); cap.append(0.0)
    flow = 0.0
    while True:
        prev = [-1] * n
        prev[s] = -2
        q = deque([s])
        while q and prev[t] == -1:
            u = q.popleft()
            for e in g[u]:
                if cap[e] > 1e-9 and prev[to[e]] == -1:
                    prev[to[e]] = e
                    q.append(to[e])
        if prev[t] == -1:
            return flow
        f, v = float("inf"), t
        while v != s:
            e = prev[v]
            f = min(f, cap[e])
            v = to[e ^ 1]
        v = t
        while v != s:
            e = prev[v]
            cap[e] -= f
            cap[e ^ 1] += f
            v = to[e ^ 1]
        flow += f


def feasible(x, servers_of, spare):
    B, S = len(x), len(spare)
    n = B + S + 2
    src, snk = B + S, B + S + 1
    edges = [(src, b, x[b]) for b in range(B)]
    for b in range(B):
        for s in servers_of[b]:
            edges.append((b, B + s, float("inf")))
    edges += [(B + s, snk, spare[s]) for s in range(S)]
    return maxflow(n, edges, src, snk) >= sum(x) * (1 - 1e-9) - 1e-6


def ideal(weights, caps, servers_of, spare):
    """Weighted max-min fair totals (progressive filling + max-flow)."""
    B = len(weights)
    x = [0.0] * B
    active = {b for b in range(B) if servers_of[b] and caps[b] > 0}
    frozen = {}
    while active:
        def at(t):
            return [frozen[b] if b in frozen else
                    (min(weights[b] * t, caps[b]) if b in active else 0.0) for b in range(B)]
        lo, hi = 0.0, sum(spare) / min(weights[b] for b in active) + 1
        for _ in range(60):
            mid = (lo + hi) / 2
            if feasible(at(mid), servers_of, spare):
                lo = mid
            else:
                hi = mid
        x = at(lo)
        done = set()
        for b in active:
            if x[b] >= caps[b] - 1e-6:
                done.add(b)
                continue
            y = list(x)
            y[b] += max(1e-3 * (x[b] + 1), 1e-3)
            if not feasible(y, servers_of, spare):
                done.add(b)
        if not done:  # numerical: freeze the smallest
            done = {min(active, key=lambda b: x[b] / weights[b])}
        for b in done:
            frozen[b] = x[b]
        active -= done
    return [frozen.get(b, 0.0) for b in range(B)]


def main():
    scen, bcsv, policy = sys.argv[1:4]
    tol = float(sys.argv[4]) if len(sys.argv) > 4 else 0.05
    cf = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0
    s = json.load(open(scen))
    T = float(s["period"])
    cap = float(s["capacity"]) * cf * T
    snames = [v["name"] for v in s["servers"]]
    bk = s["buckets"]
    B = len(bk)
    servers_of = [[snames.index(n) for n in b.get("servers", [])] for b in bk]
    res = [float(b.get("reservation", 0)) * T for b in bk]
    lim = [float(b["limit"]) * T if b.get("limit") is not None else float("inf") for b in bk]
    w = [float(b.get("weight", 1)) for b in bk]
    # Reservations placed evenly over a bucket's servers (all hungry).
    spare = [cap] * len(snames)
    for b in range(B):
        for sv in servers_of[b]:
            spare[sv] -= res[b] / len(servers_of[b])
    # A bucket wants at most its limit and its demand (open loop: "rate").
    dem = [float(b["rate"]) * T if b.get("rate") is not None else float("inf") for b in bk]
    caps = [max(0.0, min(lim[b], dem[b]) - res[b]) for b in range(B)]
    want = ideal(w, caps, servers_of, spare)
    served = {}
    for r in csv.DictReader(open(bcsv)):
        if r["policy"] == policy:
            served.setdefault(int(r["bucket"]), []).append(float(r["served"]))
    ok = True
    total_spare = sum(spare)
    for b in range(B):
        got = served.get(b, [])
        if not got:
            print("%s: no periods" % bk[b]["name"])
            ok = False
            continue
        mean = sum(got) / len(got)
        extra = mean - res[b]
        # Relative to the ideal, with a floor of 1% of the spare so that a
        # bucket whose ideal is ~0 is judged on an absolute scale.
        err = abs(extra - want[b]) / max(want[b], 0.01 * total_spare)
        r_ok = min(got) >= res[b] * 0.99
        l_ok = max(got) <= lim[b] * 1.01 + 1
        good = err <= tol and r_ok and l_ok
        ok &= good
        print("%s: weight %g on %d servers: beyond R %.0f, ideal %.0f (%+.1f%%)%s%s %s" % (
            bk[b]["name"], w[b], len(servers_of[b]), extra, want[b],
            100 * (extra - want[b]) / max(want[b], 1), "" if r_ok else " R MISSED",
            "" if l_ok else " L BROKEN", "ok" if good else "OFF"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
