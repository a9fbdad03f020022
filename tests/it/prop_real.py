#!/usr/bin/env python3
"""prop_real.py - a bqos-sim-prop scenario scaled to the real nodes of this host, and its runtime sets.

  prop_real.py scale SIM.json CAPACITY RTT0_MS DURATION KMAX [--scaled-k] [--rates=R1,R2,...] [--fit=F] > REAL.json
      Servers s0..sN-1 become s1..sN (scripts/lib.sh's names); rates,
      limits and sets scale by f = CAPACITY / the scenario's capacity, or
      with --rates (IOs/s each server delivered under the seed's own
      placement) by the largest f that fits the reservations into F (0.8,
      the generator's rule) of them (max-flow), CAPACITY then their mean;
      requests in flight per bucket and server stay as drawn (at most KMAX),
      or with --scaled-k keep what they allow over R at the unloaded round
      trip (K x f x RTT0 / (the simulator's rtt + parallel / C), rounded
      up, 1..KMAX: on this host mostly 1, see docs/decisions.md);
      "capacity" becomes CAPACITY and workload "rtt_ms" RTT0 less 1 /
      CAPACITY (the checker's concurrency test: rtt + 1 / C); the
      simulator-only "backend" and "speed" go (no server is slowed down);
      duration DURATION (sets and moves after it dropped).
  prop_real.py scale SIM.json 10000 0 DURATION KMAX > DRAWN.json
      The seed as drawn (rates and requests in flight unchanged, at most
      KMAX), servers renamed: the profile runs it.
  prop_real.py sets REAL.json
      One line per runtime set: PERIOD BUCKET RESERVATION LIMIT ("-": none).
  prop_real.py late REAL.json SETS.log > JUDGED.json
      The scenario as the nodes had it: a set answered (SETS.log: "set NAME
      answered at W0 + T s") after its period began is judged from the first
      period after T (dropped past the run, or without an answer).
"""
import json
import math
import sys


def maxflow(need, on, cap):
    """Max-flow of source -> bucket b (need[b]) -> its servers on[b] -> sink (cap[s])."""
    B, S = len(need), len(cap)
    n, src, snk = B + S + 2, B + S, B + S + 1
    c = [[0.0] * n for _ in range(n)]
    for b in range(B):
        c[src][b] = need[b]
        for s in on[b]:
            c[b][B + s] = float("inf")
    for s in range(S):
        c[B + s][snk] = cap[s]
    flow = 0.0
    while True:
        prev = [-1] * n
        prev[src] = src
        q = [src]
        for u in q:
            for v in range(n):
                if prev[v] < 0 and c[u][v] > 1e-9:
                    prev[v] = u
                    q.append(v)
        if prev[snk] < 0:
            return flow
        aug, v = float("inf"), snk
        while v != src:
            aug = min(aug, c[prev[v]][v])
            v = prev[v]
        v = snk
        while v != src:
            c[prev[v]][v] -= aug
            c[v][prev[v]] += aug
            v = prev[v]
        flow += aug


def fit_factor(d, rates, share):
    """Largest f such that f x the reservations fit (max-flow) into
    share x rates[s] (the generator's rule, 0.8, on the real servers' rates)."""
    idx = {s["name"]: i for i, s in enumerate(d["servers"])}
    need = [b["reservation"] for b in d["buckets"]]
    on = [[idx[s] for s in b["servers"]] for b in d["buckets"]]
    cap = [share * r for r in rates]
    lo, hi = 0.0, 10.0
    for _ in range(40):
        x = (lo + hi) / 2
        if maxflow([x * r for r in need], on, cap) >= x * sum(need) * (1 - 1e-9):
            lo = x
        else:
            hi = x
    return lo


def rename(name):
    return "s%d" % (int(name[1:]) + 1)


def scale(path, cap, rtt0_ms, duration, kmax, kmode, rates, share):
    d = json.load(open(path))
    f = cap / d["capacity"]
    if rates:
        # Servers on one host share its cores: a hot server delivers what
        # its share of them allows, not C.  The reservations scale until
        # they fit into 80% of what each server delivered under the seed's
        # own placement (rates), as the generator fits them into 80% of C.
        f = fit_factor(d, rates, share)
        cap = sum(rates) / len(rates)
    be = d.get("backend", {})
    rtt_sim = d["workload"]["rtt_ms"] / 1000 + be.get("parallel", 1) / d["capacity"]
    kf = f * (rtt0_ms / 1000) / rtt_sim if kmode == "--scaled-k" else 1
    for s in d["servers"]:
        s["name"] = rename(s["name"])
        s.pop("speed", None)
    for b in d["buckets"]:
        b["reservation"] = max(1.0, math.floor(b["reservation"] * f))
        if "limit" in b:
            b["limit"] = max(b["reservation"], math.ceil(b["limit"] * f))
        b["servers"] = [rename(s) for s in b["servers"]]
        b["outstanding"] = max(1, min(kmax, math.ceil(b["outstanding"] * kf - 1e-9)))
        sets = [s for s in b.get("set", []) if s["period"] < duration]
        for s in sets:
            s["reservation"] = max(1.0, math.floor(s["reservation"] * f))
            if "limit" in s:
                s["limit"] = max(s["reservation"], math.ceil(s["limit"] * f))
        if sets:
            b["set"] = sets
        else:
            b.pop("set", None)
        ch = [c for c in b.get("changes", []) if c["at"] < duration]
        for c in ch:
            c["servers"] = [rename(s) for s in c["servers"]]
        if ch:
            b["changes"] = ch
        else:
            b.pop("changes", None)
    d.pop("backend", None)
    d["description"] += " on real nodes: capacity %.0f, RTT0 %.3f ms" % (cap, rtt0_ms)
    d["capacity"] = cap
    # The checker's unloaded round trip is rtt + 1 / capacity (no backend
    # model): the measured RTT0 already holds the service.
    d["workload"] = {"rtt_ms": max(0.0, rtt0_ms - 1000 / cap), "preload": 0}
    d["duration"] = duration
    json.dump(d, sys.stdout, indent=1)
    print()


def sets(path):
    d = json.load(open(path))
    for b in d["buckets"]:
        for s in b.get("set", []):
            print(s["period"], b["name"], "%.0f" % s["reservation"],
                  "%.0f" % s["limit"] if "limit" in s else "-")


def late(path, log):
    """The scenario the checker judges: a set whose answer came after its
    period began is moved to the first period that starts after it (it
    reaches the nodes with the controller's next round); one past the run
    is dropped.  Says so on stderr."""
    d = json.load(open(path))
    answered = {}
    for line in open(log):
        w = line.split()
        if len(w) == 8 and w[0] == "set" and w[2] == "answered":
            answered[w[1]] = float(w[6])
    for b in d["buckets"]:
        keep = []
        for s in b.get("set", []):
            t = answered.get(b["name"])
            if t is None:
                sys.stderr.write("set %s for period %d: no answer: dropped\n" % (b["name"], s["period"]))
                continue
            if t > s["period"]:
                p = int(math.floor(t)) + 1
                sys.stderr.write("set %s for period %d answered at W0 + %.3f s: judged from period %d\n"
                                 % (b["name"], s["period"], t, p))
                if p >= d["duration"]:
                    continue
                s["period"] = p
            keep.append(s)
        if keep:
            b["set"] = keep
        else:
            b.pop("set", None)
    json.dump(d, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) >= 6 and a[0] == "scale":
        kmode = "--scaled-k" if "--scaled-k" in a[6:] else ""
        rates = [float(x) for o in a[6:] if o.startswith("--rates=") for x in o[8:].split(",")]
        share = [float(o[6:]) for o in a[6:] if o.startswith("--fit=")] or [0.8]
        scale(a[1], float(a[2]), float(a[3]), int(a[4]), int(a[5]), kmode, rates, share[0])
    elif len(sys.argv) == 3 and sys.argv[1] == "sets":
        sets(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "late":
        late(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
